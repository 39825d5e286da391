/*
 * pivot-runner: runs a sandbox container's commands from inside it, so that a command costs one
 * message on the container's attached stdin/stdout instead of a `docker exec` (a runc process
 * start, about 60 ms).
 *
 * It runs as root under docker-init. Each command runs in a child that drops to the action's
 * uid/gid before exec; the runner holds CAP_KILL (and CAP_SETUID/CAP_SETGID for the switch) and
 * is not dumpable, so a candidate cannot signal it, trace it, or reach its pipes through /proc.
 * After an action it kills every process but itself and init, and reports how many it could not,
 * plus what else is left that is not a file: System V IPC objects, POSIX shm and queues, mounts.
 *
 * Protocol (host -> runner, stdin), one request per command:
 *   "RUN <timeout_ms> <output_cap> <uid> <gid> <flags> <argc>\n", then argc times "<len>\n<bytes>"
 *   uid/gid -1: stay root. flags: 1 = remove the uid's System V IPC objects first,
 *   2 = keep the command's background processes (replay, or a command followed by another),
 *   4 = list the processes left running even when they are kept (the end of a replay).
 * Reply (stdout): "R <status> <signal> <killed> <oom> <left> <outlen> <errlen> <cwdlen> <statelen> <procslen> <forkfails>\n"
 *   + stdout + stderr + cwd + state + procs
 *   status: exit status (-1 when ended by a signal), signal: that signal, killed: 0 no,
 *   1 timeout, 2 output cap, oom: OOM kills in the container during the command, left: processes
 *   still alive after the clean-up plus the non-file state left (`residue`) (-1 when not counted),
 *   cwdlen: length of the cwd the command's process had when it parked (-1: it never parked).
 *   state: the parked process's state as the kernel has it, NUL-delimited "key NUL value NUL" records:
 *   "env:NAME" (its environment: what the shell exported), "limit:<name>" (soft and hard), "umask",
 *   "fd:<n>" (where each open descriptor points: "stdout"/"stderr" for the runner's pipes), then the
 *   pairs the wrapper passed after `--park <status>` (what only the shell knows: options, traps,
 *   aliases, functions). procs: the processes the action left running (read before they are killed),
 *   each "<pid>:<start time>:<state>:<nice>" 0x1e, then its command line (arguments joined by 0x1f),
 *   ended by NUL; only after an
 *   action's last command, or with flag 4. forkfails: forks the pids limit refused during the command.
 * `pivot-runner --park <status>` (the wrapper's last step, as the action's user) stops itself, is
 * continued once the runner has read its cwd, and exits with <status>.
 * A malformed request gets "E <message>\n" and the runner exits.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/fsuid.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/prctl.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FLAG_CLEAN_IPC 1
#define FLAG_KEEP 2
#define FLAG_LIST 4
#define MAX_ARGS 4096
#define STATE_CAP (256 * 1024) /* bytes of a parked process's state, and of the list of processes left */

static long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static void write_all(int fd, const char *buf, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, buf, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            _exit(3); /* the host went away */
        }
        buf += w;
        n -= (size_t)w;
    }
}

static void fail(const char *message) {
    char line[512];
    int n = snprintf(line, sizeof line, "E %s\n", message);
    write_all(1, line, (size_t)n);
    _exit(2);
}

/* The count `key` of the first readable cgroup events file of two (v2, then v1); 0 when neither is readable. */
static long cgroup_count(const char *v2, const char *v1, const char *key) {
    const char *files[] = {v2, v1};
    for (int i = 0; i < 2; i++) {
        FILE *f = fopen(files[i], "r");
        if (!f) continue;
        char name[64];
        long value;
        while (fscanf(f, "%63s %ld", name, &value) == 2) {
            if (strcmp(name, key) == 0) {
                fclose(f);
                return value;
            }
        }
        fclose(f);
    }
    return 0;
}

/* OOM kills so far in this container's memory cgroup. */
static long oom_kills(void) {
    return cgroup_count("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control", "oom_kill");
}

/* Live processes other than init and this runner (zombies wait for init and count as gone). */
static int live_processes(void) {
    DIR *d = opendir("/proc");
    if (!d) return -1;
    int n = 0;
    pid_t self = getpid();
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 1 || pid == self) continue;
        char path[64], buf[512];
        snprintf(path, sizeof path, "/proc/%ld/stat", pid);
        int fd = open(path, O_RDONLY);
        if (fd < 0) continue;
        ssize_t r = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (r <= 0) continue;
        buf[r] = 0;
        char *paren = strrchr(buf, ')');
        if (paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X')) continue;
        n++;
    }
    closedir(d);
    return n;
}

/* Kill everything but init and the runner; wait (briefly) until it is gone; return what is left. */
static int kill_all(void) {
    int left = 0;
    for (int i = 0; i < 100; i++) {
        kill(-1, SIGKILL);
        while (waitpid(-1, NULL, WNOHANG) > 0) {}
        left = live_processes();
        if (left == 0) return 0;
        usleep(2000);
    }
    return left;
}

/* Data lines of a /proc table (its header left out), or of any text file; 0 when unreadable. */
static int count_lines(const char *path, int header) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int n = 0, c, last = '\n';
    while ((c = fgetc(f)) != EOF) {
        if (c == '\n') n++;
        last = c;
    }
    fclose(f);
    if (last != '\n') n++;
    return n > header ? n - header : 0;
}

/* Entries of a folder but . and .. (0 when it cannot be read). */
static int count_entries(const char *path) {
    DIR *d = opendir(path);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    }
    closedir(d);
    return n;
}

/* Forks the container's pids limit refused so far. */
static long fork_failures(void) {
    return cgroup_count("/sys/fs/cgroup/pids.events", "/sys/fs/cgroup/pids/pids.events", "max");
}

/* A growing byte buffer capped at STATE_CAP (what does not fit is dropped, and `over` says so). */
struct blob {
    char *data;
    size_t len;
    int over;
};

static void blob_add(struct blob *b, const char *data, size_t n) {
    if (b->len + n > STATE_CAP) {
        b->over = 1;
        return;
    }
    if (!b->data) b->data = malloc(STATE_CAP);
    if (!b->data) fail("out of memory");
    memcpy(b->data + b->len, data, n);
    b->len += n;
}

/* One "key NUL value NUL" record. */
static void blob_record(struct blob *b, const char *key, const char *value, size_t n) {
    blob_add(b, key, strlen(key) + 1);
    blob_add(b, value, n);
    blob_add(b, "", 1);
}

/* Up to `size` bytes of a file (0 when it cannot be read). */
static size_t slurp(const char *path, char *buf, size_t size) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    size_t n = 0;
    while (n < size) {
        ssize_t r = read(fd, buf + n, size - n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        n += (size_t)r;
    }
    close(fd);
    return n;
}

/* The state of a parked (stopped) wrapper, read from the kernel, never from anything the action printed:
   its environment, limits, umask and open descriptors, then the records the wrapper passed in its argv
   after `--park <status>`. /proc/<pid>/environ and fd need the target's uid as the filesystem uid. */
/* A change of the filesystem uid clears the parent-death signal (the kernel's commit_creds). As pid 1
   of the namespace backend's sandbox the runner holds bubblewrap's --die-with-parent itself (no
   bubblewrap init above it): armed again after each switch back, or a sandbox outlived its killed
   verifying process. */
static void rearm_parent_death(void) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
}

/* What an action can change outside the overlay, which no change set shows: the files the engine binds
   into /etc (Docker's hosts, hostname, resolv.conf; the namespace backend's per-sandbox copies) and the
   device folders (/dev, /dev/shm, /dev/mqueue are tmpfs). Each as a digest of its entries' metadata
   and, for the /etc files, content; a record of the effect's state ("outside:<path>"), and compared
   with the runner's first reading for reuse (`residue`). */
static const char *OUTSIDE_FILES[] = {"/etc/hosts", "/etc/hostname", "/etc/resolv.conf"};
static const char *OUTSIDE_FOLDERS[] = {"/dev", "/dev/shm", "/dev/mqueue"};
#define OUTSIDE_COUNT 6

static unsigned long long fnv(unsigned long long h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

static void stat_line(const char *path, char *out, size_t size) {
    struct stat st;
    if (lstat(path, &st) != 0) { snprintf(out, size, "missing"); return; }
    /* no times: each sandbox's device nodes are made when it starts (runc's, and the namespace
       backend's), so two sandboxes of one state differ in them */
    snprintf(out, size, "%o %u:%u %llx", (unsigned)st.st_mode, (unsigned)st.st_uid, (unsigned)st.st_gid,
             (unsigned long long)st.st_rdev);
}

static void outside_digests(char digests[OUTSIDE_COUNT][96]) {
    static char buf[65536];
    char line[64];
    memset(digests, 0, OUTSIDE_COUNT * 96); /* compared whole with memcmp */
    for (int i = 0; i < 3; i++) {
        stat_line(OUTSIDE_FILES[i], line, sizeof line);
        size_t n = slurp(OUTSIDE_FILES[i], buf, sizeof buf);
        unsigned long long h = fnv(1469598103934665603ULL, buf, n);
        snprintf(digests[i], 96, "%s %zu %016llx", line, n, h);
    }
    for (int i = 0; i < 3; i++) {
        unsigned long long h = 0;
        int count = 0;
        DIR *d = opendir(OUTSIDE_FOLDERS[i]);
        struct dirent *e;
        /* each entry's name and metadata hashed, the hashes summed: a renamed, added or chmod'ed entry
           changes the digest, the order readdir gives them does not */
        while (d && (e = readdir(d))) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            char path[PATH_MAX];
            snprintf(path, sizeof path, "%s/%s", OUTSIDE_FOLDERS[i], e->d_name);
            /* bubblewrap's /dev has a `core` link to /proc/kcore (masked) that runc's has not */
            char target[32];
            ssize_t t = i == 0 && strcmp(e->d_name, "core") == 0 ? readlink(path, target, sizeof target - 1) : -1;
            if (t == 11 && memcmp(target, "/proc/kcore", 11) == 0) continue;
            stat_line(path, line, sizeof line);
            h += fnv(fnv(1469598103934665603ULL, e->d_name, strlen(e->d_name) + 1), line, strlen(line) + 1);
            count++;
        }
        if (d) closedir(d);
        snprintf(digests[3 + i], 96, "%d entries %016llx", count, h);
    }
}

static char baseline_outside[OUTSIDE_COUNT][96];

static void read_outside(struct blob *b) {
    char digests[OUTSIDE_COUNT][96];
    outside_digests(digests);
    for (int i = 0; i < OUTSIDE_COUNT; i++) {
        char key[64];
        snprintf(key, sizeof key, "outside:%s", i < 3 ? OUTSIDE_FILES[i] : OUTSIDE_FOLDERS[i - 3]);
        blob_record(b, key, digests[i], strlen(digests[i]));
    }
}

static int outside_changed(void) {
    char digests[OUTSIDE_COUNT][96];
    outside_digests(digests);
    return memcmp(digests, baseline_outside, sizeof digests) != 0;
}

static void read_state(pid_t pid, long uid, long gid, ino_t out_pipe, ino_t err_pipe, struct blob *b) {
    static char buf[STATE_CAP];
    char path[96], key[512], target[PATH_MAX];
    if (uid >= 0) {
        setfsgid((gid_t)gid);
        setfsuid((uid_t)uid);
    }
    snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
    size_t n = slurp(path, buf, sizeof buf);
    for (size_t i = 0; i < n;) {
        size_t len = strnlen(buf + i, n - i);
        char *eq = memchr(buf + i, '=', len);
        if (eq) {
            size_t klen = (size_t)(eq - (buf + i));
            if (klen > sizeof key - 5) klen = sizeof key - 5;
            memcpy(key, "env:", 4);
            memcpy(key + 4, buf + i, klen);
            key[4 + klen] = 0;
            blob_record(b, key, eq + 1, len - (size_t)(eq + 1 - (buf + i)));
        }
        i += len + 1;
    }
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            char link[320];
            snprintf(link, sizeof link, "/proc/%d/fd/%s", (int)pid, e->d_name);
            ssize_t t = readlink(link, target, sizeof target - 1);
            if (t < 0) continue;
            target[t] = 0;
            struct stat st;
            const char *shown = target;
            if (strncmp(target, "pipe:", 5) == 0 && stat(link, &st) == 0) {
                shown = st.st_ino == out_pipe ? "stdout" : st.st_ino == err_pipe ? "stderr" : "pipe";
            } else if (strncmp(target, "socket:", 7) == 0) {
                shown = "socket";
            }
            snprintf(key, sizeof key, "fd:%s", e->d_name);
            blob_record(b, key, shown, strlen(shown));
        }
        closedir(d);
    }
    if (uid >= 0) {
        setfsuid(0);
        setfsgid(0);
        rearm_parent_death();
    }
    snprintf(path, sizeof path, "/proc/%d/limits", (int)pid);
    n = slurp(path, buf, sizeof buf - 1);
    buf[n] = 0;
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        /* "Max cpu time   unlimited   unlimited   seconds": name, then soft and hard from column 26 */
        if (strncmp(line, "Max ", 4) != 0 || strlen(line) < 26) continue;
        char name[32];
        snprintf(name, sizeof name, "%.25s", line);
        for (int k = (int)strlen(name) - 1; k >= 0 && name[k] == ' '; k--) name[k] = 0;
        snprintf(key, sizeof key, "limit:%s", name);
        blob_record(b, key, line + 26, strlen(line + 26));
    }
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    n = slurp(path, buf, sizeof buf - 1);
    buf[n] = 0;
    char *umask_line = strstr(buf, "\nUmask:");
    if (umask_line) {
        char value[16] = "";
        sscanf(umask_line + 7, "%15s", value);
        blob_record(b, "umask", value, strlen(value));
    }
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    n = slurp(path, buf, sizeof buf);
    /* argv: the runner's path, "--park", the status, then key/value pairs */
    size_t i = 0;
    for (int skip = 0; skip < 3 && i < n; skip++) i += strnlen(buf + i, n - i) + 1;
    while (i < n) {
        size_t klen = strnlen(buf + i, n - i);
        const char *k = buf + i;
        i += klen + 1;
        if (i > n) break;
        size_t vlen = strnlen(buf + i, n - i);
        snprintf(key, sizeof key, "%.*s", (int)(klen < 500 ? klen : 500), k);
        blob_record(b, key, buf + i, vlen);
        i += vlen + 1;
    }
    if (n == sizeof buf) blob_record(b, "truncated", "the shell's state is larger than the runner reads", 49);
    read_outside(b);
}

/* The command lines of live processes other than init and this runner (read before they are killed);
   returns how many of them were runnable. */
static int list_processes(struct blob *b) {
    static char buf[8192];
    int runnable = 0;
    DIR *d = opendir("/proc");
    if (!d) return 0;
    pid_t self = getpid();
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 1 || pid == self) continue;
        char path[64];
        snprintf(path, sizeof path, "/proc/%ld/stat", pid);
        size_t n = slurp(path, buf, sizeof buf - 1);
        buf[n] = 0;
        char *paren = strrchr(buf, ')');
        if (!n || (paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X'))) continue;
        runnable += paren && paren[1] == ' ' && paren[2] == 'R';
        /* the process's identity before its command line: pid, start time (a process killed and started
           again under the same command line is another one), run state (T: stopped) and nice value */
        char state = '?';
        long nice = 0;
        unsigned long long started = 0;
        if (paren)
            sscanf(paren + 2, "%c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %ld %*d %*d %llu",
                   &state, &nice, &started);
        char id[96];
        int idlen = snprintf(id, sizeof id, "%ld:%llu:%c:%ld\x1e", pid, started, state, nice);
        blob_add(b, id, (size_t)idlen);
        snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
        n = slurp(path, buf, sizeof buf);
        if (n == 0) { /* a kernel thread or a process without argv: its name stands in */
            snprintf(path, sizeof path, "/proc/%ld/comm", pid);
            n = slurp(path, buf + 1, sizeof buf - 2) + 1;
            buf[0] = '[';
            if (n > 1 && buf[n - 1] == '\n') n--;
            buf[n++] = ']';
        }
        while (n > 0 && buf[n - 1] == 0) n--;
        for (size_t i = 0; i < n; i++) if (buf[i] == 0) buf[i] = 0x1f;
        blob_add(b, buf, n);
        blob_add(b, "", 1);
    }
    closedir(d);
    return runnable;
}

/* The processes left, listed once they settle. `sleep 3 &` forks a copy of the shell that then
   execs sleep: listed in between, it shows the shell's command line, and which one a verdict names
   would be a race. So list again (2 ms apart, at most 50 ms) while a listed process is runnable or
   the list changed; a process that keeps running (a busy loop) ends the wait at the bound. */
static void list_settled_processes(struct blob *b) {
    int runnable = list_processes(b);
    for (int i = 0; i < 25 && b->len && runnable; i++) {
        struct blob again = {NULL, 0, 0};
        usleep(2000);
        runnable = list_processes(&again);
        int same = again.len == b->len && memcmp(again.data, b->data, b->len) == 0;
        free(b->data);
        *b = again;
        if (same && !runnable) break;
    }
}

static int baseline_mounts = -1;
static int sigchld_pipe[2] = {-1, -1}; /* written on every SIGCHLD: a stopped child wakes poll() */

static void on_sigchld(int sig) {
    (void)sig;
    int saved = errno;
    if (write(sigchld_pipe[1], "c", 1) < 0) {} /* full: a wake-up is pending anyway */
    errno = saved;
}

/* As pid 1 of its namespace (the namespace backend) the runner inherits every orphan: reap the ones
   that ended, but never `keep` (the action's shell, whose status the reply carries). */
static void reap_orphans(pid_t keep) {
    for (;;) {
        siginfo_t info;
        memset(&info, 0, sizeof info);
        if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) return;
        if (info.si_pid == keep) return; /* left for the action's own waitpid */
        waitpid(info.si_pid, NULL, WNOHANG);
    }
}

/* The working directory of a stopped child, read by the kernel's account, not from anything the
   action printed: the wrapper's last step is `exec /.pivot-runner --park <status>`, which stops
   itself. /proc/<pid>/cwd needs the target's uid as the reader's filesystem uid (CAP_SETUID). */
static ssize_t read_cwd(pid_t pid, long uid, long gid, char *buf, size_t size) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/cwd", (int)pid);
    if (uid >= 0) {
        setfsgid((gid_t)gid);
        setfsuid((uid_t)uid);
    }
    ssize_t n = readlink(path, buf, size);
    if (uid >= 0) {
        setfsuid(0);
        setfsgid(0);
        rearm_parent_death();
    }
    return (n >= 0 && (size_t)n < size) ? n : -1;
}

/* State an action can leave that is neither a file of the container's layers nor a process: System V
   IPC objects (whoever owns them now: IPC_SET can hand one to another uid), POSIX shared memory and
   message queues, mounts. Counted after the clean-up; a container with any is not reused. */
static int residue(void) {
    int n = count_lines("/proc/sysvipc/shm", 1) + count_lines("/proc/sysvipc/sem", 1) +
            count_lines("/proc/sysvipc/msg", 1) + count_entries("/dev/shm") + count_entries("/dev/mqueue");
    if (count_lines("/proc/self/mountinfo", 0) != baseline_mounts) n++;
    if (outside_changed()) n++;
    return n;
}

/* Remove the System V IPC objects the current uid owns or created (they are not files: docker diff cannot see them). */
static void clean_ipc(void) {
    const char *files[] = {"/proc/sysvipc/shm", "/proc/sysvipc/sem", "/proc/sysvipc/msg"};
    uid_t me = getuid();
    for (int kind = 0; kind < 3; kind++) {
        FILE *f = fopen(files[kind], "r");
        if (!f) continue;
        char line[1024];
        if (!fgets(line, sizeof line, f)) { fclose(f); continue; }  /* the header */
        while (fgets(line, sizeof line, f)) {
            long key, id, perms, a, b, c, uid, gid, cuid;
            /* shm: key shmid perms size cpid lpid nattch uid gid cuid ...; sem: key semid perms nsems uid
               gid cuid ...; msg: key msqid perms cbytes qnum lspid lrpid uid gid cuid ... The creator may
               remove an object whose owner it changed (IPC_SET), so either id counts. */
            if (kind == 0 && sscanf(line, "%ld %ld %lo %ld %ld %ld %*d %ld %ld %ld", &key, &id, &perms, &a, &b, &c,
                                    &uid, &gid, &cuid) == 9) {
                if ((uid_t)uid == me || (uid_t)cuid == me) shmctl((int)id, IPC_RMID, NULL);
            } else if (kind == 1 && sscanf(line, "%ld %ld %lo %ld %ld %ld %ld", &key, &id, &perms, &a, &uid, &gid,
                                           &cuid) == 7) {
                if ((uid_t)uid == me || (uid_t)cuid == me) semctl((int)id, 0, IPC_RMID);
            } else if (kind == 2 && sscanf(line, "%ld %ld %lo %ld %ld %ld %ld %ld %ld %ld", &key, &id, &perms, &a, &b,
                                           &c, &c, &uid, &gid, &cuid) == 10) {
                if ((uid_t)uid == me || (uid_t)cuid == me) msgctl((int)id, IPC_RMID, NULL);
            }
        }
        fclose(f);
    }
}

static char *read_exact(FILE *in, size_t n) {
    char *buf = malloc(n + 1);
    if (!buf) fail("out of memory");
    if (n && fread(buf, 1, n, in) != n) fail("truncated argument");
    buf[n] = 0;
    return buf;
}

struct buffer {
    char *data;
    size_t len;
};

static void run_one(FILE *in, long timeout_ms, long cap, long uid, long gid, long flags, long argc) {
    if (argc < 1 || argc > MAX_ARGS || cap < 0) fail("bad request");
    char **argv = calloc((size_t)argc + 1, sizeof *argv);
    if (!argv) fail("out of memory");
    for (long i = 0; i < argc; i++) {
        unsigned long len;
        if (fscanf(in, "%lu", &len) != 1 || fgetc(in) != '\n' || len > (64UL << 20)) fail("bad argument length");
        argv[i] = read_exact(in, len);
    }
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) fail("pipe failed");
    struct stat pipe_st;
    ino_t out_ino = fstat(out[0], &pipe_st) == 0 ? pipe_st.st_ino : 0;
    ino_t err_ino = fstat(err[0], &pipe_st) == 0 ? pipe_st.st_ino : 0;
    long oom_before = oom_kills(), forks_before = fork_failures();
    long start = now_ms();
    pid_t child = fork();
    if (child < 0) {
        /* the pids limit: report it as the command's failure, not the runner's */
        char line[128];
        int n = snprintf(line, sizeof line, "R 126 0 0 0 %d 0 %zu -1 0 0 1\n", kill_all() + residue(),
                         strlen("fork failed\n"));
        write_all(1, line, (size_t)n);
        write_all(1, "fork failed\n", strlen("fork failed\n"));
        close(out[0]); close(out[1]); close(err[0]); close(err[1]);
        return;
    }
    if (child == 0) {
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(out[1], 1) < 0 || dup2(err[1], 2) < 0) _exit(126);
        if (devnull > 2) close(devnull);
        /* ignored signals and the signal mask survive exec: every action starts with the defaults
           (`yes | head` needs SIGPIPE's; a verifying process that ignores SIGQUIT must not pass
           that on, or `trap` would show it and two backends or two runs would differ) */
        for (int s = 1; s < NSIG; s++) {
            if (s != SIGKILL && s != SIGSTOP) signal(s, SIG_DFL);
        }
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        setsid();
        if (gid >= 0 && (setgroups(0, NULL) || setgid((gid_t)gid))) { perror("pivot-runner: setgid"); _exit(126); }
        if (uid >= 0 && setuid((uid_t)uid)) { perror("pivot-runner: setuid"); _exit(126); }
        if (flags & FLAG_CLEAN_IPC) clean_ipc();
        execvp(argv[0], argv);
        perror("pivot-runner: exec");
        _exit(127);
    }
    close(out[1]);
    close(err[1]);
    /* a pidfd wakes poll() when the shell exits (Linux >= 5.3); without one, poll in short slices */
    int pidfd = (int)syscall(SYS_pidfd_open, child, 0);
    struct buffer bufs[2] = {{malloc((size_t)cap + 1), 0}, {malloc((size_t)cap + 1), 0}};
    if (!bufs[0].data || !bufs[1].data) fail("out of memory");
    struct pollfd fds[4] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}, {pidfd, POLLIN, 0}, {sigchld_pipe[0], POLLIN, 0}};
    int open_fds = 2, status = 0, exited = 0, killed = 0;
    static char cwd[PATH_MAX];
    ssize_t cwd_len = -1; /* unknown until the child stops (parks) */
    struct blob state = {NULL, 0, 0}, procs = {NULL, 0, 0};
    char scratch[65536];
    for (;;) {
        if (exited && open_fds == 0) break;
        long remaining = start + timeout_ms - now_ms();
        if (remaining <= 0) { killed = 1; break; }
        if (exited) fds[2].fd = -1;
        int wait = exited ? 0 : (pidfd >= 0 ? (int)remaining : (int)(remaining < 20 ? remaining : 20));
        int ready = poll(fds, 4, wait);
        if (ready < 0 && errno != EINTR) break;
        if (ready > 0 && (fds[3].revents & POLLIN)) {
            while (read(sigchld_pipe[0], scratch, sizeof scratch) > 0) {}
            if (!exited) reap_orphans(child);
        }
        for (int i = 0; i < 2 && ready > 0; i++) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            ssize_t r = read(fds[i].fd, scratch, sizeof scratch);
            if (r <= 0) { close(fds[i].fd); fds[i].fd = -1; open_fds--; continue; }
            size_t room = (size_t)cap - bufs[0].len - bufs[1].len;
            size_t take = (size_t)r < room ? (size_t)r : room;
            memcpy(bufs[i].data + bufs[i].len, scratch, take);
            bufs[i].len += take;
            if ((size_t)r >= room) killed = 2;
        }
        if (killed) break;
        if (!exited) {
            int st;
            pid_t w = waitpid(child, &st, WNOHANG | WUNTRACED);
            if (w == child && WIFSTOPPED(st)) {
                cwd_len = read_cwd(child, uid, gid, cwd, sizeof cwd);
                state.len = 0;
                read_state(child, uid, gid, out_ino, err_ino, &state);
                kill(child, SIGCONT);
            } else if (w == child) {
                exited = 1;
                status = st;
            }
        } else if (ready == 0) {
            break; /* the shell ended and its pipes are drained */
        }
    }
    if (pidfd >= 0) close(pidfd);
    /* what is left running is part of the action's effect: listed, then killed (after a command
       stopped, or after an action's last command) */
    if (!killed && (!(flags & FLAG_KEEP) || (flags & FLAG_LIST))) list_settled_processes(&procs);
    int left = (killed || !(flags & FLAG_KEEP)) ? kill_all() : -1;
    if (left >= 0) left += residue();
    if (!exited) {
        /* killed above; a child that outlived kill_all (no CAP_KILL) is not waited for */
        if (waitpid(child, &status, left == 0 ? 0 : WNOHANG) != child) status = W_EXITCODE(0, SIGKILL);
    }
    for (int i = 0; i < 2; i++) {
        if (fds[i].fd >= 0) close(fds[i].fd);
    }
    long oom = oom_kills() - oom_before, forks = fork_failures() - forks_before;
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    char line[256];
    int n = snprintf(line, sizeof line, "R %d %d %d %ld %d %zu %zu %zd %zu %zu %ld\n", code, sig, killed, oom, left,
                     bufs[0].len, bufs[1].len, cwd_len, state.len, procs.len, forks);
    write_all(1, line, (size_t)n);
    write_all(1, bufs[0].data, bufs[0].len);
    write_all(1, bufs[1].data, bufs[1].len);
    if (cwd_len > 0) write_all(1, cwd, (size_t)cwd_len);
    if (state.len) write_all(1, state.data, state.len);
    if (procs.len) write_all(1, procs.data, procs.len);
    free(state.data);
    free(procs.data);
    free(bufs[0].data);
    free(bufs[1].data);
    for (long i = 0; i < argc; i++) free(argv[i]);
    free(argv);
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "--park") == 0) {
        /* the wrapper's last step: stop so that the runner reads this process's cwd, then exit with the status */
        raise(SIGSTOP);
        return argc >= 3 ? atoi(argv[2]) : 0;
    }
    prctl(PR_SET_DUMPABLE, 0); /* no /proc/<pid>/fd, mem or ptrace for a candidate of the same uid */
    if (pipe2(sigchld_pipe, O_CLOEXEC | O_NONBLOCK)) fail("pipe failed");
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigchld;
    sa.sa_flags = SA_RESTART; /* no SA_NOCLDSTOP: a child that stops must wake the runner */
    sigaction(SIGCHLD, &sa, NULL);
    baseline_mounts = count_lines("/proc/self/mountinfo", 0);
    outside_digests(baseline_outside);
    signal(SIGPIPE, SIG_IGN);
    FILE *in = stdin;
    char word[8];
    for (;;) {
        long timeout_ms, cap, uid, gid, flags, argc;
        int got = fscanf(in, "%7s", word);
        if (got == EOF) return 0;
        if (got != 1 || strcmp(word, "RUN") != 0) fail("expected RUN");
        if (fscanf(in, "%ld %ld %ld %ld %ld %ld", &timeout_ms, &cap, &uid, &gid, &flags, &argc) != 6 ||
            fgetc(in) != '\n')
            fail("bad RUN header");
        run_one(in, timeout_ms, cap, uid, gid, flags, argc);
    }
}

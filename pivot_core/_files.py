"""Opening data files safely: regular files only, and reads bounded in size.

Every reader of a user-named file (datasets, corpora, databases) opens it here, because a path
can name something that is not a file: a FIFO blocks `open()` until a writer comes (`gym.make`
hung forever), and `/dev/zero` named `.json` is read until memory runs out. So a path must be a
regular file (after symlinks), opened without blocking and checked on the open descriptor, and a
whole-file read or one record stops at a size cap with an error naming the file.

The cap is `$PIVOT_MAX_DATA_BYTES` (bytes; default 1 GiB), for one whole-file document (a JSON or
YAML file) and for one JSONL record. A JSONL file itself may be any size: it is read a record at
a time.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from pivot_core.errors import DataFileError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no FIFOs to open without blocking either
    fcntl = None  # type: ignore[assignment]

MAX_DATA_BYTES_ENV = "PIVOT_MAX_DATA_BYTES"
DEFAULT_MAX_DATA_BYTES = 1 << 30

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def max_data_bytes() -> int:
    """The size cap of one document or record: `$PIVOT_MAX_DATA_BYTES`, else 1 GiB.

    Raises:
        ValueError: the variable is set but is not a positive integer.
    """
    raw = os.environ.get(MAX_DATA_BYTES_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_DATA_BYTES
    try:
        value = int(raw.replace("_", ""))
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"${MAX_DATA_BYTES_ENV}: expected a positive number of bytes, got {raw!r}")
    return value


def _not_regular(path: Path, mode: int) -> DataFileError:
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    return DataFileError(str(path), None, f"expected a regular file, got {kind}")


def check_regular(path: str | os.PathLike[str]) -> None:
    """Raise `DataFileError` unless `path` is a regular file (symlinks followed); never blocks.

    For readers that hand the path to a library that opens it itself (pyarrow).
    """
    p = Path(path)
    try:
        mode = os.stat(p).st_mode
    except OSError as e:
        raise DataFileError(str(p), None, f"cannot open: {e.strerror or e}") from e
    if not stat.S_ISREG(mode):
        raise _not_regular(p, mode)


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """`path` opened for binary reading, or `DataFileError` when it is missing or not a regular file.

    Opened with O_NONBLOCK, so a FIFO cannot block, then checked on the descriptor itself (no race
    with a file swapped in after a check by name).
    """
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise DataFileError(str(p), None, f"cannot open: {e.strerror or e}") from e
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _not_regular(p, mode)
        if fcntl is not None:  # reads of a regular file never block, but leave the descriptor as open() would
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def too_large(path: str | os.PathLike[str], limit: int, what: str = "file", line: int | None = None) -> DataFileError:
    """The error for a file (or the record at `line`) past the size cap, saying how to raise it."""
    return DataFileError(
        str(path),
        line,
        f"{what} larger than {limit:,} bytes, the cap on what is read at once; "
        f"set ${MAX_DATA_BYTES_ENV} to read it anyway",
    )


def read_bounded(path: str | os.PathLike[str], limit: int | None = None) -> bytes:
    """The bytes of a regular file of at most `limit` bytes (`max_data_bytes()` when None).

    Raises:
        DataFileError: not a regular file, unreadable, or larger than the cap (names the file).
    """
    cap = max_data_bytes() if limit is None else limit
    with open_regular(path) as f:
        try:
            if os.fstat(f.fileno()).st_size > cap:
                raise too_large(path, cap)
            data = f.read(cap + 1)  # a file growing while read still stops at the cap
        except OSError as e:
            raise DataFileError(str(path), None, f"cannot read: {e.strerror or e}") from e
    if len(data) > cap:
        raise too_large(path, cap)
    return data


__all__ = [
    "DEFAULT_MAX_DATA_BYTES",
    "MAX_DATA_BYTES_ENV",
    "check_regular",
    "max_data_bytes",
    "open_regular",
    "read_bounded",
    "too_large",
]

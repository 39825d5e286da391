"""The `tau-airline` world: the tau-bench airline database and its 14 tools.

The database (300 flights, 2,000 reservations, 500 users; about 5 MB of JSON) is read by path,
never copied into the package. Where it is found, first match wins:

1. the `db_path` argument (a folder holding `flights.json`, `reservations.json`, `users.json`,
   or one JSON file `{"flights": ..., "reservations": ..., "users": ...}`);
2. the `PIVOT_TAU_AIRLINE_DB` environment variable (same forms);
3. `tool_use/tau_bench_airline_db/` under `$PIVOT_SHARED_DATA` or the `shared/data` folder
   beside the repository;
4. the bundled subset `pivot_core/data/tau_airline_db_subset.json`: only the users,
   reservations and flights the bundled airline trajectories touch or search, so the bundled
   `pivot/tool-use-v0` pivots replay exactly with no set-up. A candidate call that reaches a
   record outside the subset gets "not found"; verdicts name the database they ran on.

`tau-airline-demo` is the same world on one fixed bundled slice of the database
(`pivot_core/data/tau_airline_db_demo.json.gz`: 100 users, all their reservations, the 48
flights of the busiest routes), whatever else is installed: the demo's synthetic conversations
are written in it and the bundled reference policy was trained on them, so `pivot demo pivotrl`
runs on the same data everywhere.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import io
import json
import os
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from pivot_core import DataFileError, max_data_bytes, open_regular, read_bounded, shared_data_file, too_large
from pivot_tool_worlds import _tau_airline_tools as tools
from pivot_tool_worlds._world import Tool, ToolWorld
from pivot_tool_worlds.errors import WorldDataError

WORLD_NAME = "tau-airline"
DEMO_WORLD_NAME = "tau-airline-demo"
DB_ENV_VAR = "PIVOT_TAU_AIRLINE_DB"
TABLES = ("flights", "reservations", "users")
SUBSET_FILE = "tau_airline_db_subset.json"
DEMO_FILE = "tau_airline_db_demo.json.gz"
TOOLS_FILE = "tau_bench_airline_tools.json"


def _bundled(name: str) -> Path:
    return Path(str(resources.files("pivot_core") / "data" / name))


def _shared_db() -> Path | None:
    found = shared_data_file("tool_use/tau_bench_airline_db/flights.json")
    return found.parent if found else None


def locate_db(db_path: str | os.PathLike[str] | None = None) -> tuple[Path, str]:
    """`(path, kind)` of the airline database to use; kind is "full" or "subset".

    Raises:
        WorldDataError: an explicitly given path (argument or env var) does not exist.
    """
    explicit = db_path if db_path is not None else os.environ.get(DB_ENV_VAR) or None
    if explicit is not None:
        path = Path(explicit)
        if not path.exists():
            source = "db_path" if db_path is not None else DB_ENV_VAR
            raise WorldDataError(
                f"{WORLD_NAME}: expected the airline database at {str(path)!r} ({source}), found nothing there"
            )
        return path, "subset" if path.name == SUBSET_FILE else "full"
    shared = _shared_db()
    if shared is not None:
        return shared, "full"
    return _bundled(SUBSET_FILE), "subset"


def _read_json_bytes(path: Path) -> bytes:
    """A file's bytes, gunzipped when it ends in `.gz`; both sizes within `$PIVOT_MAX_DATA_BYTES`."""
    raw = read_bounded(path)
    if path.suffix != ".gz":
        return raw
    cap = max_data_bytes()
    with gzip.GzipFile(fileobj=io.BytesIO(raw)) as unzipped:
        data = unzipped.read(cap + 1)  # a small file that inflates past the cap stops there
    if len(data) > cap:
        raise too_large(path, cap, "gunzipped file")
    return data


@functools.lru_cache(maxsize=4)
def load_tables(path: str) -> Mapping[str, Mapping[str, Any]]:
    """The three tables from a folder or a single JSON file, gzipped or not (parsed once per path and process)."""
    p = Path(path)
    try:  # regular files within `$PIVOT_MAX_DATA_BYTES` only: a FIFO or a device is an error, not a hang
        if p.is_dir():
            tables = {t: json.loads(read_bounded(p / f"{t}.json").decode("utf-8")) for t in TABLES}
        else:
            tables = json.loads(_read_json_bytes(p).decode("utf-8"))
    # DataFileError and UnicodeDecodeError are ValueErrors; gzip raises BadGzipFile (an OSError) or EOFError
    except (OSError, ValueError, EOFError) as e:
        raise WorldDataError(f"{WORLD_NAME}: cannot read the airline database at {path!r}: {e}") from e
    missing = [t for t in TABLES if not isinstance(tables.get(t), dict)]
    if missing:
        raise WorldDataError(f"{WORLD_NAME}: expected tables {list(TABLES)} in {path!r}, missing {missing}")
    return tables


@functools.lru_cache(maxsize=4)
def db_fingerprint(path: str) -> str:
    """SHA-256 of the database's bytes (its three table files in order, or its one file).

    Read once per process and path, as `load_tables` reads the tables: the fingerprint names the
    content the world was built from, so a verdict cached on one database is never served on another.
    """
    p = Path(path)
    files = [p / f"{t}.json" for t in TABLES] if p.is_dir() else [p]
    digest = hashlib.sha256()
    try:
        for f in files:
            with open_regular(f) as handle:
                for block in iter(lambda handle=handle: handle.read(1 << 20), b""):
                    digest.update(block)
            digest.update(b"\0")
    except (OSError, DataFileError) as e:
        raise WorldDataError(f"{WORLD_NAME}: cannot read the airline database at {path!r}: {e}") from e
    return digest.hexdigest()


@functools.lru_cache(maxsize=1)
def airline_schemas() -> tuple[dict[str, Any], ...]:
    """The 14 airline tool schemas (the bundled copy of tau_bench_airline_tools.json)."""
    return tuple(json.loads(_bundled(TOOLS_FILE).read_text(encoding="utf-8")))


def tau_airline(db_path: str | os.PathLike[str] | None = None) -> ToolWorld:
    """Build the airline world (the factory registered as `tau-airline`).

    Args:
        db_path: the database folder or file; located by `locate_db` when None.
    """
    path, kind = locate_db(db_path)
    return _airline_world(WORLD_NAME, path, kind)


def tau_airline_demo() -> ToolWorld:
    """The airline world on the bundled demo slice (the factory registered as `tau-airline-demo`)."""
    return _airline_world(DEMO_WORLD_NAME, _bundled(DEMO_FILE), "demo")


def _airline_world(world_name: str, path: Path, kind: str) -> ToolWorld:
    impls = {**tools.READ_ONLY, **tools.WRITES}
    world_tools = []
    for schema in airline_schemas():
        name = schema["function"]["name"]
        world_tools.append(
            Tool(schema, impls[name], read_only=name in tools.READ_ONLY, note_args=tools.NOTE_ARGS.get(name, ()))
        )
    tables = load_tables(str(path))
    return ToolWorld(
        world_name, world_tools, tables, description=f"{kind}:{path}", fingerprint=db_fingerprint(str(path))
    )

"""pivot-gym's ground: the data model, errors, formats and pure helpers.

It imports nothing else of the project; the verifier host, the envs, the trainers and the CLI all
build on it. `pivot_envs` re-exports the names users reach for first (`Message`, `Pivot`, ...).
"""

from pivot_core._actions import (
    SHELL_TOOLS,
    TERMINUS_SCHEMA,
    action_commands,
    action_text,
    bash_blocks,
    fenced_commands,
    history_commands,
    history_typed,
    loose_shell,
    message_commands,
    normalize_shell,
    parse_terminus,
    shell_actions,
    shell_call,
    terminus_keystrokes,
    typed_action,
)
from pivot_core._compare import canonical, digit_tokens, normalize_text, normalized_action
from pivot_core._files import (
    MAX_DATA_BYTES_ENV,
    check_regular,
    max_data_bytes,
    open_regular,
    read_bounded,
    too_large,
)
from pivot_core._formats import (
    FORMATS,
    Format,
    detect_format,
    get_format,
    load_pivots,
    open_pivots,
    register_format,
    write_pivots,
)
from pivot_core._harnesses import (
    HARNESSES,
    MINI_SWE_AGENT,
    MINI_SWE_AGENT_ACTION,
    MINI_SWE_AGENT_TIMED_OUT,
    OPENHANDS,
    TERMINUS,
)
from pivot_core._history import History
from pivot_core._hosts import is_loopback
from pivot_core._jsonl import iter_jsonl, write_jsonl
from pivot_core._model import DOMAINS, ROLES, Message, Pivot, Profile, ToolCall, Trajectory
from pivot_core._openhands_bash import NotRun
from pivot_core._paths import SHARED_DATA_ENV, cache_dir, shared_data_file, shared_data_roots
from pivot_core._pivots import Selection, extract_pivots, select_pivots
from pivot_core._pivotseq import ConcatPivots, PivotSequence, candidate_ids, index_of
from pivot_core._render import DOMAIN_PARSERS, chat_message, observation, render_completion
from pivot_core._safejson import decode_json
from pivot_core._shell import COMMAND_POSITION, ShellScan, Typed, scan_shell, trim_command, typed_commands
from pivot_core._split import split_pivots, trajectory_key
from pivot_core.convert._documents import load_yaml
from pivot_core.convert.agent_runs import RUN_FORMATS, convert_runs, find_runs
from pivot_core.errors import (
    AliasBudgetExceeded,
    DataFileError,
    InvalidTrajectory,
    PivotGymError,
    QueryRejected,
    SearchTimeout,
    ServeRefused,
    UnknownFormat,
    UnknownPivot,
    UnsafeJSON,
    did_you_mean,
)

__all__ = [
    "COMMAND_POSITION",
    "ConcatPivots",
    "DOMAINS",
    "DOMAIN_PARSERS",
    "DataFileError",
    "FORMATS",
    "Format",
    "RUN_FORMATS",
    "convert_runs",
    "find_runs",
    "InvalidTrajectory",
    "History",
    "HARNESSES",
    "MINI_SWE_AGENT",
    "MINI_SWE_AGENT_ACTION",
    "MINI_SWE_AGENT_TIMED_OUT",
    "OPENHANDS",
    "TERMINUS",
    "AliasBudgetExceeded",
    "load_yaml",
    "MAX_DATA_BYTES_ENV",
    "check_regular",
    "max_data_bytes",
    "open_regular",
    "read_bounded",
    "too_large",
    "Message",
    "Pivot",
    "PivotGymError",
    "QueryRejected",
    "SearchTimeout",
    "PivotSequence",
    "Profile",
    "ROLES",
    "SHARED_DATA_ENV",
    "SHELL_TOOLS",
    "Selection",
    "ServeRefused",
    "TERMINUS_SCHEMA",
    "ToolCall",
    "Trajectory",
    "UnknownFormat",
    "UnknownPivot",
    "UnsafeJSON",
    "action_commands",
    "history_commands",
    "history_typed",
    "typed_action",
    "Typed",
    "typed_commands",
    "ShellScan",
    "scan_shell",
    "trim_command",
    "message_commands",
    "fenced_commands",
    "canonical",
    "digit_tokens",
    "normalize_text",
    "normalized_action",
    "action_text",
    "bash_blocks",
    "cache_dir",
    "shared_data_file",
    "shared_data_roots",
    "candidate_ids",
    "chat_message",
    "decode_json",
    "detect_format",
    "did_you_mean",
    "extract_pivots",
    "get_format",
    "index_of",
    "is_loopback",
    "iter_jsonl",
    "load_pivots",
    "normalize_shell",
    "loose_shell",
    "observation",
    "open_pivots",
    "parse_terminus",
    "register_format",
    "render_completion",
    "select_pivots",
    "shell_actions",
    "shell_call",
    "NotRun",
    "split_pivots",
    "terminus_keystrokes",
    "trajectory_key",
    "write_jsonl",
    "write_pivots",
]

"""pivot-gym: PivotRL-style agentic post-training as Gymnasium environments.

`import pivot_envs` registers `pivot/tool-use-v0`, `pivot/swe-v0`, `pivot/terminal-v0` and
`pivot/browse-v0`; `gym.make("pivot_envs:pivot/terminal-v0")` works without the import.
"""

from pivot_core import (
    DOMAINS,
    FORMATS,
    Format,
    Message,
    Pivot,
    Profile,
    Selection,
    ToolCall,
    Trajectory,
    detect_format,
    extract_pivots,
    load_pivots,
    observation,
    register_format,
    render_completion,
    select_pivots,
    write_pivots,
)
from pivot_core.errors import DataFileError, InvalidTrajectory, PivotGymError, UnknownFormat, UnknownPivot
from pivot_envs._checker import check_pivot_env
from pivot_envs._env import PivotEnv
from pivot_envs._protocols import ScoringEnv, as_scoring_env
from pivot_envs._registration import ensure_registered
from pivot_envs._spaces import ChatSpace, CompletionSpace
from pivot_envs.errors import RegistrationError, RemoteError

__version__ = "0.1.0"

ENV_IDS = ("pivot/tool-use-v0", "pivot/swe-v0", "pivot/terminal-v0", "pivot/browse-v0")

ensure_registered("pivot/tool-use-v0", "pivot_envs.domains.tool_use:ToolUseEnv")
ensure_registered("pivot/swe-v0", "pivot_envs.domains.swe:SweEnv")
ensure_registered("pivot/terminal-v0", "pivot_envs.domains.terminal:TerminalEnv")
ensure_registered("pivot/browse-v0", "pivot_envs.domains.browse:BrowseEnv")
# Episode envs (multi-turn from a pivot, outcome reward); their contract is `EpisodeEnv`'s, not `PivotEnv`'s.
EPISODE_ENV_IDS = ("pivot/tool-use-episode-v0", "pivot/terminal-episode-v0")
ensure_registered("pivot/tool-use-episode-v0", "pivot_envs.episodes:ToolUseEpisodeEnv")
ensure_registered("pivot/terminal-episode-v0", "pivot_envs.episodes:TerminalEpisodeEnv")

__all__ = [
    "RegistrationError",
    "RemoteError",
    "ScoringEnv",
    "as_scoring_env",
    "DOMAINS",
    "ENV_IDS",
    "EPISODE_ENV_IDS",
    "FORMATS",
    "ChatSpace",
    "CompletionSpace",
    "DataFileError",
    "Format",
    "InvalidTrajectory",
    "Message",
    "Pivot",
    "PivotEnv",
    "PivotGymError",
    "Profile",
    "Selection",
    "ToolCall",
    "Trajectory",
    "UnknownFormat",
    "UnknownPivot",
    "check_pivot_env",
    "detect_format",
    "extract_pivots",
    "load_pivots",
    "observation",
    "register_format",
    "render_completion",
    "select_pivots",
    "write_pivots",
]

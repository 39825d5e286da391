"""Built-in user simulators for episode envs: `recorded` and `llm` (hook `register_user_simulators`).

A simulator plays the user of a conversational task (tau-bench): after each agent message
addressed to the user, the episode env asks it for the user's next message.

- `recorded` replays the trajectory's own user messages in order: its n-th reply is the n-th
  recorded user message after the ones already in the conversation. Its limit: it assumes the
  agent stays on the recorded path. An agent that asks different questions still gets the
  recorded answers (which may no longer fit), and once the record runs out the user is done.
  It is exact for replaying the recorded agent and deterministic; for a policy that strays it is
  a cheap approximation, and `llm` is the faithful choice.
- `llm` asks any OpenAI-compatible `/chat/completions` endpoint to play the user from the
  task's instruction, as tau-bench's own user simulation does (roles flipped: the agent's texts
  are the model's "user" turns; tool traffic is not shown to the user).

A simulator never raises on the agent's text: a failure (HTTP error, empty reply) is a
`UserReply` with `error` set, which the env turns into an error outcome, never a silent 0.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pivot_core import Message
from verifiers_plugins.hookspecs import hookimpl

STOP_TOKEN = "###STOP###"  # tau-bench's user ends the conversation with this token
URL_VAR = "PIVOT_USER_SIM_URL"
MODEL_VAR = "PIVOT_USER_SIM_MODEL"

# tau-bench's user-simulation instructions (tau_bench/envs/user.py), in its wording's spirit.
SYSTEM_PROMPT = """You are a user interacting with an agent.

Instruction: {instruction}

Rules:
- Just generate one line at a time to simulate the user's message.
- Do not give away all the instruction at once. Only provide the information that is necessary for the current step.
- Do not hallucinate information that is not provided in the instruction. For example, if the agent asks for \
the order id but it is not mentioned in the instruction, do not make up an order id, just say you do not remember \
or have it.
- If the instruction goal is satisified, generate '###STOP###' as a standalone message without anything else to end \
the conversation.
- Do not repeat the exact instruction in the conversation. Instead, use your own words to convey the same information.
- Try to make the conversation as natural as possible, and stick to the personalities in the instruction."""


@dataclass(frozen=True)
class UserReply:
    """The simulated user's next turn.

    Attributes:
        content: the user's message, None when the user has nothing more to say.
        stop: True when the user ends the conversation (tau-bench's `###STOP###`, or no more turns).
        reason: why the conversation stops (empty while it goes on).
        error: set when the simulator could not produce a reply (the episode's outcome is an error).
    """

    content: str | None
    stop: bool = False
    reason: str = ""
    error: str | None = None


def _reply_from_text(text: str) -> UserReply:
    if STOP_TOKEN in text:
        return UserReply(text, True, f"the user said {STOP_TOKEN}")
    return UserReply(text)


class RecordedUser:
    """Replays the recorded user messages in order (see the module docstring for its limit)."""

    deterministic = True

    def reply(
        self, conversation: Sequence[Message], *, task: Mapping[str, Any], recorded: Sequence[Message]
    ) -> UserReply:
        """The recorded user message that follows the ones already in `conversation`.

        Args:
            conversation: the episode so far (history at the pivot plus the agent's turns).
            task: the task (unused: the record already holds the user's side).
            recorded: every message of the recorded trajectory.
        """
        said = sum(1 for m in conversation if m.role == "user")
        users = [m for m in recorded if m.role == "user"]
        if said >= len(users):
            return UserReply(None, True, "the recorded conversation has no further user message")
        return _reply_from_text(users[said].content or "")


class LLMUser:
    """Plays the user from the task's instruction through an OpenAI-compatible endpoint.

    Args:
        url: API root (e.g. "http://127.0.0.1:8000/v1"); `$PIVOT_USER_SIM_URL` when None.
        model: model name sent in each request; `$PIVOT_USER_SIM_MODEL`, else "default".
        api_key: bearer token, when the server wants one.
        temperature: sampling temperature (tau-bench's default is 0).
        request_timeout: seconds per HTTP request.
        retries: extra attempts after a transport error or a 5xx answer.
    """

    deterministic = False

    def __init__(
        self,
        url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        temperature: float = 0.0,
        request_timeout: float = 60.0,
        retries: int = 2,
    ) -> None:
        self.url = (url or os.environ.get(URL_VAR) or "").rstrip("/")
        if not self.url:
            raise ValueError(f"llm user simulator: expected a url (argument or ${URL_VAR}), got none")
        if retries < 0:
            raise ValueError(f"llm user simulator: expected retries >= 0, got {retries}")
        self.model = model or os.environ.get(MODEL_VAR) or "default"
        self.api_key = api_key
        self.temperature = temperature
        self.request_timeout = request_timeout
        self.retries = retries

    def reply(
        self, conversation: Sequence[Message], *, task: Mapping[str, Any], recorded: Sequence[Message]
    ) -> UserReply:
        """Ask the endpoint for the user's next message (never raises; failures set `error`)."""
        body = {
            "model": self.model,
            "messages": user_view(conversation, str(task.get("instruction", ""))),
            "temperature": self.temperature,
        }
        try:
            text = self._post(body)
        except Exception as e:  # the endpoint failed, not the agent: an error outcome, never a guess
            return UserReply(None, True, "the user simulator failed", error=f"{type(e).__name__}: {e}")
        if not text.strip():
            return UserReply(None, True, "the user simulator failed", error="the endpoint returned an empty message")
        return _reply_from_text(text)

    def _post(self, body: dict[str, Any]) -> str:
        import httpx  # only this simulator needs an HTTP client

        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        last: Exception | None = None
        for _ in range(self.retries + 1):
            try:
                r = httpx.post(f"{self.url}/chat/completions", json=body, headers=headers, timeout=self.request_timeout)
            except (httpx.TimeoutException, httpx.TransportError) as e:
                last = e
                continue
            if r.status_code >= 500:
                last = RuntimeError(f"HTTP {r.status_code} from {self.url}")
                continue
            r.raise_for_status()
            return str(r.json()["choices"][0]["message"]["content"] or "")
        raise RuntimeError(f"no answer after {self.retries + 1} attempt(s): {last}")


def user_view(conversation: Sequence[Message], instruction: str) -> list[dict[str, str]]:
    """The conversation as the simulated user sees it: roles flipped, tool traffic left out."""
    out = [{"role": "system", "content": SYSTEM_PROMPT.format(instruction=instruction)}]
    for m in conversation:
        if m.role == "user":
            out.append({"role": "assistant", "content": m.content or ""})
        elif m.role == "assistant" and not m.tool_calls and (m.content or "").strip():
            out.append({"role": "user", "content": m.content or ""})
    if len(out) == 1:  # tau-bench opens the user's side with the agent's greeting
        out.append({"role": "user", "content": "Hi! How can I help you today?"})
    return out


@hookimpl
def register_user_simulators(register: Callable[..., None]) -> None:
    """Register `recorded` and `llm`."""
    register("recorded", RecordedUser)
    register("llm", LLMUser)

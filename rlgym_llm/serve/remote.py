"""`rlgym/Remote-v0`: an env that runs on an OpenEnv server, this project's (`rlgym serve`) or a third party's.

    env = rlgym_llm.make("rlgym/Remote-v0", url="ws://10.0.0.5:8000", split="test")
    messages, info = env.reset(seed=3)              # the served env's opening, tools and task facts
    messages, reward, terminated, truncated, info = env.step(turn)

One WebSocket connection is one server session (one env instance there), kept across episodes and
reopened when it drops between them. A connection that cannot be opened, or a server at its session
cap, is retried `retries` times with doubling delays; a reset is retried the same way when the
connection drops (nothing of the episode lives on the server yet). A connection lost in the middle of
an episode, an answer later than `step_timeout_s` or an error from the server raises
`RemoteEnvError`: the rollout manager records it on the trajectory as an env failure and goes on.

A third-party server speaks its own action and observation fields: `action_field` names the field
that takes the assistant's text; an observation without `messages` becomes one user message (its
only text field, or its JSON). Its reward is the step's `reward`; its outcome the episode's return.
"""

from __future__ import annotations

import json
import math
import os
import time
from typing import Any, ClassVar

import gymnasium

from rlgym_llm.core.env import Task
from rlgym_llm.core.errors import ConfigError, MissingDependencyError, RlgymError
from rlgym_llm.core.spaces import ActionSpace, ChatSpace
from rlgym_llm.core.types import AssistantTurn, Messages, StepSignals
from rlgym_llm.serve.wire import SESSION_CLOSED, action_payload

TRANSIENT_CODES = frozenset({"CAPACITY_REACHED", "SESSION_CLOSED"})
"""Server error codes worth another try on a new connection (the server is full right now, or it closed
the session after an idle spell)."""


class RemoteEnvError(RlgymError, ConnectionError):
    """The remote env could not answer: unreachable, timed out, connection lost, or a server error."""

    # The rollout manager records it as an env failure (a ConnectionError would otherwise read as the
    # inference engine's).
    failure_kind = "env"

    def __init__(self, message: str, code: str | None = None):
        super().__init__(message)
        self.code = code


class RemoteEnv(gymnasium.Env[Messages, Any]):
    """An OpenEnv server's env as a local Gymnasium env (the rlgym env contract, see the module docstring).

    Args:
        url: the server, `ws://host:port` or `http://host:port` (its `/ws` endpoint is used).
        split: the content pool asked of the served env at each reset (`train`, `val`, `test`; an env
            without splits ignores it). None: the server's default.
        token_env: the environment variable that holds the server's bearer token (none set: no token).
        connect_timeout_s: limit for opening a connection.
        step_timeout_s: limit for one reset, step or state answer.
        retries: extra attempts to connect or reset on a transient failure.
        retry_backoff_s: the first retry's delay; it doubles each time.
        action_field: for a third-party server, the action field that takes the assistant's text.
        max_message_bytes: the largest answer accepted from the server.
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012  (Gymnasium's own annotation)
    provides_outcome: ClassVar[bool] = True  # `outcome()` is the served env's (the rollout manager reads it)

    def __init__(
        self,
        url: str | None = None,
        split: str | None = None,
        token_env: str = "RLGYM_SERVE_TOKEN",
        connect_timeout_s: float = 10.0,
        step_timeout_s: float = 120.0,
        retries: int = 3,
        retry_backoff_s: float = 0.25,
        action_field: str | None = None,
        max_message_bytes: int = 64 << 20,
    ):
        problems = []
        if not isinstance(url, str) or not url.strip():
            problems.append("url: name the server, e.g. env.url=ws://127.0.0.1:8000 (`rlgym serve ENV_ID` prints it)")
        elif not url.startswith(("ws://", "wss://", "http://", "https://")):
            problems.append(f"url must start with ws://, wss://, http:// or https://, got {url!r}")
        for name, value in (("connect_timeout_s", connect_timeout_s), ("step_timeout_s", step_timeout_s)):
            if not isinstance(value, (int, float)) or value <= 0:
                problems.append(f"{name} must be > 0, got {value!r}")
        if not isinstance(retries, int) or retries < 0:
            problems.append(f"retries must be an int >= 0, got {retries!r}")
        if problems:
            raise ConfigError(problems)
        assert isinstance(url, str)
        base = url.rstrip("/")
        base = "ws" + base[4:] if base.startswith("http") else base
        self.url = base if base.endswith("/ws") else f"{base}/ws"
        self.split = split
        self.token = os.environ.get(token_env) or None
        self.connect_timeout_s, self.step_timeout_s = float(connect_timeout_s), float(step_timeout_s)
        self.retries, self.retry_backoff_s = retries, float(retry_backoff_s)
        self.action_field = action_field
        self.max_message_bytes = max_message_bytes
        self.observation_space = ChatSpace()
        self.action_space = ActionSpace()
        self.render_mode = None
        self.reward_range: tuple[float, float] = (-math.inf, math.inf)  # the served env's, after the first reset
        self._limit: int | None = None  # the server's largest request (learned with the reward range)
        self._ws: Any = None
        self._reset_done = False
        self._return = 0.0

    # --- the Gymnasium API ----------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Messages, dict]:
        super().reset(seed=seed)
        data: dict[str, Any] = {"seed": seed}
        if options is not None:
            data["options"] = options
        if self.split is not None:
            data["split"] = self.split
        last: Exception | None = None
        for attempt in range(self.retries + 1):
            try:
                payload = self._request({"type": "reset", "data": data})
                break
            except RemoteEnvError as e:
                last = e
                if not _transient(e) or attempt == self.retries:
                    raise
                self._drop()
                time.sleep(self.retry_backoff_s * 2**attempt)
        else:  # pragma: no cover - the loop breaks or raises
            raise AssertionError(last)
        self._reset_done, self._return = True, 0.0
        messages, info, *_ = self._read(payload)
        tools = info.get("tools")
        if isinstance(tools, list):  # the served env's tools, for action_space.sample()
            names = [t.get("function", {}).get("name") for t in tools if isinstance(t, dict)]
            self.action_space = ActionSpace([n for n in names if isinstance(n, str)])
        if self._limit is None:
            self._learn_limits()
        return messages, info

    def step(self, action: Any) -> tuple[Messages, float, bool, bool, dict]:
        if not self._reset_done:
            raise gymnasium.error.ResetNeeded("call env.reset() before env.step()")
        message = {"type": "step", "data": self._action(action)}
        size = len(json.dumps(message).encode())
        if self._limit and size > self._limit:
            # The server would drop the connection, and the episode with it: refuse it here, as an env refuses
            # a malformed action, and the episode goes on.
            error = f"Error: this action is {size} bytes, more than the env server accepts ({self._limit}); it was not sent."
            info = {"signals": StepSignals(tool_ok=False).to_dict(), "error": "request_too_large"}
            return [{"role": "user", "content": error}], 0.0, False, False, info
        payload = self._request(message)
        messages, info, reward, terminated, truncated = self._read(payload)
        self._return += reward
        return messages, reward, terminated, truncated, info

    def close(self) -> None:
        self._drop(polite=True)
        self._reset_done = False

    # --- what trainers read ---------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """The server's `state` of this session (env id, split, task id, turns, outcome so far)."""
        data = self._request({"type": "state"}).get("data")
        return data if isinstance(data, dict) else {}

    def _learn_limits(self) -> None:
        """The served env's reward range and the server's request limit (a third party's: unknown)."""
        st = self.state()
        bounds = st.get("reward_range")
        if isinstance(bounds, (list, tuple)) and len(bounds) == 2:
            lo, hi = (float(b) if isinstance(b, (int, float)) else s * math.inf for b, s in zip(bounds, (-1, 1)))
            self.reward_range = (lo, hi)
        limit = st.get("max_request_bytes")
        self._limit = int(limit) if isinstance(limit, int) and limit > 0 else 0

    def outcome(self) -> dict[str, Any]:
        """The served env's outcome as things stand (a third-party server: the episode's return)."""
        outcome = self.state().get("outcome")
        if isinstance(outcome, dict) and "reward" in outcome:
            return outcome
        return {"reward": self._return, "components": {}}

    @property
    def task(self) -> Task:
        """The current task, from a server started with `--expose-task` (ground truth included)."""
        task = self.state().get("task")
        if not isinstance(task, dict):
            raise RemoteEnvError(
                f"the server at {self.url} does not share its tasks: start it with `rlgym serve ... --expose-task` "
                "(for IGPO's gold answers or an oracle that reads the task)"
            )
        return Task(
            id=str(task.get("id")),
            prompt=str(task.get("prompt", "")),
            answer=task.get("answer"),
            hidden=task.get("hidden") or {},
            meta=task.get("meta") or {},
            key=task.get("key"),
        )

    # --- the wire -------------------------------------------------------------------------------

    def _action(self, action: Any) -> dict[str, Any]:
        if self.action_field is None:
            return action_payload(action)
        try:
            text = AssistantTurn.coerce(action).content
        except RlgymError:
            text = str(action)
        return {self.action_field: text}

    def _read(self, payload: dict[str, Any]) -> tuple[Messages, dict, float, bool, bool]:
        raw = payload.get("observation")
        obs: dict[str, Any] = raw if isinstance(raw, dict) else {}
        done = bool(payload.get("done", False))
        reward = float(payload.get("reward") or 0.0)
        if isinstance(obs.get("messages"), list):  # an rlgym server
            served = obs.get("info")
            truncated = bool(obs.get("truncated", False))
            terminated = bool(obs.get("terminated", done and not truncated))
            return (
                list(obs["messages"]),
                dict(served) if isinstance(served, dict) else {},
                reward,
                terminated,
                truncated,
            )
        texts = [v for v in obs.values() if isinstance(v, str)]
        content = texts[0] if len(texts) == 1 else json.dumps(obs, sort_keys=True)
        info: dict[str, Any] = {"observation": obs}
        if done:
            info["outcome"] = {"reward": self._return + reward, "components": {}}
        return [{"role": "user", "content": content}], info, reward, done, False

    def _connect(self) -> Any:
        try:
            from websockets.exceptions import InvalidHandshake, InvalidURI
            from websockets.sync.client import connect
        except ImportError as e:
            raise MissingDependencyError.of(e, "rlgym/Remote-v0", extra="serve") from e
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else None
        last: Exception | None = None
        for attempt in range(self.retries + 1):
            try:
                ws = connect(
                    self.url,
                    open_timeout=self.connect_timeout_s,
                    additional_headers=headers,
                    max_size=self.max_message_bytes,
                    close_timeout=2,
                )
                # The connection outlives this call (one session across episodes); `_drop` closes it.
                # Entered as a context manager, as websockets >= 17.1 asks of a connection used directly.
                return ws.__enter__()
            except InvalidURI as e:
                raise RemoteEnvError(f"bad server url {self.url!r}: {e}") from e
            except (OSError, TimeoutError, InvalidHandshake) as e:
                last = e
                status = getattr(getattr(e, "response", None), "status_code", None)
                if status in (401, 403):
                    raise RemoteEnvError(
                        f"the server at {self.url} refused the connection ({status}): set its bearer token "
                        "in the environment variable that `token_env` names (RLGYM_SERVE_TOKEN by default)",
                        code="UNAUTHORIZED",
                    ) from e
                if attempt < self.retries:
                    time.sleep(self.retry_backoff_s * 2**attempt)
        raise RemoteEnvError(
            f"cannot reach the env server at {self.url} after {self.retries + 1} attempts: "
            f"{type(last).__name__}: {last}"
        ) from last

    def _request(self, message: dict[str, Any]) -> dict[str, Any]:
        from websockets.exceptions import ConnectionClosed

        if self._ws is None:
            self._ws = self._connect()
        kind = message["type"]
        try:
            self._ws.send(json.dumps(message))
            raw = self._ws.recv(timeout=self.step_timeout_s)
        except TimeoutError as e:
            self._drop()  # the server closes the session (and its sandbox) when the connection goes
            raise RemoteEnvError(
                f"the env server at {self.url} did not answer a {kind} within step_timeout_s={self.step_timeout_s:g}s"
            ) from e
        except (ConnectionClosed, OSError) as e:
            ws = self._ws
            self._drop()
            last_words = _pending(ws)  # a server that refuses a session says why, then closes
            if last_words is not None:
                raw = last_words
            else:
                lost = "" if kind == "reset" else " (the episode's state on the server is gone)"
                raise RemoteEnvError(f"the connection to {self.url} was lost during a {kind}{lost}: {e}", "LOST") from e
        try:
            response = json.loads(raw)
        except (json.JSONDecodeError, TypeError) as e:
            raise RemoteEnvError(f"the env server at {self.url} answered a {kind} with invalid JSON: {e}") from e
        if not isinstance(response, dict):
            raise RemoteEnvError(f"the env server at {self.url} answered a {kind} with {type(response).__name__}")
        if response.get("type") == "error":
            given = response.get("data")
            data: dict[str, Any] = given if isinstance(given, dict) else {}
            code = str(data.get("code", "UNKNOWN"))
            if str(data.get("message", "")).startswith(SESSION_CLOSED):
                code = "SESSION_CLOSED"  # idle timeout: the connection is dead weight, the next reset opens a new one
            if code in TRANSIENT_CODES:
                self._drop()  # the server closes a refused connection
            errors = data.get("errors")
            detail = f" {json.dumps(errors)[:500]}" if errors else ""
            raise RemoteEnvError(f"the env server refused a {kind} ({code}): {data.get('message', '')}{detail}", code)
        if kind == "state":
            return response
        answer = response.get("data")
        return answer if isinstance(answer, dict) else {}

    def _drop(self, polite: bool = False) -> None:
        ws, self._ws = self._ws, None
        if ws is None:
            return
        try:
            if polite:
                ws.send(json.dumps({"type": "close"}))
            ws.close()
        except Exception:  # best effort: the server closes the session when the connection goes
            pass


def _pending(ws: Any) -> str | None:
    """A message the server sent before it closed the connection, if one is still unread."""
    try:
        raw = ws.recv(timeout=0.5)
    except Exception:
        return None
    return raw if isinstance(raw, str) else None


def _transient(error: RemoteEnvError) -> bool:
    """A reset may be tried again on a new connection: the server was full, or the connection dropped."""
    return error.code in TRANSIENT_CODES or error.code == "LOST"

"""`rlgym serve ENV_ID`: any registered env as an OpenEnv environment server (openenv-core).

Each WebSocket session (`/ws`, OpenEnv's protocol: `reset`, `step`, `state`, `close` messages) owns
one env instance built with `rlgym_llm.make(env_id, max_turns=..., **kwargs)`, so a client gets the
episode it would get in process: the same seed gives the same messages, rewards and signals.

What the server adds to openenv-core's app:
- a cap on concurrent sessions (`max_sessions`; past it a client is told CAPACITY_REACHED);
- an idle timeout: a session silent for `idle_timeout_s` is closed and its env (its sandbox) released;
- a maximum request size (HTTP bodies: 413; WebSocket messages: the connection is closed, code 1009);
- an optional bearer token (`Authorization: Bearer <token>`; `/health` stays open);
- bad requests (malformed actions, wrong types, stepping before a reset) answered with an error
  message while the session stays usable; a client that disconnects has its env closed.

Limits it does not enforce are listed in docs/interop.md.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import math
import socket
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any

from rlgym_llm.core import registry
from rlgym_llm.core.errors import MissingDependencyError, RlgymError
from rlgym_llm.serve.wire import SESSION_CLOSED, TASK_KEY, action_from_payload, task_hash, to_json

try:
    from openenv.core.env_server import create_fastapi_app
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Action, ConcurrencyConfig, Observation, State
    from pydantic import Field
    from starlette.websockets import WebSocketDisconnect
except ImportError as e:  # pragma: no cover - exercised without the extra
    raise MissingDependencyError.of(e, "`rlgym serve`", extra="serve") from e

logger = logging.getLogger(__name__)

OPEN_PATHS = frozenset({"/health"})
"""Paths a token-protected server answers without a token (liveness checks)."""


class RlgymAction(Action):
    """The assistant's turn (`rlgym_llm.serve.wire`): an `AssistantTurn`'s fields, or `raw`."""

    content: str = Field(default="", description="the assistant's text")
    tool_calls: list[dict[str, Any]] = Field(default_factory=list, description="OpenAI-format tool calls")
    parse_errors: list[str] = Field(default_factory=list, description="calls the agent could not parse")
    raw: Any = Field(default=None, description="any other action, passed to env.step as it is")


class RlgymObservation(Observation):
    """The env's answer: its new messages, Gymnasium's end flags and the step's info (signals, outcome)."""

    messages: list[dict[str, Any]] = Field(default_factory=list)
    info: dict[str, Any] = Field(default_factory=dict)
    terminated: bool = False
    truncated: bool = False


class RlgymState(State):
    """The session's env: its id and split, the task id, turns taken, and the outcome as things stand
    (`task`, with the ground truth, only on a server started with `--expose-task`)."""

    env_id: str = ""
    split: str | None = None
    task_id: str | None = None
    outcome: dict[str, Any] | None = None
    task: dict[str, Any] | None = None
    reward_range: tuple[float | None, float | None] = Field(default=(None, None), description="None: unbounded")
    max_request_bytes: int | None = None


class BadRequestError(RlgymError, ValueError):
    """A request the session cannot take (an error message over the WebSocket, a 4xx over HTTP)."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


class SessionClosedError(RlgymError, RuntimeError):
    """The session's env was closed (idle timeout, or the server shutting down)."""


def env_factory(env_id: str, kwargs: Mapping[str, Any], max_turns: int | None) -> Callable[[str | None], Any]:
    """`split -> env`: the env as `rlgym_llm.make` builds it, with the session's split when one is asked."""
    registry.spec(env_id)  # an unknown id fails now, with suggestions

    def make(split: str | None) -> Any:
        extra = {"split": split} if split is not None else {}
        return registry.make(env_id, max_turns=max_turns, **{**kwargs, **extra})

    return make


class ServedEnv(Environment):
    """One session's env behind OpenEnv's `Environment` interface."""

    SUPPORTS_CONCURRENT_SESSIONS = True  # every session builds its own env instance

    def __init__(
        self,
        env_id: str,
        make: Callable[[str | None], Any],
        expose_task: bool = False,
        idle_timeout_s: float | None = None,
        max_request_bytes: int | None = None,
    ):
        super().__init__()
        self.env_id, self._make, self.expose_task = env_id, make, expose_task
        self.idle_timeout_s, self.max_request_bytes = idle_timeout_s, max_request_bytes
        self._env: Any = None
        self._split: str | None = None
        self._episode_id: str | None = None
        self._steps = 0
        self._closed: str | None = None
        self._lock = threading.Lock()  # `state` is read on the event loop, steps run in the session's thread

    def reset(  # type: ignore[override]
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        options: dict[str, Any] | None = None,
        split: str | None = None,
        **unknown: Any,
    ) -> RlgymObservation:
        if unknown:
            raise BadRequestError(
                f"unknown reset fields {sorted(unknown)}; a reset takes seed, options, split, episode_id"
            )
        if options is not None and not isinstance(options, dict):
            raise BadRequestError(f"options must be an object, got {type(options).__name__}")
        with self._lock:
            self._check_open()
            if self._env is None or (split is not None and split != self._split):
                self._close_env()
                self._env = self._make(split)
                self._split = split
            messages, info = self._env.reset(seed=seed, options=options)
            self._episode_id, self._steps = episode_id, 0
            task = _task(self._env)
            info = dict(info)
            if task is not None and callable(getattr(task, "content_key", None)):
                info[TASK_KEY] = task_hash(task.content_key())
            return RlgymObservation(messages=to_json(list(messages)), info=to_json(info), reward=None, done=False)

    def step(self, action: RlgymAction, timeout_s: float | None = None, **kwargs: Any) -> RlgymObservation:  # type: ignore[override]
        with self._lock:
            self._check_open()
            if self._env is None:
                raise BadRequestError(
                    "this session has no episode yet: send a reset first (OpenEnv's HTTP /step gets a fresh env "
                    "per request, so it cannot follow a /reset: play episodes over the WebSocket /ws)",
                    status=409,
                )
            turn = action_from_payload(action.content, action.tool_calls, action.parse_errors, action.raw)
            messages, reward, terminated, truncated, info = self._env.step(turn)
            self._steps += 1
            return RlgymObservation(
                messages=to_json(list(messages)),
                info=to_json(info),
                terminated=bool(terminated),
                truncated=bool(truncated),
                done=bool(terminated or truncated),
                reward=float(reward),
            )

    @property
    def state(self) -> RlgymState:
        with self._lock:
            self._check_open()
            st = RlgymState(
                episode_id=self._episode_id,
                step_count=self._steps,
                env_id=self.env_id,
                split=self._split,
                max_request_bytes=self.max_request_bytes,
            )
            if self._env is not None:
                bounds = getattr(self._env.unwrapped, "reward_range", None) or (-math.inf, math.inf)
                lo, hi = (float(b) if math.isfinite(b) else None for b in bounds)
                st.reward_range = (lo, hi)
            task = _task(self._env) if self._env is not None else None
            if task is not None:
                st.task_id = str(task.id)
                outcome = getattr(self._env.unwrapped, "outcome", None)
                st.outcome = to_json(outcome()) if callable(outcome) else None
                if self.expose_task:
                    fields = ("id", "prompt", "answer", "hidden", "meta", "key")
                    st.task = to_json({f: getattr(task, f, None) for f in fields})
            return st

    def close(self) -> None:
        # openenv-core closes the env of a session that idled past the timeout but keeps its WebSocket
        # open: later requests on it must say why the session is gone.
        why = f"idle for more than {self.idle_timeout_s:g}s, or" if self.idle_timeout_s else "the client left, or"
        with self._lock:
            self._closed = self._closed or f"({why} the server is shutting down): open a new one"
            self._close_env()

    def _check_open(self) -> None:
        if self._closed is not None:
            raise SessionClosedError(f"{SESSION_CLOSED} {self._closed}")

    def _close_env(self) -> None:
        env, self._env = self._env, None
        if env is not None:
            try:
                env.close()
            except Exception as e:  # a failing close must not keep the session's slot
                logger.warning("closing %s failed: %s: %s", self.env_id, type(e).__name__, e)


def _task(env: Any) -> Any:
    try:
        return env.unwrapped.task
    except Exception:  # not reset, or an env without tasks
        return None


class _Guard:
    """ASGI middleware: the bearer token and the request-size limit of HTTP requests (WebSocket
    messages are capped by uvicorn's `ws_max_size`; the token is checked at the handshake)."""

    def __init__(self, app: Any, token: str | None, max_request_bytes: int):
        self.app, self.token, self.max_request_bytes = app, token, max_request_bytes

    def _authorized(self, scope: Mapping[str, Any]) -> bool:
        if not self.token or scope.get("path") in OPEN_PATHS:
            return True
        headers = dict(scope.get("headers") or [])
        given = headers.get(b"authorization", b"").decode("latin-1")
        return hmac.compare_digest(given.encode(), f"Bearer {self.token}".encode())

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "websocket" and not self._authorized(scope):
            await receive()  # the websocket.connect event
            await send({"type": "websocket.close", "code": 1008, "reason": "missing or wrong bearer token"})
            return
        if scope["type"] != "http":
            # openenv-core closes the socket of a client that already left (after releasing its session):
            # nothing is wrong, and uvicorn would log a traceback for it.
            with contextlib.suppress(WebSocketDisconnect):
                await self.app(scope, receive, send)
            return
        if not self._authorized(scope):
            await _reply(send, 401, "missing or wrong bearer token: send `Authorization: Bearer <token>`")
            return
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_request_bytes:
            await _reply(
                send, 413, f"request body of {int(length)} bytes exceeds the limit of {self.max_request_bytes}"
            )
            return
        seen = 0

        async def counted() -> Any:  # a body sent without a length (chunked) is counted as it arrives
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_request_bytes:
                raise _TooLarge
            return message

        try:
            await self.app(scope, counted, send)
        except _TooLarge:
            await _reply(send, 413, f"request body exceeds the limit of {self.max_request_bytes} bytes")


class _TooLarge(Exception):
    pass


async def _reply(send: Any, status: int, message: str) -> None:
    body = json.dumps({"detail": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def build_app(
    env_id: str,
    env_kwargs: Mapping[str, Any] | None = None,
    *,
    max_turns: int | None = None,
    max_sessions: int = 64,
    idle_timeout_s: float | None = 300.0,
    max_request_bytes: int = 1 << 20,
    token: str | None = None,
    expose_task: bool = False,
) -> Any:
    """The ASGI app serving `env_id` (openenv-core's FastAPI app inside the token/size guard).

    Args:
        env_id: a registered id (a plugin's or the working directory's envs: import their module first).
        env_kwargs: the env's constructor keywords, as for `rlgym_llm.make`.
        max_turns: the turn limit (`make`'s; None: the registration's).
        max_sessions: the most concurrent sessions (one env each).
        idle_timeout_s: close a session after this long without a request (None: never).
        max_request_bytes: the largest request body or WebSocket message accepted.
        token: when set, every request but `/health` needs `Authorization: Bearer <token>`.
        expose_task: put the task (ground truth included) in `state`, for trainers that need it
            (IGPO's gold answer, an oracle's warm-up). Off by default: anyone who can reach the server
            could read the answers.
    """
    if max_sessions < 1:
        raise ValueError(f"max_sessions must be >= 1, got {max_sessions}")
    if idle_timeout_s is not None and idle_timeout_s <= 0:
        raise ValueError(f"idle_timeout_s must be > 0 (or None), got {idle_timeout_s}")
    if max_request_bytes < 1024:
        raise ValueError(f"max_request_bytes must be >= 1024, got {max_request_bytes}")
    make = env_factory(env_id, dict(env_kwargs or {}), max_turns)
    app = create_fastapi_app(
        lambda: ServedEnv(env_id, make, expose_task, idle_timeout_s, max_request_bytes),
        RlgymAction,
        RlgymObservation,
        concurrency_config=ConcurrencyConfig(max_concurrent_envs=max_sessions, session_timeout=idle_timeout_s),
    )
    from fastapi.responses import JSONResponse

    async def bad_request(request: Any, exc: Exception) -> Any:
        status = exc.status if isinstance(exc, BadRequestError) else 410
        return JSONResponse({"detail": str(exc)}, status_code=status)

    app.add_exception_handler(BadRequestError, bad_request)
    app.add_exception_handler(SessionClosedError, bad_request)
    return _Guard(app, token, max_request_bytes)


def serve(
    env_id: str,
    env_kwargs: Mapping[str, Any] | None = None,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "warning",
    **limits: Any,
) -> None:
    """Serve `env_id` until interrupted. `port=0` picks a free port; the first line printed says
    where: `rlgym serve: <env_id> at http://HOST:PORT (OpenEnv WebSocket: ws://HOST:PORT/ws)`."""
    try:
        import uvicorn
    except ImportError as e:
        raise MissingDependencyError.of(e, "`rlgym serve`", extra="serve") from e
    app = build_app(env_id, env_kwargs, **limits)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)  # connections queue from now on: a client may connect as soon as the line below is out
    actual = sock.getsockname()[1]
    max_bytes = limits.get("max_request_bytes", 1 << 20)
    config = uvicorn.Config(app, log_level=log_level, ws_max_size=max_bytes, ws_ping_interval=20, timeout_keep_alive=5)
    sys.stdout.write(f"rlgym serve: {env_id} at http://{host}:{actual} (OpenEnv WebSocket: ws://{host}:{actual}/ws)\n")
    sys.stdout.flush()
    uvicorn.Server(config).run(sockets=[sock])

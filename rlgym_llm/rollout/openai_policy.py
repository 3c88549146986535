"""A policy served over HTTP by an OpenAI-compatible completions endpoint (a vLLM server).

Token in, token out: the prompt goes to `/v1/completions` as a list of token ids, and the server is
asked for the ids it sampled (`return_token_ids`) and their logprobs, so nothing is re-tokenized on
either side. Training needs those ids and logprobs; an endpoint that cannot return token ids is
refused with an `EngineError` (no text fallback: re-tokenized text is what the trainer must not see).

For the logprobs to be the model's raw ones (before temperature / top-p / top-k, as the trainer and
`TransformersPolicy` compute them), start vLLM with `--logprobs-mode raw_logprobs` (its default);
`VLLMServer` does.

Failures are `EngineError`s. Transient ones (lost connections, timeouts, HTTP 429 and 5xx, truncated
or invalid JSON) are retried with exponential backoff; client errors (other 4xx, a response of the
wrong shape) are not. A prompt too long for the server's context is a `ContextOverflowError`, as with
the local policy.

    async with OpenAICompatiblePolicy("http://127.0.0.1:8000/v1", model="tiny") as policy:
        completion = await policy.generate(prompt_ids, SamplingParams(max_tokens=64))
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rlgym_llm.core.errors import MissingDependencyError
from rlgym_llm.rollout.errors import ContextOverflowError, EngineError
from rlgym_llm.rollout.policy import Completion, SamplingParams

logger = logging.getLogger(__name__)

# Idle pooled connections are dropped before vLLM's server drops them (its keep-alive is 5 s): reusing
# one the server is closing at that moment fails the request ("Cannot write to closing transport").
_KEEPALIVE_S = 4.0

# vLLM's phrasing when prompt + max_tokens do not fit in `--max-model-len`.
_CONTEXT_MARKERS = ("maximum context length",)


def _aiohttp():
    try:
        import aiohttp
    except ImportError as e:
        raise MissingDependencyError.of(e, "the OpenAI-compatible policy", default="aiohttp") from e
    return aiohttp


# --- the server's answer, validated where it enters -------------------------------------------


class _Logprobs(BaseModel):
    model_config = ConfigDict(extra="ignore")

    token_logprobs: list[float | None] = Field(default_factory=list)
    tokens: list[str] = Field(default_factory=list)


class _Choice(BaseModel):
    model_config = ConfigDict(extra="ignore")

    text: str = ""
    finish_reason: str | None = None
    token_ids: list[int] | None = None
    logprobs: _Logprobs | None = None


class _CompletionResponse(BaseModel):
    model_config = ConfigDict(extra="ignore")

    choices: list[_Choice] = Field(min_length=1)


class OpenAICompatiblePolicy:
    """Generate through an OpenAI-compatible `/v1/completions` endpoint that returns token ids.

    Args:
        base_url: the API root, e.g. `http://127.0.0.1:8000/v1` (`VLLMServer.base_url`).
        model: the served model name; None asks the server (`GET /models`) on first use.
        max_context: the server's context window (prompt + completion). None reads vLLM's
            `max_model_len` from `GET /models`, when the server reports it.
        timeout_s: limit for one HTTP request (each retry gets a fresh one).
        retries: extra attempts after a transient failure.
        backoff_s: delay before the first retry; it doubles each time, up to `max_backoff_s`.
        max_backoff_s: the longest delay between attempts.
        max_connections: pooled connections to the server (bounds requests in flight).
        api_key: sent as a bearer token when given.
        extra_body: more request fields, merged into every request (e.g. `{"repetition_penalty": 1.1}`).
    """

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        max_context: int | None = None,
        timeout_s: float = 120.0,
        retries: int = 3,
        backoff_s: float = 0.2,
        max_backoff_s: float = 5.0,
        max_connections: int = 256,
        api_key: str | None = None,
        extra_body: dict[str, Any] | None = None,
    ):
        problems = []
        if timeout_s <= 0:
            problems.append(f"timeout_s must be > 0, got {timeout_s}")
        if retries < 0:
            problems.append(f"retries must be >= 0, got {retries}")
        if backoff_s < 0 or max_backoff_s < 0:
            problems.append(f"backoff_s and max_backoff_s must be >= 0, got {backoff_s}, {max_backoff_s}")
        if max_connections < 1:
            problems.append(f"max_connections must be >= 1, got {max_connections}")
        if problems:
            raise ValueError("; ".join(problems))
        self.base_url = base_url.rstrip("/")
        self.model, self.max_context = model, max_context
        self._described = False
        self.timeout_s, self.retries = timeout_s, retries
        self.backoff_s, self.max_backoff_s = backoff_s, max_backoff_s
        self.max_connections = max_connections
        self.extra_body = dict(extra_body or {})
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._session: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._describe_lock: asyncio.Lock | None = None
        self._reset = False
        self._keeper: asyncio.Task | None = None  # closes the session when its loop shuts down
        self.requests = 0  # HTTP attempts made, retries included (for tests and stats)

    # --- lifecycle ---------------------------------------------------------------------------------

    async def __aenter__(self) -> OpenAICompatiblePolicy:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the pooled connections (a later call opens new ones)."""
        session, keeper, self._session, self._keeper = self._session, self._keeper, None, None
        if self._loop is not asyncio.get_running_loop():
            return  # another loop's session: that loop's shutdown closes it (see `_close_when_cancelled`)
        if keeper is not None:
            keeper.cancel()
        if session is not None and not session.closed:
            await session.close()

    def reset_connections(self) -> None:
        """Open fresh connections from the next request on (e.g. after the server restarted).

        Safe to call from any thread: the old session is closed later, inside its own event loop.
        """
        self._reset = True

    def _http(self) -> Any:
        """The pooled session, created in (and bound to) the running event loop."""
        aiohttp = _aiohttp()
        loop = asyncio.get_running_loop()
        if self._reset:
            self._reset = False
            if self._keeper is not None and self._loop is loop:
                self._keeper.cancel()  # it closes the old session
            self._session = self._keeper = None
        if self._session is None or self._session.closed or self._loop is not loop:
            if self._session is not None and self._loop is not loop:
                # A session cannot outlive its loop (e.g. two `asyncio.run` calls); start afresh.
                logger.debug("event loop changed; opening a new HTTP session")
            connector = aiohttp.TCPConnector(
                limit=self.max_connections, limit_per_host=self.max_connections, keepalive_timeout=_KEEPALIVE_S
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=aiohttp.ClientTimeout(total=self.timeout_s),
                headers=self._headers,
            )
            self._loop, self._describe_lock = loop, asyncio.Lock()
            self._keeper = loop.create_task(_close_when_cancelled(self._session))
        return self._session

    # --- the Policy API ----------------------------------------------------------------------------

    async def generate(self, prompt_token_ids: Sequence[int], sampling: SamplingParams) -> Completion:
        """Sample one completion of `prompt_token_ids` on the server.

        Raises:
            EngineError: the server failed (after retries, when transient) or answered without token ids.
            ContextOverflowError: the prompt does not fit in the server's context window.
        """
        if not self._described:
            await self._describe_server()
        prompt = [int(t) for t in prompt_token_ids]
        max_tokens = sampling.max_tokens
        if self.max_context is not None:
            # As `TransformersPolicy` does: shorten the completion to fit, refuse a prompt that fills
            # the window (vLLM would answer HTTP 400 instead).
            if len(prompt) >= self.max_context:
                raise ContextOverflowError(f"prompt of {len(prompt)} tokens fills the {self.max_context}-token context")
            max_tokens = min(max_tokens, self.max_context - len(prompt))
        body = {
            "model": self.model,
            "prompt": prompt,
            "max_tokens": max_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "top_k": sampling.top_k if sampling.top_k > 0 else -1,
            "n": 1,
            "logprobs": 0,  # the sampled token's logprob only, no alternatives
            "return_token_ids": True,
            "add_special_tokens": False,  # the prompt is already tokenized, BOS included if wanted
            "skip_special_tokens": True,
            "stream": False,
            **({"seed": sampling.seed} if sampling.seed is not None else {}),
            **({"stop_token_ids": list(sampling.stop_token_ids)} if sampling.stop_token_ids else {}),
            **self.extra_body,
        }
        payload = await self._request("POST", "/completions", body)
        try:
            response = _CompletionResponse.model_validate(payload)
        except ValidationError as e:
            raise EngineError(f"completions response has the wrong shape: {_short(e)}", transient=False) from e
        return _to_completion(response.choices[0])

    async def _describe_server(self) -> None:
        """Fill in the model name and context window from `GET /models` (once; skipped when both are set)."""
        self._http()
        assert self._describe_lock is not None
        async with self._describe_lock:
            if self._described:
                return
            if self.model is None or self.max_context is None:
                payload = await self._request("GET", "/models", None)
                try:
                    entries = [e for e in payload["data"] if self.model in (None, e.get("id"))]
                    entry = entries[0] if entries else {}
                    self.model = self.model or str(entry["id"])
                except (KeyError, IndexError, TypeError, AttributeError) as e:
                    raise EngineError(f"{self.base_url}/models lists no model: {payload!r:.200}", False) from e
                if self.max_context is None and isinstance(entry.get("max_model_len"), int):
                    self.max_context = entry["max_model_len"]
                logger.info("model %r at %s (context %s)", self.model, self.base_url, self.max_context)
            self._described = True

    # --- HTTP with retries -------------------------------------------------------------------------

    async def _request(self, method: str, path: str, body: dict[str, Any] | None) -> Any:
        """One logical request: retried with backoff while failures are transient."""
        last: EngineError | None = None
        for attempt in range(self.retries + 1):
            if attempt:
                delay = min(self.backoff_s * 2 ** (attempt - 1), self.max_backoff_s)
                if last is not None and getattr(last, "retry_after", None):
                    delay = max(delay, min(last.retry_after, self.max_backoff_s))  # type: ignore[attr-defined]
                logger.debug("retry %d/%d of %s %s in %.2fs: %s", attempt, self.retries, method, path, delay, last)
                await asyncio.sleep(delay)
            try:
                return await self._attempt(method, path, body)
            except EngineError as e:
                if not e.transient:
                    raise
                last = e
        assert last is not None
        raise EngineError(f"{last} (gave up after {self.retries + 1} attempts)", transient=True) from last

    async def _attempt(self, method: str, path: str, body: dict[str, Any] | None) -> Any:
        aiohttp = _aiohttp()
        url = self.base_url + path
        self.requests += 1
        try:
            async with self._http().request(method, url, json=body) as resp:
                raw = await resp.read()
                status, retry_after = resp.status, resp.headers.get("Retry-After")
        except asyncio.TimeoutError as e:
            raise EngineError(f"{method} {url} timed out after {self.timeout_s}s", transient=True) from e
        except aiohttp.ClientError as e:  # refused or dropped connections, truncated bodies
            raise EngineError(f"{method} {url} failed: {type(e).__name__}: {e}", transient=True) from e
        if status != 200:
            message = _error_message(raw)
            if status == 400 and any(m in message.lower() for m in _CONTEXT_MARKERS):
                raise ContextOverflowError(f"the server refused the prompt: {message}")
            error = EngineError(f"{method} {url} -> HTTP {status}: {message}", transient=status == 429 or status >= 500)
            error.retry_after = _seconds(retry_after)  # type: ignore[attr-defined]
            raise error
        try:
            return json.loads(raw)
        except ValueError as e:  # truncated or garbled: the next attempt may well succeed
            raise EngineError(f"{method} {url} returned invalid JSON ({e}): {raw[:120]!r}", transient=True) from e


async def _close_when_cancelled(session: Any) -> None:
    """Wait until cancelled, then close `session`.

    `asyncio.run` cancels the tasks left when its main coroutine returns and lets them finish, so a
    policy used across several `asyncio.run` calls (e.g. `RolloutManager.run_sync` once per training
    step) closes each run's connections inside that run's loop instead of leaking them.
    """
    try:
        await asyncio.get_running_loop().create_future()
    finally:
        if not session.closed:
            await session.close()


def _to_completion(choice: _Choice) -> Completion:
    ids = choice.token_ids
    if ids is None:
        ids = _ids_from_tokens(choice.logprobs.tokens if choice.logprobs else [])
    if ids is None:
        raise EngineError(
            "the server returned no completion token ids; training needs them. Use a vLLM server "
            "(it honours `return_token_ids`) or another endpoint that returns token ids.",
            transient=False,
        )
    raw = choice.logprobs.token_logprobs if choice.logprobs else []
    logprobs = [float(lp) for lp in raw if lp is not None]
    if len(logprobs) != len(ids) or len(raw) != len(ids):
        raise EngineError(f"{len(ids)} token ids but logprobs {raw[:8]!r}...; ask for `logprobs`", False)
    finish = choice.finish_reason
    if finish not in ("stop", "length"):
        # vLLM says "abort" when it dropped the request (e.g. shutting down): the manager may retry.
        raise EngineError(f"generation ended with finish_reason={finish!r}", transient=True)
    return Completion(token_ids=tuple(ids), logprobs=tuple(logprobs), text=choice.text, finish_reason=finish)


def _ids_from_tokens(tokens: list[str]) -> list[int] | None:
    """Ids from vLLM's `return_tokens_as_token_ids` form ("token_id:123"), where a server uses it."""
    if not tokens or not all(t.startswith("token_id:") for t in tokens):
        return None
    return [int(t.split(":", 1)[1]) for t in tokens]


def _error_message(raw: bytes) -> str:
    """The server's own explanation: OpenAI's `{"error": {"message"}}`, vLLM's `{"message"}`, or the text."""
    try:
        payload = json.loads(raw)
    except ValueError:
        return raw[:500].decode("utf-8", "replace")
    if isinstance(payload, dict):
        error = payload.get("error")
        if isinstance(error, dict) and "message" in error:
            return str(error["message"])[:500]
        if "message" in payload:
            return str(payload["message"])[:500]
    return str(payload)[:500]


def _seconds(header: str | None) -> float | None:
    try:
        return float(header) if header is not None else None
    except ValueError:  # an HTTP date: not worth parsing for a local server
        return None


def _short(error: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors()[:3])

"""Fault tests of the OpenAI-compatible policy against a real local HTTP server that misbehaves on cue.

The server speaks vLLM's `/v1/completions` dialect (token-id prompts, `return_token_ids`, logprobs)
and can be told to time out, fail with 5xx / 429 / 400, send truncated or invalid JSON, or drop the
connection. The last tests run whole multi-turn batches through `RolloutManager` with such a server.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import json
import time
from collections.abc import Callable
from typing import Any

import pytest

aiohttp = pytest.importorskip("aiohttp")
from aiohttp import web  # noqa: E402

import rlgym_llm  # noqa: E402
from rlgym_llm.core.types import FailureKind  # noqa: E402
from rlgym_llm.rollout.errors import ContextOverflowError, EngineError, classify  # noqa: E402
from rlgym_llm.rollout.manager import RolloutConfig, RolloutManager  # noqa: E402
from rlgym_llm.rollout.openai_policy import OpenAICompatiblePolicy  # noqa: E402
from rlgym_llm.rollout.policy import SamplingParams  # noqa: E402
from rlgym_llm.testing.toy import GuessNumberEnv  # noqa: E402

MODEL = "fake-model"
EOS = 2


class FakeCompletionsServer:
    """A `/v1/completions` server. `faults` is consumed one entry per request (then it answers normally).

    Faults: "timeout" (sleep past the client's timeout), "500", "503", "429", "400", "context",
    "garbled" (200 with invalid JSON), "truncated" (fewer body bytes than Content-Length), "drop" (close
    the connection without an answer), "no_ids" (a plain OpenAI answer without token ids).
    `respond(prompt_ids) -> (completion_ids, finish_reason) | str` picks the answer; a string is a fault.
    """

    def __init__(self, respond: Callable[[list[int]], Any] | None = None, max_model_len: int | None = 4096):
        self.faults: list[str] = []
        self.respond = respond or (lambda prompt: ([prompt[-1] + 1, prompt[-1] + 2, EOS], "stop"))
        self.max_model_len = max_model_len
        self.bodies: list[dict] = []
        self.times: list[float] = []
        self.sleep_s = 0.8  # past the tests' 0.5 s client timeout; short, so shutdown is quick
        self.decode: Callable[[list[int]], str] = lambda ids: " ".join(map(str, ids))

    async def completions(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.bodies.append(body)
        self.times.append(time.monotonic())
        fault = self.faults.pop(0) if self.faults else None
        if fault is None:
            answer = self.respond(body["prompt"])
            if isinstance(answer, str):
                fault = answer
            else:
                return web.json_response(self._payload(body, *answer))
        return await self._misbehave(fault, request, body)

    async def models(self, request: web.Request) -> web.Response:
        entry: dict[str, Any] = {"id": MODEL, "object": "model"}
        if self.max_model_len is not None:
            entry["max_model_len"] = self.max_model_len
        return web.json_response({"object": "list", "data": [entry]})

    def _payload(self, body: dict, ids: list[int], finish: str, with_ids: bool = True) -> dict:
        ids = ids[: body["max_tokens"]]
        choice = {
            "index": 0,
            "text": self.decode(ids),
            "logprobs": {
                "tokens": [f"t{i}" for i in ids],
                "token_logprobs": [-0.25 * (k + 1) for k in range(len(ids))],
            },
            "finish_reason": finish if len(ids) < body["max_tokens"] or finish == "stop" else "length",
        }
        if with_ids:
            choice["token_ids"] = ids
        return {"id": "cmpl-1", "object": "text_completion", "model": MODEL, "choices": [choice]}

    async def _misbehave(self, fault: str, request: web.Request, body: dict) -> web.StreamResponse:
        if fault == "timeout":
            await asyncio.sleep(self.sleep_s)
            return web.json_response({})
        if fault in ("500", "503", "429", "400"):
            headers = {"Retry-After": "0"} if fault == "429" else None
            error = {"error": {"message": f"injected {fault}", "type": "Error", "code": int(fault)}}
            return web.json_response(error, status=int(fault), headers=headers)
        if fault == "context":
            message = "This model's maximum context length is 1024 tokens. However, your prompt contains 1030"
            return web.json_response({"error": {"message": message, "code": 400}}, status=400)
        if fault == "garbled":
            return web.Response(text='{"choices": [{"text": "ab', content_type="application/json")
        if fault == "truncated":
            data = json.dumps(self._payload(body, [5, 6, EOS], "stop")).encode()
            resp = web.StreamResponse(headers={"Content-Type": "application/json", "Content-Length": str(len(data))})
            await resp.prepare(request)
            await resp.write(data[: len(data) // 2])
            request.transport.close()
            return resp
        if fault == "drop":
            request.transport.close()
            return web.Response()
        if fault == "no_ids":
            return web.json_response(self._payload(body, [5, 6, EOS], "stop", with_ids=False))
        raise AssertionError(f"unknown fault {fault!r}")


@contextlib.asynccontextmanager
async def serving(fake: FakeCompletionsServer):
    """Run `fake` on 127.0.0.1 (a random free port) for the duration of the block."""
    app = web.Application()
    app.router.add_post("/v1/completions", fake.completions)
    app.router.add_get("/v1/models", fake.models)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    fake.base_url = f"http://127.0.0.1:{port}/v1"
    try:
        yield fake
    finally:
        await runner.cleanup()


def with_server(test: Callable[..., Any]) -> Callable[..., None]:
    """Run an async test in a fresh event loop, with a `FakeCompletionsServer` as its first argument.

    (The project has no async pytest plugin; this keeps the server and the client in one loop.)
    """

    @functools.wraps(test)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        async def main() -> None:
            async with serving(FakeCompletionsServer()) as fake:
                await test(fake, *args, **kwargs)

        asyncio.run(main())

    params = list(inspect.signature(test).parameters.values())[1:]
    wrapper.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    return wrapper


def _policy(fake: FakeCompletionsServer, **kwargs: Any) -> OpenAICompatiblePolicy:
    options = {
        "model": MODEL,
        "max_context": 4096,
        "timeout_s": 0.5,
        "retries": 3,
        "backoff_s": 0.02,
        "max_backoff_s": 0.2,
        **kwargs,
    }
    return OpenAICompatiblePolicy(fake.base_url, **options)


# --- one request ---------------------------------------------------------------------------------


@with_server
async def test_sends_token_ids_and_reads_ids_and_logprobs(fake_server):
    async with _policy(fake_server) as policy:
        out = await policy.generate([11, 12, 13], SamplingParams(max_tokens=8, temperature=0.7, top_k=5, seed=3))
    assert out.token_ids == (14, 15, EOS)
    assert out.logprobs == (-0.25, -0.5, -0.75)
    assert out.finish_reason == "stop"
    assert out.text == f"14 15 {EOS}"
    body = fake_server.bodies[0]
    assert body["prompt"] == [11, 12, 13]
    assert body["return_token_ids"] is True and body["logprobs"] == 0
    assert (body["temperature"], body["top_k"], body["seed"], body["max_tokens"]) == (0.7, 5, 3, 8)
    assert "stop_token_ids" not in body


@with_server
async def test_model_and_context_are_read_from_the_server(fake_server):
    fake_server.max_model_len = 10
    async with _policy(fake_server, model=None, max_context=None) as policy:
        out = await policy.generate(list(range(20, 27)), SamplingParams(max_tokens=8, stop_token_ids=(9,)))
        assert policy.model == MODEL and policy.max_context == 10
        assert fake_server.bodies[0]["max_tokens"] == 3  # clamped to the window, as the local policy does
        assert fake_server.bodies[0]["stop_token_ids"] == [9]
        assert out.token_ids == (27, 28, EOS)
        with pytest.raises(ContextOverflowError):
            await policy.generate(list(range(10)), SamplingParams(max_tokens=1))
    assert len(fake_server.bodies) == 1  # the overflow never reached the server


@pytest.mark.parametrize("fault", ["500", "503", "429", "garbled", "truncated", "drop", "timeout"])
@with_server
async def test_transient_faults_are_retried_until_success(fake_server, fault):
    fake_server.faults = [fault, fault]
    async with _policy(fake_server) as policy:
        out = await policy.generate([1, 2], SamplingParams(max_tokens=4))
    assert out.token_ids == (3, 4, EOS)
    assert policy.requests == 3
    assert len(fake_server.bodies) == 3


@with_server
async def test_backoff_doubles_between_attempts(fake_server):
    fake_server.faults = ["500", "500", "500"]
    async with _policy(fake_server, backoff_s=0.05, max_backoff_s=1.0) as policy:
        await policy.generate([1, 2], SamplingParams(max_tokens=4))
    gaps = [b - a for a, b in zip(fake_server.times, fake_server.times[1:])]
    assert len(gaps) == 3
    for gap, want in zip(gaps, (0.05, 0.1, 0.2)):
        assert want <= gap < want + 0.5, gaps  # generous upper bound: the machine is shared
    assert gaps[2] > gaps[0]


@with_server
async def test_persistent_5xx_gives_up_with_a_transient_engine_error(fake_server):
    fake_server.faults = ["500"] * 10
    async with _policy(fake_server, retries=2) as policy:
        with pytest.raises(EngineError) as info:
            await policy.generate([1, 2], SamplingParams(max_tokens=4))
    assert info.value.transient
    assert "HTTP 500" in str(info.value) and "injected 500" in str(info.value) and "3 attempts" in str(info.value)
    assert len(fake_server.bodies) == 3
    assert classify(info.value, default=FailureKind.POLICY) is FailureKind.ENGINE


@with_server
async def test_timeout_gives_up_after_retries(fake_server):
    fake_server.faults, fake_server.sleep_s = ["timeout"] * 3, 0.5
    t0 = time.monotonic()
    async with _policy(fake_server, timeout_s=0.2, retries=1) as policy:
        with pytest.raises(EngineError, match="timed out"):
            await policy.generate([1, 2], SamplingParams(max_tokens=4))
    assert len(fake_server.bodies) == 2
    assert time.monotonic() - t0 < 1.0  # two 0.2 s timeouts, not the server's 0.5 s sleeps


@pytest.mark.parametrize(("fault", "match"), [("400", "HTTP 400"), ("no_ids", "no completion token ids")])
@with_server
async def test_client_errors_are_not_retried(fake_server, fault, match):
    fake_server.faults = [fault]
    async with _policy(fake_server) as policy:
        with pytest.raises(EngineError, match=match) as info:
            await policy.generate([1, 2], SamplingParams(max_tokens=4))
    assert not info.value.transient
    assert len(fake_server.bodies) == 1


@with_server
async def test_context_refusal_is_a_policy_failure(fake_server):
    fake_server.faults = ["context"]
    async with _policy(fake_server, max_context=None) as policy:
        with pytest.raises(ContextOverflowError) as info:
            await policy.generate([1, 2], SamplingParams(max_tokens=4))
    assert classify(info.value, default=FailureKind.ENGINE) is FailureKind.POLICY
    assert len(fake_server.bodies) == 1


def test_unreachable_server_is_an_engine_error():
    asyncio.run(_unreachable())


async def _unreachable():
    policy = OpenAICompatiblePolicy("http://127.0.0.1:9/v1", model=MODEL, retries=1, backoff_s=0.01, timeout_s=1)
    with pytest.raises(EngineError, match="failed"):
        await policy.generate([1], SamplingParams(max_tokens=2))
    await policy.close()
    assert policy.requests == 2


def test_connections_are_closed_when_each_asyncio_run_ends():
    """A policy reused across `asyncio.run` calls (one per training step) closes each run's session."""
    import threading

    fake = FakeCompletionsServer()
    started, stop = threading.Event(), []

    async def serve() -> None:  # the server keeps its own loop, in a thread, across the client's runs
        stop.append((asyncio.get_running_loop(), asyncio.Event()))
        async with serving(fake):
            started.set()
            await stop[0][1].wait()

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    assert started.wait(10)
    try:
        policy = _policy(fake)
        sessions = []
        for _ in range(2):
            asyncio.run(policy.generate([1, 2], SamplingParams(max_tokens=4)))
            sessions.append(policy._session)
        assert sessions[0] is not sessions[1]
        assert all(session.closed for session in sessions)
    finally:
        loop, event = stop[0]
        loop.call_soon_threadsafe(event.set)
        thread.join(10)


def test_bad_arguments_are_listed_at_once():
    with pytest.raises(ValueError, match=r"timeout_s.*retries.*max_connections"):
        OpenAICompatiblePolicy("http://x/v1", timeout_s=0, retries=-1, max_connections=0)


@with_server
async def test_concurrent_requests_share_one_pooled_session(fake_server):
    async with _policy(fake_server, max_connections=4) as policy:
        outs = await asyncio.gather(*(policy.generate([i, i + 1], SamplingParams(max_tokens=4)) for i in range(20)))
        session = policy._session
        assert session.connector.limit == 4
    assert [o.token_ids for o in outs] == [(i + 2, i + 3, EOS) for i in range(20)]
    assert session.closed


# --- whole batches through the rollout manager -----------------------------------------------------


@pytest.fixture(scope="module")
def tokenizer():
    pytest.importorskip("transformers")
    from transformers import AutoTokenizer

    from rlgym_llm.rollout.tiny_model import build_tiny_model

    return AutoTokenizer.from_pretrained(build_tiny_model())


class CrashingGuessEnv(GuessNumberEnv):
    """Raises on its second step: a bug in an env, which the manager must record as an env failure."""

    def respond(self, turn):
        if self.turn >= 2:  # `step` counts this turn before `respond`
            raise RuntimeError("env bug on purpose")
        return super().respond(turn)


rlgym_llm.register("faults/OpenAIGuess-v0", "rlgym_llm.testing.toy:GuessNumberEnv", max_turns=10)
rlgym_llm.register("faults/OpenAICrashingGuess-v0", CrashingGuessEnv, max_turns=10)


MAX_TURNS = 4


def _guesser(fake: FakeCompletionsServer, tokenizer: Any, fault: str = "503") -> Callable[[list[int]], Any]:
    """Guess 500, 600, 700, ... while the answers say `higher`; once one says `lower`, fail for good."""
    fake.decode = lambda ids: tokenizer.decode(ids, skip_special_tokens=True)

    def respond(prompt: list[int]) -> Any:
        text = tokenizer.decode(prompt)
        if "\nlower<|im_end|>" in text:
            return fault  # every attempt of this episode's next call fails
        value = 500 + 100 * text.count("\nhigher<|im_end|>")
        call = f'<tool_call>{{"name": "guess", "arguments": {{"value": {value}}}}}</tool_call>'
        return [*tokenizer.encode(call, add_special_tokens=False), tokenizer.eos_token_id], "stop"

    return respond


def _expected(number: int) -> tuple[str, int | None]:
    """What `_guesser` does to an episode: ("solved", turn), ("engine", failing turn) or ("max_turns", None)."""
    for turn in range(MAX_TURNS):
        guess = 500 + 100 * turn
        if number == guess:
            return "solved", turn
        if number < guess:
            return ("engine", turn + 1) if turn + 1 < MAX_TURNS else ("max_turns", None)
    return "max_turns", None


def _numbers(seeds: range) -> list[int]:
    env = GuessNumberEnv()
    numbers = []
    for seed in seeds:
        env.reset(seed=seed)
        numbers.append(int(env.task.answer))
    return numbers


# How each persistent fault reads on the failure record.
PERSISTENT_FAULTS = {"503": "HTTP 503", "timeout": "timed out after 2.0s", "truncated": "ClientPayloadError"}
# A whole batch makes many calls: a client timeout with room for a loaded machine, so only the
# injected stalls time out (a healthy call retried under load would break the exact call count).
BATCH_TIMEOUT_S, BATCH_STALL_S = 2.0, 2.6


@pytest.mark.parametrize("fault", sorted(PERSISTENT_FAULTS))
@with_server
async def test_manager_batch_survives_permanent_engine_failures(fake_server, tokenizer, fault):
    from rlgym_agents.tool_calling import ToolCallingAgent

    fake_server.respond = _guesser(fake_server, tokenizer, fault)
    fake_server.sleep_s = BATCH_STALL_S
    seeds = range(12)
    expected = [_expected(n) for n in _numbers(seeds) for _ in range(2)]  # group_size 2
    n_failed = sum(kind == "engine" for kind, _ in expected)
    assert 0 < n_failed < len(expected)  # the seeds give both kinds of episode
    config = RolloutConfig(
        group_size=2, max_turns=MAX_TURNS, sampling=SamplingParams(max_tokens=64), retries=0, call_timeout_s=15
    )
    async with _policy(fake_server, retries=2, timeout_s=BATCH_TIMEOUT_S) as policy:
        manager = RolloutManager("faults/OpenAIGuess-v0", ToolCallingAgent(tokenizer), policy, config)
        trajectories = await manager.run(list(seeds))

    assert len(trajectories) == len(expected)  # count in == count out
    for traj, (kind, turn) in zip(trajectories, expected):
        if kind == "engine":
            (failure,) = traj.failures
            assert failure.kind is FailureKind.ENGINE and failure.turn == turn
            assert PERSISTENT_FAULTS[fault] in failure.message and "3 attempts" in failure.message
            assert len(traj.turns) == turn
        else:
            assert not traj.failures
            assert traj.outcome["reward"] == float(kind == "solved")
        assert all(t.completion_token_ids[-1] == tokenizer.eos_token_id for t in traj.turns)
        assert all(t.completion_logprobs[:2] == (-0.25, -0.5) for t in traj.turns)
    assert manager.stats.failures[FailureKind.ENGINE] == n_failed
    assert manager.stats.to_dict()["failures/env"] == 0
    # Each failed episode's last call was tried 3 times (the policy's retries); no other call was retried.
    assert len(fake_server.bodies) == sum(len(t.turns) for t in trajectories) + 3 * n_failed


@with_server
async def test_manager_classifies_env_crashes_and_engine_failures_apart(fake_server, tokenizer):
    from rlgym_agents.tool_calling import ToolCallingAgent

    fake_server.respond = _guesser(fake_server, tokenizer)
    seeds = range(16)
    numbers = _numbers(seeds)
    config = RolloutConfig(max_turns=MAX_TURNS, sampling=SamplingParams(max_tokens=64), retries=0)
    async with _policy(fake_server, retries=1) as policy:
        manager = RolloutManager("faults/OpenAICrashingGuess-v0", ToolCallingAgent(tokenizer), policy, config)
        trajectories = await manager.run(list(seeds))

    assert len(trajectories) == len(numbers)
    kinds = [t.failures[0].kind if t.failures else None for t in trajectories]
    for number, kind in zip(numbers, kinds):
        if number == 500:
            assert kind is None  # solved on the first guess
        elif number < 500:
            assert kind is FailureKind.ENGINE  # the second generate call fails first
        else:
            assert kind is FailureKind.ENV  # the second env step raises
    assert FailureKind.ENV in kinds and FailureKind.ENGINE in kinds
    assert sum(manager.stats.failures.values()) == sum(n != 500 for n in numbers)

"""`rlgym serve` against OpenEnv's own client, and rlgym/Remote-v0 against the in-process env.

Each test starts a real server (`python -m rlgym_llm.cli.main serve ...`, uvicorn) in a subprocess.
Parity: the same seed and the same actions give the same messages, rewards, end flags and info
(signals, outcome) as the env built in this process; only `info["task_key"]`, the task's content
hash the server adds for the rollout manager, is extra.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time

import pytest

import rlgym_llm

openenv_core = pytest.importorskip("openenv.core", reason="the serve extra (openenv-core) is not installed")

pytestmark = pytest.mark.slow


class Server:
    def __init__(self, *args: str, env: dict | None = None):
        cmd = [sys.executable, "-m", "rlgym_llm.cli.main", "serve", *args, "--port", "0"]
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env={**os.environ, **(env or {})}
        )
        line = self.proc.stdout.readline()
        assert line.startswith("rlgym serve: "), f"the server did not start: {line!r}"
        self.url = line.split(" at ")[1].split()[0]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


@pytest.fixture
def serve():
    servers = []

    def start(*args: str, env: dict | None = None) -> Server:
        servers.append(Server(*args, env=env))
        return servers[-1]

    yield start
    for s in servers:
        s.stop()


def _call(name: str, **args) -> dict:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}],
    }


ACTIONS = {  # a bad call, a plain text turn, a malformed action, then real calls
    "rlgym/Math-v0": [
        _call("nope"),
        "hello",
        {"role": "user"},
        _call("calculator", expression="2+3"),
        _call("submit_answer", answer="5"),
    ],
    "rlgym/Search-v0": [_call("search", query="born"), "text", _call("open", doc_id="x"), _call("answer", answer="a")],
    "rlgym/GUI-v0": [_call("click", element="nothing"), "look", _call("back")],
    "toy/Counter-v0": [_call("add", amount=2), _call("add", amount="x"), _call("submit")],
    "rlgym/Code-v0": [_call("run_examples", code="def f(:"), "no", _call("submit", code="print(1)")],
    "rlgym/BugFix-v0": [_call("run_tests"), _call("fix", line=1, value="x = 1"), "hm", _call("submit")],
    "rlgym/Ladder-v0": [_call("add", amount=2), _call("add", amount=True), _call("submit")],
    "rlgym/TwentyQ-v0": [_call("ask", lo=1, hi=50), _call("ask", lo="a", hi=3), _call("answer", n=7)],
    "rlgym/SWE-v0": [
        _call("list_files", path="."),
        _call("read_file", path="nope.py"),
        _call("run_tests", selector=""),
        "text",
        _call("submit"),
    ],
}


def _untimed(value):
    """Without wall-clock fields (a test's `duration_s`, pytest's "in 0.42s"), which differ between any two runs."""
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k != "duration_s"}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    if isinstance(value, str):
        return re.sub(r"\bin \d+(\.\d+)?s\b", "in <t>s", value)
    return value


def _local_episode(env_id: str, seed: int, actions: list) -> list:
    env = rlgym_llm.make(env_id)
    try:
        messages, info = env.reset(seed=seed)
        rows = [(messages, None, False, info)]
        for a in actions:
            messages, reward, terminated, truncated, info = env.step(a)
            rows.append((messages, reward, terminated or truncated, info))
            if terminated or truncated:
                break
        return _untimed(json.loads(json.dumps(rows)))
    finally:
        env.close()


@pytest.mark.parametrize("env_id", sorted(ACTIONS))
def test_openenv_client_episodes_match_the_env_in_process(serve, env_id):
    """Every shipped env (rlgym/Remote-v0 aside: it is the client side) through openenv-core's client."""
    from openenv.core import GenericEnvClient

    from rlgym_llm.core.types import AssistantTurn
    from rlgym_llm.serve.wire import action_payload

    server = serve(env_id)
    for seed in (0, 7):
        want = _local_episode(env_id, seed, ACTIONS[env_id])

        async def play(seed=seed, want=want):
            rows = []
            async with GenericEnvClient(base_url=server.url) as client:
                r = await client.reset(seed=seed)
                info = dict(r.observation["info"])
                assert len(info.pop("task_key")) == 16
                rows.append((r.observation["messages"], None, r.done, info))
                for a in ACTIONS[env_id][: len(want) - 1]:
                    payload = action_payload(
                        a if not isinstance(a, dict) or "tool_calls" not in a else AssistantTurn.coerce(a)
                    )
                    r = await client.step(payload)
                    rows.append((r.observation["messages"], r.reward, r.done, r.observation["info"]))
            return rows

        got = _untimed(json.loads(json.dumps(asyncio.run(play()))))
        assert got == want, f"{env_id} seed {seed}"


def test_remote_env_matches_the_env_in_process_and_reads_the_outcome(serve):
    server = serve("rlgym/Math-v0", "--max-turns", "3")
    remote = rlgym_llm.make("rlgym/Remote-v0", url=server.url, max_turns=3)
    local = rlgym_llm.make("rlgym/Math-v0", max_turns=3)
    try:
        for seed in (1, 2):
            (m1, i1), (m2, i2) = remote.reset(seed=seed), local.reset(seed=seed)
            assert m1 == m2 and i1.pop("task_key") and i1 == json.loads(json.dumps(i2))
            for a in ("hi", _call("calculator", expression="1+1"), "again"):
                r1, r2 = remote.step(a), local.step(a)
                assert json.loads(json.dumps(r1)) == json.loads(json.dumps(r2))
            assert r1[3] is True and r1[4]["truncated_by"] == "turn_limit"  # the server's limit, with its outcome
            assert remote.unwrapped.outcome() == local.unwrapped.outcome()
    finally:
        remote.close()
        local.close()


def test_bad_requests_get_errors_and_the_session_stays_usable(serve):
    from websockets.sync.client import connect

    server = serve("toy/Counter-v0")
    with connect(server.url.replace("http", "ws") + "/ws") as ws:

        def ask(msg):
            ws.send(msg if isinstance(msg, str) else json.dumps(msg))
            return json.loads(ws.recv(timeout=10))

        assert "reset first" in ask({"type": "step", "data": {"content": "x"}})["data"]["message"]
        assert ask("{not json")["data"]["code"] == "INVALID_JSON"
        assert ask({"type": "dance"})["data"]["code"] == "UNKNOWN_TYPE"
        assert ask({"type": "reset", "data": {"seed": 0, "colour": 1}})["data"]["message"].startswith("unknown reset")
        assert ask({"type": "reset", "data": {"seed": 0}})["type"] == "observation"
        bad = ask({"type": "step", "data": {"content": 5}})
        assert bad["type"] == "error" and bad["data"]["code"] == "VALIDATION_ERROR"
        bad = ask({"type": "step", "data": {"tool_calls": "add"}})
        assert bad["type"] == "error"
        ok = ask({"type": "step", "data": {"raw": {"role": "user"}}})  # malformed for the env: its error message
        assert ok["type"] == "observation" and "Error:" in ok["data"]["observation"]["messages"][0]["content"]


def test_session_cap_token_and_request_size(serve):
    from rlgym_llm.serve.remote import RemoteEnvError

    server = serve(
        "toy/Counter-v0", "--max-sessions", "1", "--token-env", "T", "--max-request-bytes", "4096", env={"T": "s3cret"}
    )
    os.environ["RLGYM_SERVE_TOKEN"] = "wrong"
    try:
        with pytest.raises(RemoteEnvError, match="refused the connection"):
            rlgym_llm.make("rlgym/Remote-v0", url=server.url, retries=0).reset(seed=0)
        os.environ["RLGYM_SERVE_TOKEN"] = "s3cret"
        first = rlgym_llm.make("rlgym/Remote-v0", url=server.url, retries=0)
        first.reset(seed=0)
        second = rlgym_llm.make("rlgym/Remote-v0", url=server.url, retries=0)
        with pytest.raises(RemoteEnvError, match="CAPACITY_REACHED"):
            second.reset(seed=0)
        messages, reward, terminated, _, info = first.step("x" * 10_000)  # over the server's limit: not sent
        assert "more than the env server accepts (4096)" in messages[0]["content"] and not terminated
        assert info["signals"]["tool_ok"] is False and reward == 0.0
        first.step("y")  # the episode goes on
        first.unwrapped._limit = None  # a client that does not know the limit sends it anyway:
        with pytest.raises(RemoteEnvError, match="lost"):
            first.step("x" * 10_000)  # the server drops the connection
        deadline = time.time() + 10
        while True:  # the dropped session's slot comes free
            try:
                second.reset(seed=0)
                break
            except RemoteEnvError:
                assert time.time() < deadline
                time.sleep(0.2)
        second.close()
    finally:
        os.environ.pop("RLGYM_SERVE_TOKEN", None)
    import urllib.request

    with urllib.request.urlopen(server.url + "/health", timeout=5) as r:  # /health needs no token
        assert r.status == 200


def _sandbox_workers(server: Server) -> list:
    import psutil

    return [p for p in psutil.Process(server.proc.pid).children(recursive=True) if p.is_running()]


def _wait_for_no_workers(server: Server, within_s: float) -> None:
    deadline = time.time() + within_s
    while _sandbox_workers(server):
        assert time.time() < deadline, f"sandbox processes left: {[p.cmdline() for p in _sandbox_workers(server)]}"
        time.sleep(0.2)


def _run_examples(code: str) -> dict:
    return _call("run_examples", code=code)


def test_a_client_that_vanishes_leaves_no_sandbox_behind(serve):
    server = serve("rlgym/Code-v0")
    assert not _sandbox_workers(server)
    env = rlgym_llm.make("rlgym/Remote-v0", url=server.url)
    env.reset(seed=0)
    env.step(_run_examples("print(1)"))
    assert _sandbox_workers(server), "control: a live session holds its sandbox worker"
    env.unwrapped._ws.socket.close()  # no close message: the client process died, say
    _wait_for_no_workers(server, within_s=10)
    again = rlgym_llm.make("rlgym/Remote-v0", url=server.url)  # the server goes on serving
    again.reset(seed=0)
    again.close()
    _wait_for_no_workers(server, within_s=10)  # a polite close releases the sandbox too


def test_an_idle_session_is_closed_and_says_so(serve):
    from rlgym_llm.serve.remote import RemoteEnvError

    server = serve("rlgym/Code-v0", "--idle-timeout", "1")
    env = rlgym_llm.make("rlgym/Remote-v0", url=server.url)
    env.reset(seed=0)
    env.step(_run_examples("print(1)"))
    assert _sandbox_workers(server)
    _wait_for_no_workers(server, within_s=15)  # the reaper looks every 5 s
    with pytest.raises(RemoteEnvError, match="idle for more than 1s"):
        env.step(_run_examples("print(2)"))
    env.reset(seed=0)  # the next episode opens a new session
    env.step(_run_examples("print(3)"))
    env.close()


@pytest.mark.parametrize("env_id", ["rlgym/Math-v0", "rlgym/Search-v0"])
def test_a_remote_env_passes_the_env_checker(serve, env_id):
    server = serve(env_id, "--expose-task")  # the checker reads the task: its answer must not leak
    env = rlgym_llm.make("rlgym/Remote-v0", url=server.url)
    try:
        assert rlgym_llm.check_env(env, n_fuzz=60).ok
    finally:
        env.close()


def test_every_shipped_env_is_in_the_parity_test():
    # the shipped namespaces (other test modules register envs of their own in theirs)
    shipped = set(rlgym_llm.list_envs(namespace="rlgym")) | set(rlgym_llm.list_envs(namespace="toy"))
    assert set(ACTIONS) == shipped - {"rlgym/Remote-v0"}


def test_a_module_class_env_is_served_too(serve):
    server = serve("rlgym_llm.testing.toy:CounterEnv")  # `rlgym serve module:Class`, registered on the fly
    env = rlgym_llm.make("rlgym/Remote-v0", url=server.url)
    try:
        messages, info = env.reset(seed=0)
        assert "Bring it to exactly" in messages[-1]["content"] and [t["function"]["name"] for t in info["tools"]]
    finally:
        env.close()


def test_http_requests_get_clear_errors(serve):
    import urllib.error
    import urllib.request

    server = serve("toy/Counter-v0")

    def post(path: str, body: dict) -> tuple[int, dict]:
        req = urllib.request.Request(
            server.url + path, json.dumps(body).encode(), {"content-type": "application/json"}, method="POST"
        )
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    status, body = post("/reset", {"seed": 0})  # control: a stateless reset answers the opening
    assert status == 200 and "Bring it to exactly" in body["observation"]["messages"][0]["content"]
    status, body = post("/step", {"action": {"content": "x"}})
    assert status == 409 and "WebSocket /ws" in body["detail"]
    status, body = post("/step", {"action": {"content": 5}})
    assert status == 422


@pytest.mark.docker
def test_a_client_that_vanishes_leaves_no_container_behind(serve):
    docker = pytest.importorskip("docker")
    from rlgym_llm.sandbox.docker import LABEL

    server = serve("rlgym/Code-v0", "sandbox_backend=docker")
    api = docker.APIClient(version="auto")

    def containers() -> list:
        mine = {"label": [f"{LABEL}=1", f"{LABEL}.pid={server.proc.pid}"]}
        return api.containers(all=True, filters=mine)

    try:
        env = rlgym_llm.make("rlgym/Remote-v0", url=server.url)
        env.reset(seed=0)
        env.step(_run_examples("print(1)"))
        assert len(containers()) == 1, "control: a live session holds its container"
        env.unwrapped._ws.socket.close()  # no close message
        deadline = time.time() + 30
        while containers():
            assert time.time() < deadline, f"containers left: {[c['Id'][:12] for c in containers()]}"
            time.sleep(0.5)
    finally:
        api.close()


def test_a_step_later_than_its_timeout_fails_and_the_next_episode_runs(serve):
    from rlgym_llm.serve.remote import RemoteEnvError

    server = serve("slowtest/SlowCounter-v0", "--module", "tests.serve.slow_env")  # an id a module registers
    env = rlgym_llm.make("rlgym/Remote-v0", url=server.url, step_timeout_s=1)
    try:
        env.reset(seed=0)
        start = time.monotonic()
        with pytest.raises(RemoteEnvError, match=r"did not answer a step within step_timeout_s=1s"):
            env.step(_call("add", amount=1))
        assert time.monotonic() - start < 2.5
        messages, _ = env.reset(seed=1)  # a new connection, a new session
        assert "Bring it to exactly" in messages[-1]["content"]
    finally:
        env.close()


def test_a_reset_waits_for_a_free_session_with_its_retries(serve):
    import threading

    server = serve("toy/Counter-v0", "--max-sessions", "1")
    holder = rlgym_llm.make("rlgym/Remote-v0", url=server.url)
    holder.reset(seed=0)
    threading.Timer(0.6, holder.close).start()  # the only session comes free in 0.6 s
    waiting = rlgym_llm.make("rlgym/Remote-v0", url=server.url, retries=6, retry_backoff_s=0.1)
    try:
        messages, _ = waiting.reset(seed=0)  # refused (CAPACITY_REACHED), retried, then served
        assert "Bring it to exactly" in messages[-1]["content"]
    finally:
        waiting.close()

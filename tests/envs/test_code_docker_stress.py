"""rlgym/Code-v0 under hostile submissions: `step` never raises, a broken box is replaced (issue 32).

The docker test plays 50 episodes of hostile code (loops, fork and thread bombs, memory hogs, output
floods, daemonised and sleeping children, signal and init killers, disk and tmpfs fillers), plus
boxes killed and frozen from the host mid-run, and asserts: no exception from `step`, every step within
its time limit plus `STEP_MARGIN_S`, no container and no process left afterwards, and honest
submissions that still earn 1.0 before and after, in the replaced boxes. It takes about 3 minutes on
the 2-core CI machine (short per-run limits below): longer than a minute, because the point is many
episodes in a row on one env. A small run of the same mix on the local backend is in the unit tier.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import threading
import time
from typing import Any

import pytest

import rlgym_llm
from rlgym_agents.code import CodeOracleAgent
from rlgym_envs.code.splits import task_splits
from rlgym_envs.code.tasks import load_specs
from rlgym_llm.sandbox import Limits
from tests.sandbox.conftest import host_processes

MARKER = f"rlgym-stress-{os.getpid()}-{secrets.token_hex(4)}"  # in the argv of every child meant to outlive its run
LIMITS = Limits(wall_s=2.0, cpu_s=2.0, memory_mb=256, max_procs=32, output_bytes=16 * 1024)
TEST_TIMEOUT_S = 1.0  # per case
BUDGET_S = 2.0  # per run (all cases of one run_examples or submit): a step's time limit here
STEP_MARGIN_S = 10.0  # past the budget: a sweep, the container kill 5 s after it, a replacement start
CONTROL_TASKS = ("merge-intervals", "sum-two")  # of the train split, the envs' here

_SLEEPER = f"[sys.executable, '-c', 'import time; time.sleep(3600)', {MARKER!r}]"
HOSTILE = {
    "infinite loop": "while True:\n    pass\n",
    "fork bomb": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
    "thread bomb": (
        "import threading, time\nwhile True:\n    try:\n"
        "        threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()\n"
        "    except RuntimeError:\n        pass\n"
    ),
    "memory hog": "x = []\nwhile True:\n    x.append(bytearray(1 << 24))\n",
    "stdout flood": "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n",
    "stderr flood": "import os\nwhile True:\n    os.write(2, b'y' * 65536)\n",
    "daemonised child": (
        "import os, sys\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
        "        for fd in (0, 1, 2):\n            os.close(fd)\n"
        f"        os.execv(sys.executable, {_SLEEPER})\n    os._exit(0)\n"
    ),
    "sleeping children": (
        f"import subprocess, sys\nfor _ in range(8):\n    subprocess.Popen({_SLEEPER}, start_new_session=True)\n"
    ),
    "signals ignored": (
        "import signal\nfor s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGXCPU):\n"
        "    signal.signal(s, signal.SIG_IGN)\nwhile True:\n    pass\n"
    ),
    "kills init and everything": (
        "import os, signal\nfor pid in [1] + [int(p) for p in os.listdir('/proc') if p.isdigit()]:\n"
        "    for sig in (signal.SIGKILL, signal.SIGSTOP):\n        try:\n            os.kill(pid, sig)\n"
        "        except OSError:\n            pass\nos.kill(-1, signal.SIGKILL)\n"
    ),
    "stops itself": "import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)\n",
    "fills disk and memory": (
        "import os\nfor d in ('/work', '/tmp', '/dev/shm', '.'):\n    try:\n"
        "        fd = os.open(d + '/fill', os.O_WRONLY | os.O_CREAT | os.O_APPEND)\n"
        "        while True:\n            os.write(fd, b'z' * (1 << 20))\n    except OSError:\n        pass\n"
        "x = []\nwhile True:\n    x.append(bytearray(1 << 22))\n"
    ),
}
HOST_FAULTS = ("host kills the box", "host stops the box")  # docker only: the box dies or hangs mid-run
SPLIT = {spec.id: split for spec, (split, _) in zip(load_specs("builtin"), task_splits(load_specs("builtin")))}


def call(name: str, code: str) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": name, "arguments": {"code": code}}]}


class Tally:
    """Steps played, exceptions out of `step`, the slowest step, box failures seen in the signals."""

    def __init__(self) -> None:
        self.steps = 0
        self.exceptions: list[str] = []
        self.max_step_s = 0.0
        self.slowest = ""
        self.failures = 0

    def step(self, env: Any, action: Any, label: str) -> tuple | None:
        start = time.monotonic()
        try:
            out = env.step(action)
        except Exception as exc:  # the property under test: counted, reported at the end
            self.exceptions.append(f"{label}: {exc!r}")
            return None
        finally:
            took = time.monotonic() - start
            self.steps += 1
            if took > self.max_step_s:
                self.max_step_s, self.slowest = took, label
        self.failures += len(out[4]["signals"]["sandbox_failures"])
        return out


def play_hostile(env: Any, tally: Tally, seed: int, kind: str) -> None:
    """One episode: the code on the visible examples, then submitted; the host fault, if any, mid-run."""
    env.reset(seed=seed)
    code = HOSTILE.get(kind, HOSTILE["infinite loop"])
    for tool in ("run_examples", "submit"):
        fault = None
        if kind in HOST_FAULTS:
            fault = threading.Timer(0.8, host_fault, args=(env, kind))
            fault.start()
        out = tally.step(env, call(tool, code), f"{kind} ({tool}, seed {seed})")
        if fault is not None:
            fault.join()
        assert out is None or out[1] == 0.0, (kind, tool, out[0])
        if out is not None and out[2]:
            return


def host_fault(env: Any, kind: str) -> None:
    """Kills the box's container, or stops every process in it (its init and sweeper too: it hangs)."""
    cid = getattr(env.unwrapped._box, "container_id", None)
    if not cid:
        return
    if kind == "host kills the box":
        subprocess.run(["docker", "kill", cid], capture_output=True, timeout=30)
        return
    top = subprocess.run(["docker", "top", cid, "-eo", "pid"], capture_output=True, text=True, timeout=30).stdout
    for pid in top.split()[1:]:
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(pid), signal.SIGSTOP)


def play_control(env: Any, task_id: str) -> float:
    """An honest episode: the reference solution, run on the examples, then submitted."""
    agent = CodeOracleAgent(env)
    messages, info = env.reset(seed=0, options={"task_id": task_id})
    agent.reset(messages, info)
    for _ in range(4):
        messages, reward, terminated, truncated, info = env.step(agent.act(messages, info))
        if terminated or truncated:
            return reward
    return -1.0


def make_env(backend: str) -> Any:
    return rlgym_llm.make(
        "rlgym/Code-v0",
        split="train",
        sandbox_backend=backend,
        limits=LIMITS,
        test_timeout_s=TEST_TIMEOUT_S,
        grading_budget_s=BUDGET_S,
    )


def docker_ids(*args: str) -> set[str]:
    out = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=60, check=True).stdout
    return set(out.split())


def leftover_processes(container_ids: set[str]) -> list[tuple[int, int, str]]:
    """Host processes that carry the marker or live in one of the containers' cgroups."""
    found = []
    for pid, uid, cmdline in host_processes():
        try:
            with open(f"/proc/{pid}/cgroup") as f:
                cgroup = f.read()
        except OSError:
            continue
        if MARKER in cmdline or any(cid in cgroup for cid in container_ids):
            found.append((pid, uid, cmdline[:120]))
    return found


def wait_for_no_leftovers(container_ids: set[str], seconds: float = 10.0) -> list[tuple[int, int, str]]:
    deadline = time.monotonic() + seconds
    while (left := leftover_processes(container_ids)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


@pytest.mark.docker
def test_fifty_hostile_episodes_on_docker_never_raise_and_leave_nothing_behind(monkeypatch):
    from rlgym_llm.sandbox.docker import DockerSandbox

    controls = CONTROL_TASKS
    assert {SPLIT[t] for t in controls} == {"train"}
    label = f"label=rlgym_llm.sandbox.pid={os.getpid()}"
    before = docker_ids("ps", "-aq", "--no-trunc", "--filter", label)
    created: set[str] = set()  # every container the run starts, replacements included
    create = DockerSandbox._create

    def recording_create(self: DockerSandbox, api: Any, init: bool) -> str:
        cid = create(self, api, init)
        created.add(cid)
        return cid

    monkeypatch.setattr(DockerSandbox, "_create", recording_create)
    kinds = [*HOSTILE, *HOST_FAULTS]
    env = make_env("docker")
    tally = Tally()
    start = time.monotonic()
    try:
        assert [play_control(env, t) for t in controls] == [1.0] * len(controls)  # before
        for episode in range(50):
            play_hostile(env, tally, seed=episode, kind=kinds[episode % len(kinds)])
        assert [play_control(env, t) for t in controls] == [1.0] * len(controls)  # after, in replaced boxes
        replaced = env.unwrapped.box_replacements
    finally:
        env.close()
    took = time.monotonic() - start
    left_containers = docker_ids("ps", "-aq", "--no-trunc", "--filter", label) - before
    left_processes = wait_for_no_leftovers(created)
    print(
        f"\ndocker stress: 50 episodes, {tally.steps} hostile steps, {len(tally.exceptions)} exceptions, "
        f"max step {tally.max_step_s:.2f} s ({tally.slowest}) vs limit {BUDGET_S} s + {STEP_MARGIN_S} s, "
        f"{tally.failures} box failures in the signals, {replaced} boxes replaced by the env, "
        f"{len(created)} containers created, {len(left_containers)} left, {len(left_processes)} processes "
        f"left; {took:.0f} s"
    )
    assert tally.exceptions == []
    assert tally.max_step_s <= BUDGET_S + STEP_MARGIN_S, tally.slowest
    assert replaced >= 2 and tally.failures >= 2  # the host's kills did break boxes, and were replaced
    assert left_containers == set()
    assert left_processes == []


def test_the_hostile_mix_on_the_local_backend_never_raises():
    """The same code, submitted once per kind on the local backend; honest code passes before and after."""
    env = make_env("local")
    tally = Tally()
    try:
        assert play_control(env, "sum-two") == 1.0
        for seed, (kind, code) in enumerate(HOSTILE.items()):
            env.reset(seed=seed)
            out = tally.step(env, call("submit", code), kind)
            assert out is None or (out[1] == 0.0 and out[2]), (kind, out)
        assert play_control(env, "sum-two") == 1.0
    finally:
        env.close()
    assert tally.exceptions == []
    assert tally.max_step_s <= BUDGET_S + STEP_MARGIN_S, tally.slowest
    assert [p for p in host_processes() if MARKER in p[2]] == []


def test_a_local_box_killed_or_frozen_mid_run_becomes_an_error_and_is_replaced(monkeypatch):
    """The worker SIGKILLed (the box dies) or SIGSTOPped (it hangs) while code runs: the step answers
    with the failure, the signal records it, and the next episode's honest code passes in a fresh box."""
    import rlgym_envs.code.env as code_env

    monkeypatch.setattr(code_env, "BOX_GRACE_S", 2.0)  # how long a frozen box is waited for
    env = make_env("local")
    try:
        for sig in (signal.SIGKILL, signal.SIGSTOP):
            assert play_control(env, "sum-two") == 1.0
            env.reset(seed=0, options={"task_id": "sum-two"})
            pid = env.unwrapped._box.worker_pid
            killer = threading.Timer(0.5, os.kill, args=(pid, sig))
            killer.start()
            start = time.monotonic()
            messages, reward, terminated, _, info = env.step(call("run_examples", HOSTILE["infinite loop"]))
            killer.join()
            assert time.monotonic() - start <= BUDGET_S + STEP_MARGIN_S
            assert "the sandbox broke while running the code and was replaced" in messages[0]["content"]
            assert len(info["signals"]["sandbox_failures"]) == 1 and not terminated and reward == 0.0
            assert env.unwrapped._box.worker_pid != pid
        assert play_control(env, "sum-two") == 1.0
        assert env.unwrapped.box_replacements == 2
    finally:
        env.close()

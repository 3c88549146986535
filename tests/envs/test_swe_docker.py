"""SWE-bench-style instances on the docker backend (`-m docker`; needs the daemon and rlgym-sandbox:py3)."""

from dataclasses import replace

import pytest

import rlgym_llm
from rlgym_agents.swe import IdleAgent, SWEOracleAgent, TestEditingAgent
from rlgym_envs.swe.instances import builtin_instances
from rlgym_envs.swe.swebench import export_jsonl
from rlgym_llm import AssistantTurn, ToolCall

pytest.importorskip("docker")

pytestmark = pytest.mark.docker

IDS = ("textkit-1", "intervals-1", "lrucache-2")


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    # The rows carry their own split (all train), so one env holds the three whatever their content split.
    shipped = [replace(i, split="train") for i in builtin_instances() if i.id in IDS]
    path = export_jsonl(shipped, tmp_path_factory.mktemp("swebench"), image="rlgym-sandbox:py3")
    env = rlgym_llm.make("rlgym/SWE-v0", dataset=str(path), backend="docker", max_turns=6)
    yield env
    env.close()


def play(env, agent, instance_id):
    messages, info = env.reset(options={"instance_id": instance_id})
    agent.reset(messages, info)
    while True:
        messages, reward, terminated, truncated, info = env.step(agent.act(messages, info))
        if terminated or truncated:
            return reward, info


@pytest.mark.parametrize("instance_id", IDS[:2])
def test_oracle_resolves_loaded_instances_in_docker(env, instance_id):
    reward, info = play(env, SWEOracleAgent(env), instance_id)
    assert reward == 1.0 and info["outcome"]["components"]["pass_to_pass"] == 1.0
    harness = env.unwrapped._harness
    assert harness.backend == "docker" and type(harness._box).__name__ == "DockerSandbox"
    assert harness.options["image"] == "rlgym-sandbox:py3"


@pytest.mark.parametrize("instance_id", IDS[:2])
def test_idle_agent_gets_zero_in_docker(env, instance_id):
    reward, info = play(env, IdleAgent(), instance_id)
    assert reward == 0.0 and info["outcome"]["reward"] == 0.0


def test_rewritten_tests_do_not_count_in_docker(env):
    env.reset(options={"instance_id": "textkit-1"})

    def step(name, **args):
        return env.step(AssistantTurn(tool_calls=(ToolCall(name, args, "c"),)))

    step(
        "edit_file",
        path="tests/test_text.py",
        old_str='self.assertEqual(wrap("abcd efgh ij", 9), ["abcd efgh", "ij"])',
        new_str="pass",
    )
    step("edit_file", path="textkit/text.py", old_str='"""Slugs,', new_str='"""Text: slugs,')
    assert "failed" not in step("run_tests", selector="tests/test_text.py")[0][0]["content"]
    _, reward, _, _, info = step("submit")
    assert reward == 0.0 and info["outcome"]["components"]["fail_to_pass"] == 0.0


# A test file the agent writes: run once, it plants poisoned modules where a careless runner imports from
# (the box's work dir, first on sys.path for `python -c`) and a usercustomize under $HOME (the work dir).
PLANT = """import os
import sys


def test_plant():
    base = os.path.abspath("..")
    for name in ("unittest.py", "json.py", "signal.py", "traceback.py"):
        with open(os.path.join(base, name), "w") as f:
            f.write("raise ImportError('planted')\\n")
    site = os.path.join(base, ".local", "lib", "python%d.%d" % sys.version_info[:2], "site-packages")
    os.makedirs(site, exist_ok=True)
    with open(os.path.join(site, "usercustomize.py"), "w") as f:
        f.write("raise SystemExit(3)\\n")
"""

FIX_LRU2 = {
    "path": "lrucache/cache.py",
    "old_str": "        self._data[key] = value\n        if len",
    "new_str": "        if key in self._data:\n            self._data.move_to_end(key)\n        self._data[key] = value\n        if len",
}


def test_modules_planted_in_the_box_are_never_imported_by_the_grader(env):
    env.reset(options={"instance_id": "lrucache-2"})
    step = lambda name, **args: env.step(AssistantTurn(tool_calls=(ToolCall(name, args, "c"),)))  # noqa: E731
    step("edit_file", path="tests/test_plant.py", old_str="", new_str=PLANT)
    assert "1 passed" in step("run_tests", selector="test_plant")[0][0]["content"]
    assert "1 passed" in step("run_tests", selector="test_plant")[0][0]["content"]  # pytest unharmed
    step("edit_file", **FIX_LRU2)
    _, reward, _, _, info = step("submit")
    assert reward == 1.0, info["outcome"]  # grading ran in the same box, untouched by the planted files


# --- the built set: one instance per project (the full run is benchmarks/swe_v0.py) -------------


def _first_per_project():
    import json

    from rlgym_envs.swe.env import BUILT_SET

    firsts = {}
    for line in BUILT_SET.read_text().splitlines() if BUILT_SET.exists() else []:
        row = json.loads(line)
        firsts.setdefault(row["repo"], row["instance_id"])
    return sorted(firsts.values())


@pytest.fixture(scope="module")
def real_env_of():
    """The env of an instance's content split (one env per split, made when first needed)."""
    envs = {}

    def env_of(instance_id):
        make = lambda split: rlgym_llm.make(  # noqa: E731
            "rlgym/SWE-v0", backend="docker", max_turns=6, dense_signals=False, split=split
        )
        split = (envs.get("train") or envs.setdefault("train", make("train"))).unwrapped.split_of_instance[instance_id]
        return envs.get(split) or envs.setdefault(split, make(split))

    yield env_of
    for env in envs.values():
        env.close()


@pytest.mark.parametrize("instance_id", _first_per_project())
def test_built_instances_resolve_with_gold_and_not_with_test_edits(real_env_of, instance_id):
    real_env = real_env_of(instance_id)
    reward, info = play(real_env, SWEOracleAgent(real_env), instance_id)
    assert reward == 1.0 and info["outcome"]["components"]["tampered"] == 0.0, info["outcome"]
    reward, info = play(real_env, TestEditingAgent(real_env), instance_id)
    assert reward == 0.0 and info["outcome"]["components"]["fail_to_pass"] == 0.0
    reward, info = play(real_env, IdleAgent(), instance_id)
    assert reward == 0.0 and info["signals"]["outcome_level"] == 0

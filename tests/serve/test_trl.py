"""rlgym envs in TRL's GRPOTrainer (`rlgym_llm.serve.trl.trl_environment`): the tool methods TRL sees, an
episode played through them (in process and served), and TRL's parser on the tiny model's tool calls.
examples/trl_grpo.py, two real GRPOTrainer steps, runs in tests/test_examples.py."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest

import rlgym_llm
from rlgym_llm.serve.trl import trl_environment


def _play_counter(env) -> tuple[str, float]:
    opening = env.reset(seed=3)
    start, target = _numbers(opening)
    assert env.get_reward() == 0.0
    bad = env.add(amount="two")  # a malformed argument: the env's error observation, not an exception
    assert bad.startswith("Error") and "amount" in bad
    left = target - start
    while left > 0:
        env.add(amount=min(left, 3))
        left -= min(left, 3)
    answer = env.submit()
    return answer, env.get_reward()


def _numbers(opening: str) -> tuple[int, int]:
    import re

    found = re.search(r"starts at (\d+)\. Bring it to exactly (\d+)", opening)
    assert found, opening
    return int(found.group(1)), int(found.group(2))


def test_the_tools_trl_sees_are_the_envs_with_their_schemas():
    get_json_schema = pytest.importorskip("transformers.utils", reason="needs the train extra").get_json_schema

    env_cls = trl_environment("rlgym/Search-v0")
    public = {n for n, _ in inspect.getmembers(env_cls, predicate=inspect.isfunction) if not n.startswith("_")}
    assert public == {"reset", "get_reward", "search", "open", "answer"}  # TRL takes the rest for tools
    env = env_cls()
    _, info = rlgym_llm.make("rlgym/Search-v0").reset(seed=0)
    want = {t["function"]["name"]: t["function"] for t in info["tools"]}
    for name in ("search", "open", "answer"):
        schema = get_json_schema(getattr(env, name))["function"]
        assert schema["description"] == want[name]["description"]
        assert set(schema["parameters"]["properties"]) == set(want[name]["parameters"]["properties"])
        assert set(schema["parameters"]["required"]) == set(want[name]["parameters"].get("required", []))


def test_an_episode_through_the_tool_methods_pays_the_envs_outcome():
    env = trl_environment("toy/Counter-v0", max_turns=10)()
    answer, reward = _play_counter(env)
    assert reward == 1.0, answer
    assert env.add(amount=1).startswith("Error: the episode has ended")
    env_cls = trl_environment("toy/Counter-v0")
    a, b = env_cls(), env_cls()
    a.reset(), b.reset(), a.reset()
    assert a.seed != b.seed and len({a.seed, b.seed, a.seed - 1}) == 3  # each instance counts from its own start
    a.reset(seed=5)  # an example's seed wins (a dataset of task seeds)
    assert a.seed == 5


@pytest.mark.slow
def test_an_episode_on_a_served_env_pays_the_same():
    pytest.importorskip("openenv.core", reason="the serve extra is not installed")
    cmd = [sys.executable, "-m", "rlgym_llm.cli.main", "serve", "toy/Counter-v0", "--max-turns", "10", "--port", "0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        url = proc.stdout.readline().split(" at ")[1].split()[0]
        served = trl_environment("rlgym/Remote-v0", url=url)()
        local = trl_environment("toy/Counter-v0", max_turns=10)()
        assert _play_counter(served) == _play_counter(local)
        served._close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_trl_parses_the_tiny_models_tool_calls(tiny_tokenizer):
    pytest.importorskip("trl", reason="the trl extra is not installed")
    from trl.chat_template_utils import qwen3_template, supports_tool_calling

    tok = tiny_tokenizer
    tok.response_template = qwen3_template  # as examples/trl_grpo.py sets it
    try:
        assert supports_tool_calling(tok)
        text = '<tool_call>{"name": "add", "arguments": {"amount": 2}}</tool_call><|im_end|>'
        parsed = tok.parse_response(text, prefix="")
        assert parsed["tool_calls"][0]["function"] == {"name": "add", "arguments": {"amount": 2}}
    finally:
        del tok.response_template


def test_the_seed_dataset_gives_each_group_one_task():
    pytest.importorskip("datasets", reason="needs the trl extra")
    from rlgym_llm.serve.trl import seed_dataset

    rows = seed_dataset(3, first_seed=10)
    assert rows["seed"] == [10, 11, 12] and rows["prompt"][0] == [{"role": "user", "content": ""}]
    env_cls = trl_environment("toy/Counter-v0")
    a, b = env_cls(), env_cls()  # two rollouts of one group get the same row
    assert a.reset(**rows[1]) == b.reset(**rows[1]) and a.seed == b.seed == 11
    with pytest.raises(ValueError, match="n_tasks"):
        seed_dataset(0)

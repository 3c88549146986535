"""Baselines on `rlgym/Search-v0`: the scripted oracle solves it, a random policy does not."""

import numpy as np
import pytest

import rlgym_llm
from rlgym_agents.search import SearchOracle
from rlgym_llm import AssistantTurn, ToolCall

EPISODES = 200


class RandomSearcher:
    """A seeded random policy: random tool, arguments drawn from the question and the last tool output."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.words = ["unknown"]

    def act(self, observation):
        words = " ".join(m["content"] for m in observation).replace("[", " ").replace("]", " ").split()
        self.words = [w.strip(".,:?") for w in words if w.strip(".,:?")] or self.words
        pick = lambda: self.words[int(self.rng.integers(len(self.words)))]  # noqa: E731
        tool = ["search", "open", "answer"][int(self.rng.integers(3))]
        args = {
            "search": {"query": f"{pick()} {pick()}", "k": int(self.rng.integers(1, 11))},
            "open": {"doc_id": pick()},
            "answer": {"text": pick()},
        }[tool]
        return AssistantTurn(tool_calls=(ToolCall(tool, args, "c"),))


def play(env, agent, seed):
    messages, _ = env.reset(seed=seed)
    if hasattr(agent, "reset"):
        agent.reset(env.unwrapped.task)
    infos = []
    while True:
        messages, _, terminated, truncated, info = env.step(agent.act(messages))
        infos.append(info)
        if terminated or truncated:
            return info["outcome"]["reward"], infos


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    return rlgym_llm.make("rlgym/Search-v0", cache_dir=tmp_path_factory.mktemp("cache"))


def test_oracle_solves_at_least_95_percent_and_finds_every_hop(env):
    agent, wins = SearchOracle(), 0
    for seed in range(EPISODES):
        reward, infos = play(env, agent, seed)
        wins += reward
        if reward:
            hops = env.unwrapped.task.meta["hops"]
            assert infos[-1]["signals"]["subgoals"] == [hops, hops]  # it saw every gold page on the way
            assert sum(i["signals"]["progress"] for i in infos) == pytest.approx(1.0)  # paid once per hop
            assert len(infos) == 2 * env.unwrapped.task.meta["hops"] + 1  # search + open per hop, then answer
    assert wins / EPISODES >= 0.95, wins


def test_random_policy_stays_near_zero(env):
    wins = sum(play(env, RandomSearcher(seed), seed)[0] for seed in range(EPISODES))
    assert wins / EPISODES <= 0.05, wins


def test_oracle_reads_the_pages_it_opens():
    """Fed a page that names a different employer, the oracle follows the page, not the ground truth."""
    task = rlgym_llm.Task(
        id="t",
        prompt="?",
        answer="Real Answer",
        hidden={"start": "Varo Keltin", "relations": ["works_at", "headquartered_in"]},
    )
    agent = SearchOracle()
    agent.reset(task)
    assert agent.act([]).tool_calls[0].arguments["query"] == "Varo Keltin"
    results = "1. [misc-001] Notes (1): mentions Varo Keltin\n2. [person-007] Varo Keltin: Keltin works at X."
    assert agent.act([{"role": "tool", "content": results}]).tool_calls[0].arguments == {"doc_id": "person-007"}
    page = "[person-007] Varo Keltin\nVaro Keltin is a weaver. Keltin works at Planted Guild."
    step = agent.act([{"role": "tool", "content": page}]).tool_calls[0]
    assert (step.name, step.arguments["query"]) == ("search", "Planted Guild")


def test_oracle_gives_up_when_the_page_is_never_found():
    agent = SearchOracle()
    agent.reset(rlgym_llm.Task(id="t", prompt="?", hidden={"start": "Nobody", "relations": ["works_at"]}))
    agent.act([])
    assert agent.act([{"role": "tool", "content": "No documents match"}]).tool_calls[0].arguments["k"] == 10
    last = agent.act([{"role": "tool", "content": "No documents match"}]).tool_calls[0]
    assert (last.name, last.arguments) == ("answer", {"text": "unknown"})
    with pytest.raises(ValueError, match="generated-world task"):
        agent.reset(rlgym_llm.Task(id="t", prompt="?", hidden={"answers": ["x"]}))

"""Search-v0 pays progress for new evidence only (issue 32).

Attack: after a first useful call, a policy repeats it, or runs equivalent ones (other case, other word
order, padding, a larger `k`, the same page re-opened, its id padded with spaces), turn after turn. A
per-turn reward channel sums `progress`, so each of those turns must add 0 and the episode's total
must stay what the first call earned. Control: a call that finds a new hop still raises it.
"""

import pytest

import rlgym_llm
from rlgym_llm import AssistantTurn, ToolCall


def call(name, **arguments):
    return AssistantTurn(tool_calls=(ToolCall(name, arguments, id=f"id_{name}"),))


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    return rlgym_llm.make("rlgym/Search-v0", cache_dir=tmp_path_factory.mktemp("cache"), max_turns=40)


def hop_query(env, hop: int) -> str:
    """A query whose results list the gold page of `hop` (its title)."""
    return env.unwrapped.docs[env.unwrapped.task.hidden["gold_docs"][hop]].title


def test_attack_repeated_and_equivalent_calls_add_no_progress(env):
    env.reset(seed=0, options={"hops": 3})
    query, gold = hop_query(env, 0), env.unwrapped.task.hidden["gold_docs"]
    _, _, _, _, info = env.step(call("search", query=query, k=3))
    first = info["signals"]["progress"]
    assert first > 0 and info["signals"]["gold_retrieved"] is True
    repeats = [
        call("search", query=query, k=3),
        call("search", query=query.upper(), k=3),
        call("search", query=" ".join(reversed(query.split())), k=3),
        call("search", query=f"  {query}  ", k=3),
        call("search", query=query, k=1),
        call("open", doc_id=gold[0]),
        call("open", doc_id=f" {gold[0]} "),
        call("open", doc_id=gold[0]),
    ]
    total, subgoals = first, info["signals"]["subgoals"]
    for turn in repeats * 3:
        _, _, terminated, truncated, info = env.step(turn)
        assert not (terminated or truncated)
        assert info["signals"]["tool_ok"] is True  # the calls run: they are just worth nothing more
        assert info["signals"]["progress"] == 0.0 and info["signals"]["gold_retrieved"] is False
        total += info["signals"]["progress"]
    assert total == first and info["signals"]["subgoals"] == subgoals


def test_attack_many_calls_in_one_turn_pay_a_hop_once(env):
    env.reset(seed=0, options={"hops": 3})
    gold = env.unwrapped.task.hidden["gold_docs"]
    turn = AssistantTurn(tool_calls=tuple(ToolCall("open", {"doc_id": gold[0]}, id=f"c{i}") for i in range(8)))
    _, _, _, _, info = env.step(turn)
    assert info["signals"]["progress"] == pytest.approx(1 / 3)


def test_control_new_evidence_still_raises_progress_to_one(env):
    env.reset(seed=0, options={"hops": 3})
    gold = env.unwrapped.task.hidden["gold_docs"]
    total = 0.0
    for hop in range(3):
        env.step(call("search", query="zzzqqq xxyyzz"))  # finds nothing: pays nothing
        _, _, _, _, info = env.step(call("open", doc_id=gold[hop]))
        assert info["signals"]["gold_retrieved"] is True and info["signals"]["subgoals"] == [hop + 1, 3]
        assert info["signals"]["progress"] == pytest.approx(1 / 3)
        total += info["signals"]["progress"]
    assert total == pytest.approx(1.0)

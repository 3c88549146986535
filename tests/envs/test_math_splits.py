"""Math-v0's content splits: no question of one pool is ever produced by another (the prompt is the
task; answers repeat across questions by nature: 7 is the answer of many sums)."""

import json

import pytest

import rlgym_llm
from rlgym_llm.core.errors import ConfigError
from rlgym_llm.core.splits import split_of
from rlgym_llm.testing.splits import assert_disjoint, overlaps, split_pools

LEARNING_TIER = {"difficulty": 0, "kinds": ["arithmetic"], "prompt": "short"}  # configs/env/math.yaml


def test_the_learning_tiers_pools_are_disjoint_and_each_holds_200_questions():
    pools = split_pools("rlgym/Math-v0", range(4000), **LEARNING_TIER)
    assert_disjoint(pools)
    sizes = {name: len(pool.keys) for name, pool in pools.items()}
    # level 0 has 99 x 2 x 99 = 19,602 questions (~3,900 in each held-out pool): 4,000 draws find ~2,500
    assert all(size >= 2000 for size in sizes.values()), sizes


def test_the_harder_tiers_are_split_too():
    pools = split_pools("rlgym/Math-v0", range(1500), difficulty=[1, 2, 3])
    assert_disjoint(pools)
    assert min(len(p.keys) for p in pools.values()) >= 1000  # a large space: nearly every draw is new


def test_the_check_finds_an_overlap():  # control: the same pool twice is not disjoint
    a = split_pools("rlgym/Math-v0", range(200), splits=["train"], **LEARNING_TIER)["train"]
    assert overlaps({"train": a, "again": a})


def test_a_seed_gives_the_same_task_and_each_pool_its_own():
    def question(split, seed):
        env = rlgym_llm.make("rlgym/Math-v0", split=split, **LEARNING_TIER)
        env.reset(seed=seed)
        return env.unwrapped.task.prompt

    assert question("test", 11) == question("test", 11)
    for split in ("train", "val", "test"):
        assert split_of(question(split, 5)) == split


def test_an_unknown_split_is_refused_at_make():
    with pytest.raises(ConfigError, match="split must be one of"):
        rlgym_llm.make("rlgym/Math-v0", split="holdout")


def test_a_data_set_is_partitioned_by_question_and_task_index_counts_within_the_pool(tmp_path):
    path = tmp_path / "problems.jsonl"
    rows = [{"question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(300)]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    seen = {}
    for split in ("train", "val", "test"):
        env = rlgym_llm.make("rlgym/Math-v0", dataset=str(path), split=split)
        questions = {t.prompt for t in env.unwrapped.dataset}
        assert questions and all(split_of(q) == split for q in questions)
        seen[split] = questions
        env.reset(seed=0, options={"task_index": 0})
        assert env.unwrapped.task.prompt in questions
        with pytest.raises(ValueError, match=f"the '{split}' split's"):
            env.reset(seed=0, options={"task_index": len(questions)})
    assert set.union(*seen.values()) == {r["question"] for r in rows}
    assert sum(len(q) for q in seen.values()) == len(rows)

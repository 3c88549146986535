"""What each content split of an env produces, for the overlap tests of every shipped env.

    pools = split_pools("rlgym/Math-v0", seeds=range(3000), difficulty=0, kinds=["arithmetic"])
    assert_disjoint(pools)                      # no prompt, no content key in two splits
    assert len(pools["test"].keys) >= 200       # each held-out pool is big enough to learn on

A pool is collected the way training and evaluation draw episodes: `make(env_id, split=s, ...)`,
then `reset(seed=k)` for each seed. Nothing here is timed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rlgym_llm.core.splits import SPLITS


@dataclass
class Pool:
    """The distinct prompts (opening messages' text) and content keys one split produced."""

    split: str
    episodes: int = 0
    prompts: set[str] = field(default_factory=set)
    keys: set[str] = field(default_factory=set)
    answers: set[str] = field(default_factory=set)


def _opening_text(messages: Iterable[Mapping[str, Any]]) -> str:
    return "\n".join(str(m.get("content", "")) for m in messages)


def split_pools(
    env_id: str | Callable[[str], Any], seeds: Iterable[int], splits: Iterable[str] = SPLITS, **kwargs: Any
) -> dict[str, Pool]:
    """Reset an env of each split at every seed; collect the prompts and content keys it produced.

    `env_id` is a registered id (made with `split=` and `kwargs`) or a function of the split that
    returns an env.
    """
    import rlgym_llm

    seeds = list(seeds)
    pools = {}
    for split in splits:
        env = env_id(split) if callable(env_id) else rlgym_llm.make(env_id, split=split, **kwargs)
        pool = Pool(split)
        try:
            for seed in seeds:
                opening, _ = env.reset(seed=seed)
                # make() builds an rlgym Env, which carries the task it drew.
                task = env.unwrapped.task  # type: ignore[union-attr]
                pool.episodes += 1
                pool.prompts.add(_opening_text(opening))
                pool.keys.add(task.content_key())
                if task.answer is not None:
                    pool.answers.add(str(task.answer))
        finally:
            env.close()
        pools[split] = pool
    return pools


def overlaps(pools: Mapping[str, Pool], shared_prompt: bool = False) -> list[str]:
    """Each prompt or content key found in two splits, as readable lines (empty: disjoint).

    `shared_prompt`: the env shows every task the same prompt (its content is the hidden key), so
    only the keys must be disjoint.
    """
    problems = []
    names = list(pools)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            shared_keys = pools[a].keys & pools[b].keys
            if shared_keys:
                problems.append(f"{a}/{b}: {len(shared_keys)} shared task keys, e.g. {sorted(shared_keys)[:3]}")
            if not shared_prompt:
                shared = pools[a].prompts & pools[b].prompts
                if shared:
                    problems.append(f"{a}/{b}: {len(shared)} shared prompts, e.g. {sorted(shared)[:2]}")
    return problems


def assert_disjoint(pools: Mapping[str, Pool], shared_prompt: bool = False) -> None:
    """Fail with the overlaps, if any."""
    problems = overlaps(pools, shared_prompt)
    assert not problems, "\n".join(problems)

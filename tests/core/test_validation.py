"""The generic settings validator: unknown keys, types and choices found by walking the dataclass, every
problem at once, each with the closest valid name; range checks stay with the dataclass."""

from dataclasses import dataclass, field
from typing import Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlgym_llm.core.errors import ConfigError
from rlgym_llm.core.validation import check, closest, load, validate


@dataclass(frozen=True)
class Inner:
    """A nested section."""

    lr: float = 1e-3
    schedule: Literal["constant", "cosine"] = "constant"
    betas: tuple[float, float] = (0.9, 0.99)

    def __post_init__(self) -> None:
        problems = [f"lr must be > 0, got {self.lr}"] if self.lr <= 0 else []
        if not all(0 <= b < 1 for b in self.betas):
            problems.append(f"betas must lie in [0, 1), got {self.betas}")
        if problems:
            raise ConfigError(problems)


@dataclass
class Outer:
    """A root with a nested section, a registry-backed choice and free-form dicts."""

    steps: int = 3
    name: str | None = None
    method: str = field(default="grpo", metadata={"choices": lambda: ("grpo", "rloo", "turn_grpo")})
    inner: Inner = field(default_factory=Inner)
    kwargs: dict = field(default_factory=dict)
    ids: list[int] = field(default_factory=list)


def test_a_valid_mapping_builds_nested_dataclasses():
    cfg = load({"steps": 5, "inner": {"lr": 0.1, "betas": [0.5, 0.6]}, "kwargs": {"x": [1]}}, Outer)
    assert cfg == Outer(steps=5, inner=Inner(lr=0.1, betas=(0.5, 0.6)), kwargs={"x": [1]})
    assert isinstance(cfg.inner.betas, tuple)  # YAML lists become the declared tuples


def test_every_problem_at_once_with_its_fix():
    data = {"stepz": 1, "name": 3, "method": "gpro", "inner": {"schedule": "cosin", "lrr": 1}, "ids": [1, "a"]}
    assert check(data, Outer) == [
        "unknown key `stepz`: did you mean `steps`?",
        "`name` must be str, got 3 (int); set `name=<str>`",
        "unknown key `inner.lrr`: did you mean `inner.lr`?",
        "`ids[1]` must be int, got 'a' (str); set `ids[1]=<int>`",
        "`method=gpro` is not one of grpo, rloo, turn_grpo (did you mean 'grpo'?)",
        "`inner.schedule=cosin` is not one of constant, cosine (did you mean 'cosine'?)",
    ]


def test_a_key_that_moved_one_section_deeper_is_found_there():
    assert check({"lr": 1.0}, Outer) == ["unknown key `lr`: did you mean `inner.lr`?"]
    assert check({"schedule": "x"}, Outer, "trainer.") == [
        "unknown key `trainer.schedule`: did you mean `trainer.inner.schedule`?"
    ]


def test_range_checks_of_every_section_join_the_wrong_choices():
    cfg, problems = validate({"method": "ppo", "inner": {"lr": -1.0, "betas": [2.0, 0.5]}}, Outer, "run.")
    assert problems == [
        "`run.method=ppo` is not one of grpo, rloo, turn_grpo",
        "run.inner.lr must be > 0, got -1.0",
        "run.inner.betas must lie in [0, 1), got (2.0, 0.5)",
    ]
    # the object is still built (the failed section unchecked) so rules between sections can run
    assert cfg is not None and cfg.inner.lr == -1.0
    with pytest.raises(ConfigError) as e:
        load({"method": "ppo", "inner": {"lr": -1.0}}, Outer)
    assert len(e.value.problems) == 2


def test_wrong_types_stop_before_building():
    cfg, problems = validate({"steps": "many", "inner": {"lr": -1.0}}, Outer)
    assert cfg is None and problems == ["`steps` must be int, got 'many' (str); set `steps=<int>`"]
    assert check({"steps": True}, Outer) == ["`steps` must be int, got True (bool); set `steps=<int>`"]
    assert check({"inner": {"betas": [0.1]}}, Outer) == ["`inner.betas` must hold 2 values, got 1"]
    assert check({"inner": 3}, Outer) == ["`inner` must be a mapping, got 3 (int)"]


def test_closest_prefers_one_edit_and_a_shared_stem():
    options = ["drgrpo", "gated", "gigpo", "grpo", "igpo", "rloo", "spa", "turn_grpo"]
    assert closest("gpro", options) == "grpo"  # a swap is one edit (difflib alone says igpo)
    assert closest("grop", options) == "grpo"
    assert closest("turngrpo", options) == "turn_grpo"
    assert closest("tau_typo", ["tau", "gamma"]) == "tau"
    assert closest("ppo", options) is None and closest("xyz", options) is None


@given(st.text(alphabet="abcdefghij_", min_size=2, max_size=10))
def test_a_single_swap_or_deletion_is_recognised(word):
    options = [word, "zzzzzzzzzzzz"]
    swapped = word[1] + word[0] + word[2:]
    assert closest(swapped, options) == word
    assert closest(word[:-1] + "q" + word[-1:], options) == word


def test_matches_reads_plain_data_against_annotations():
    from collections.abc import Mapping, Sequence
    from pathlib import Path
    from typing import Literal

    from rlgym_llm.core.validation import matches

    assert matches(2, int | Sequence[int]) and matches([1, 2], int | Sequence[int])
    assert not matches("banana", int | Sequence[int])  # a string is not a sequence of levels
    assert matches("arith", Sequence[str] | None) and matches(None, Sequence[str] | None)
    assert matches("data.jsonl", str | Path | None) and not matches(3, str | Path)
    assert not matches(True, int) and matches(1, float) and not matches("1", float)
    assert matches({"a": 1}, Mapping[str, int]) and not matches({"a": "x"}, Mapping[str, int])
    assert matches("b", Literal["a", "b"]) and not matches("c", Literal["a", "b"])


def test_check_call_lists_unknown_wrong_and_missing_arguments():
    from rlgym_llm.core.validation import check_call

    class Env:
        def __init__(self, size: int, level: int | list[int] = 1, name: str = "x"):
            pass

    problems = check_call(Env, {"levle": 2, "name": 3}, "env.kwargs.")
    assert problems == [
        "unknown key `env.kwargs.levle` (did you mean `env.kwargs.level`?); "
        f"{Env.__module__}:{Env.__qualname__} takes: size, level, name",
        "`env.kwargs.name=3` must be str, got int",
        f"`env.kwargs.size` is required by {Env.__module__}:{Env.__qualname__}; set `env.kwargs.size=<value>`",
    ]
    assert check_call(Env, {"size": 3}, given=()) == [] and check_call(Env, {}, given=["size"]) == []
    assert check_call(lambda **kw: None, {"anything": 1}) == []

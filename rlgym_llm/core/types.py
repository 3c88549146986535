"""Record types shared by every room: messages, tool calls, signals, turns and trajectories.

Records are frozen dataclasses; validation of untrusted data (tool arguments, JSON from servers)
happens at the boundary with pydantic, not here. Everything round-trips through plain JSON
(`to_dict` / `from_dict`) so trajectories can stream to JSONL.
"""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal, TypedDict

from rlgym_llm.core.errors import MalformedActionError

Role = Literal["system", "user", "assistant", "tool"]
ROLES: tuple[str, ...] = ("system", "user", "assistant", "tool")


class Message(TypedDict, total=False):
    """A chat message as chat templates and OpenAI-style APIs expect it.

    `role` and `content` are always present; tool results also carry `name` and `tool_call_id`;
    assistant messages may carry `tool_calls` in the OpenAI format.
    """

    role: Role
    content: str
    name: str
    tool_call_id: str
    tool_calls: list[dict[str, Any]]


Messages = list[Message]


@dataclass(frozen=True)
class ToolCall:
    """One tool call parsed from model text by an agent.

    Args:
        name: the tool's name as declared by the env.
        arguments: the decoded JSON arguments. Envs validate them against the tool's model.
        id: a call id, echoed back as `tool_call_id` on the tool's result message.
    """

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    id: str = ""

    def to_openai(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": json.dumps(dict(self.arguments))},
        }

    @classmethod
    def from_any(cls, raw: Any, index: int = 0) -> ToolCall:
        """Read a tool call from this record, a flat dict or the OpenAI `function` format.

        Raises:
            MalformedActionError: the call has no string name or its arguments are not a JSON object.
        """
        if isinstance(raw, ToolCall):
            return raw
        if not isinstance(raw, Mapping):
            raise MalformedActionError(f"tool call #{index} is a {type(raw).__name__}, not an object")
        fn = raw.get("function", raw)
        if not isinstance(fn, Mapping):
            raise MalformedActionError(f"tool call #{index}: `function` must be an object")
        name, args = fn.get("name"), fn.get("arguments", {})
        if not isinstance(name, str) or not name:
            raise MalformedActionError(f"tool call #{index} has no tool name")
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except json.JSONDecodeError as e:
                raise MalformedActionError(
                    f"tool call #{index} ({name}): arguments are not valid JSON ({e.msg} at char {e.pos})"
                ) from None
        if not isinstance(args, Mapping):
            raise MalformedActionError(
                f"tool call #{index} ({name}): arguments must be a JSON object, got {type(args).__name__}"
            )
        call_id = raw.get("id") or f"call_{index}"
        return cls(name=name, arguments=dict(args), id=str(call_id))


@dataclass(frozen=True)
class AssistantTurn:
    """The action an env receives: the assistant's text and the tool calls an agent parsed from it.

    `parse_errors` are the tool calls the agent could not parse (bad JSON, no name, cut off); the env
    answers each with an error message, so the model learns what went wrong.
    """

    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    parse_errors: tuple[str, ...] = ()

    def to_message(self) -> Message:
        msg: Message = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            msg["tool_calls"] = [c.to_openai() for c in self.tool_calls]
        return msg

    @classmethod
    def coerce(cls, action: Any) -> AssistantTurn:
        """Accept a turn, plain text, or an assistant message dict (OpenAI tool-call format).

        Raises:
            MalformedActionError: the action has none of those shapes.
        """
        if isinstance(action, AssistantTurn):
            return action
        if isinstance(action, str):
            return cls(content=action)
        if isinstance(action, Mapping):
            content = action.get("content")
            if content is None:
                content = ""
            if not isinstance(content, str):
                raise MalformedActionError(f"message content must be a string, got {type(content).__name__}")
            role = action.get("role", "assistant")
            if role != "assistant":
                raise MalformedActionError(f"an action must be an assistant message, got role {role!r}")
            raw_calls = action.get("tool_calls") or []
            if not isinstance(raw_calls, Sequence) or isinstance(raw_calls, (str, bytes)):
                raise MalformedActionError("`tool_calls` must be a list")
            calls, errors = [], []
            for i, raw in enumerate(raw_calls):
                try:
                    calls.append(ToolCall.from_any(raw, i))
                except MalformedActionError as e:
                    errors.append(str(e))
            return cls(content=content, tool_calls=tuple(calls), parse_errors=tuple(errors))
        raise MalformedActionError(
            f"an action must be a string, an assistant message dict or an AssistantTurn, got {type(action).__name__}"
        )


@dataclass(frozen=True)
class ToolSpec:
    """A tool as the model sees it: name, description and a JSON schema of its arguments."""

    name: str
    description: str
    parameters: Mapping[str, Any]

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI / chat-template `tools=[...]` entry."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }


# --- step signals -------------------------------------------------------------------------------

SIGNAL_KEYS: tuple[str, ...] = ("tool_ok", "progress", "subgoals", "tests", "reward_components", "state_key")


@dataclass(frozen=True)
class StepSignals:
    """Per-step signals an env reports in `info["signals"]` (see DESIGN.md).

    Args:
        tool_ok: whether every tool call of the step ran without error (None: no tool was called).
        progress: task progress in [0, 1] after the step.
        subgoals: (done, total) sub-goals reached so far.
        tests: (passed, total, per-test pass vector) for code-like tasks.
        reward_components: named parts of the step's reward.
        state_key: a canonical key of the env state, used to build step-level groups.
        extra: env-specific signals (e.g. `calls_made`), kept under their own names.
    """

    tool_ok: bool | None = None
    progress: float | None = None
    subgoals: tuple[int, int] | None = None
    tests: tuple[int, int, tuple[bool, ...]] | None = None
    reward_components: Mapping[str, float] = field(default_factory=dict)
    state_key: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The `info["signals"]` dict: standard keys always present, then the extra ones."""
        out: dict[str, Any] = {
            "tool_ok": self.tool_ok,
            "progress": None if self.progress is None else float(self.progress),
            "subgoals": None if self.subgoals is None else [int(x) for x in self.subgoals],
            "tests": None
            if self.tests is None
            else {
                "passed": int(self.tests[0]),
                "total": int(self.tests[1]),
                "vector": [bool(x) for x in self.tests[2]],
            },
            "reward_components": {str(k): float(v) for k, v in self.reward_components.items()},
            "state_key": self.state_key,
        }
        for key, value in self.extra.items():
            if key in out:
                raise ValueError(f"extra signal {key!r} shadows a standard signal key")
            out[key] = value
        return out


def signal_problems(signals: Any) -> list[str]:
    """List every way `signals` departs from the standard `info["signals"]` layout."""
    if not isinstance(signals, Mapping):
        return [f'info["signals"] must be a dict, got {type(signals).__name__}']
    problems = [f'info["signals"] lacks the standard key {k!r}' for k in SIGNAL_KEYS if k not in signals]
    tool_ok = signals.get("tool_ok")
    if tool_ok is not None and not isinstance(tool_ok, bool):
        problems.append(f"signals.tool_ok must be bool or None, got {tool_ok!r}")
    progress = signals.get("progress")
    if progress is not None and (
        isinstance(progress, bool) or not isinstance(progress, (int, float)) or not 0.0 <= progress <= 1.0
    ):
        problems.append(f"signals.progress must be a number in [0, 1] or None, got {progress!r}")
    sub = signals.get("subgoals")
    if sub is not None and not (
        isinstance(sub, (list, tuple))
        and len(sub) == 2
        and all(isinstance(x, int) and not isinstance(x, bool) for x in sub)
        and 0 <= sub[0] <= sub[1]
    ):
        problems.append(f"signals.subgoals must be [done, total] with 0 <= done <= total, got {sub!r}")
    tests = signals.get("tests")
    if tests is not None:
        ok = (
            isinstance(tests, Mapping)
            and isinstance(tests.get("passed"), int)
            and isinstance(tests.get("total"), int)
            and isinstance(tests.get("vector"), list)
            and all(isinstance(x, bool) for x in tests["vector"])
            and len(tests["vector"]) == tests["total"]
            and sum(tests["vector"]) == tests["passed"]
        )
        if not ok:
            problems.append(f"signals.tests must be {{passed, total, vector}} and consistent, got {tests!r}")
    comps = signals.get("reward_components", {})
    if not isinstance(comps, Mapping) or not all(
        isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        for k, v in comps.items()
    ):
        problems.append(f"signals.reward_components must map names to finite floats, got {comps!r}")
    key = signals.get("state_key")
    if key is not None and not isinstance(key, str):
        problems.append(f"signals.state_key must be a string or None, got {key!r}")
    return problems


# --- rollout records ----------------------------------------------------------------------------


class FailureKind(str, enum.Enum):
    """Where a failure came from; the rollout manager classifies every failure into one of these."""

    POLICY = "policy"  # the model's output could not be used (e.g. context overflow)
    ENV = "env"  # the env raised
    SANDBOX = "sandbox"  # the execution sandbox failed (not the code inside it)
    ENGINE = "engine"  # the inference engine failed (timeouts, HTTP errors, bad JSON)


@dataclass(frozen=True)
class Failure:
    """A failure recorded on a trajectory instead of being raised out of a training step."""

    kind: FailureKind
    error_type: str
    message: str
    turn: int | None = None
    attempts: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "kind": self.kind.value}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Failure:
        return cls(**{**d, "kind": FailureKind(d["kind"])})


@dataclass(frozen=True)
class Turn:
    """One assistant turn and the env's answer to it.

    Token fields are filled by the rollout manager: `obs_token_ids` are the tokens appended to the
    context before this turn's completion (the env's previous reply and the generation prompt;
    empty on the first turn, whose prompt is the trajectory's `prompt_token_ids`).
    """

    index: int
    action: AssistantTurn
    observation: Messages
    reward: float
    terminated: bool
    truncated: bool
    signals: Mapping[str, Any] = field(default_factory=dict)
    obs_token_ids: tuple[int, ...] = ()
    completion_token_ids: tuple[int, ...] = ()
    completion_logprobs: tuple[float, ...] = ()
    finish_reason: str | None = None
    timings: Mapping[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; `Turn.from_dict` reads it back into an equal turn."""
        d = asdict(self)
        d["action"] = {
            "content": self.action.content,
            "tool_calls": [
                {"name": c.name, "arguments": dict(c.arguments), "id": c.id} for c in self.action.tool_calls
            ],
            "parse_errors": list(self.action.parse_errors),
        }
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Turn:
        action = d["action"]
        turn = AssistantTurn(
            content=action["content"],
            tool_calls=tuple(ToolCall(**c) for c in action["tool_calls"]),
            parse_errors=tuple(action.get("parse_errors", ())),
        )
        kw = {f.name: d[f.name] for f in fields(cls) if f.name in d}
        for name in ("obs_token_ids", "completion_token_ids", "completion_logprobs"):
            kw[name] = tuple(kw.get(name, ()))
        return cls(**{**kw, "action": turn})


@dataclass
class Trajectory:
    """One episode, built turn by turn by the rollout manager and consumed by credit assignment.

    Token-level views (`token_ids`, `loss_mask`, `logprobs`, `turn_spans`) are derived from the turns,
    so they can never disagree with them.

    `voided` says the env voided the episode's grade because it caught forgery or tampering (a step's
    `info["voided"]`), with the steps' `info["void_reason"]`s in `void_reasons`. A voided episode keeps
    the reward the env paid (0.0 for a voided grade) and stays in the loss: it is no failure, it is
    counted (in eval reports and training metrics) so that caught forgery is visible.
    """

    env_id: str
    seed: int | None
    task_id: str
    group_id: str = ""
    sample_index: int = 0
    opening: Messages = field(default_factory=list)
    prompt_token_ids: tuple[int, ...] = ()
    turns: list[Turn] = field(default_factory=list)
    outcome: Mapping[str, Any] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    voided: bool = False
    void_reasons: list[str] = field(default_factory=list)

    @property
    def reward(self) -> float:
        """The episode's final verifiable reward (0.0 if the episode never finished)."""
        return float(self.outcome.get("reward", 0.0))

    @property
    def failed(self) -> bool:
        """A failed episode is kept as data but excluded from the loss."""
        return bool(self.failures)

    def record_void(self, info: Mapping[str, Any]) -> None:
        """Record a step's void, if its `info` says `voided`: the flag, and its reason once."""
        if not info.get("voided"):
            return
        self.voided = True
        reason = str(info.get("void_reason") or "").strip()
        if reason and reason not in self.void_reasons:
            self.void_reasons.append(reason)

    @property
    def token_ids(self) -> list[int]:
        ids = list(self.prompt_token_ids)
        for t in self.turns:
            ids += t.obs_token_ids
            ids += t.completion_token_ids
        return ids

    @property
    def loss_mask(self) -> list[int]:
        """1 on tokens the policy generated, 0 on prompt and env tokens."""
        mask = [0] * len(self.prompt_token_ids)
        for t in self.turns:
            mask += [0] * len(t.obs_token_ids)
            mask += [1] * len(t.completion_token_ids)
        return mask

    @property
    def logprobs(self) -> list[float]:
        """Per-token sampling logprobs aligned with `token_ids` (0.0 where the mask is 0)."""
        out = [0.0] * len(self.prompt_token_ids)
        for t in self.turns:
            out += [0.0] * len(t.obs_token_ids)
            out += t.completion_logprobs
        return out

    @property
    def turn_spans(self) -> list[tuple[int, int]]:
        """(start, end) token offsets of each turn's completion in `token_ids`."""
        spans, pos = [], len(self.prompt_token_ids)
        for t in self.turns:
            pos += len(t.obs_token_ids)
            spans.append((pos, pos + len(t.completion_token_ids)))
            pos += len(t.completion_token_ids)
        return spans

    def to_dict(self) -> dict[str, Any]:
        return {
            "env_id": self.env_id,
            "seed": self.seed,
            "task_id": self.task_id,
            "group_id": self.group_id,
            "sample_index": self.sample_index,
            "opening": self.opening,
            "prompt_token_ids": list(self.prompt_token_ids),
            "turns": [t.to_dict() for t in self.turns],
            "outcome": dict(self.outcome),
            "failures": [f.to_dict() for f in self.failures],
            "metadata": self.metadata,
            "voided": self.voided,
            "void_reasons": list(self.void_reasons),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Trajectory:
        return cls(
            **{
                **d,
                "prompt_token_ids": tuple(d.get("prompt_token_ids", ())),
                "turns": [Turn.from_dict(t) for t in d.get("turns", [])],
                "failures": [Failure.from_dict(f) for f in d.get("failures", [])],
                "voided": bool(d.get("voided", False)),  # absent in trajectories saved before it was recorded
                "void_reasons": [str(r) for r in d.get("void_reasons", [])],
            }
        )

"""The env contract: a `gymnasium.Env` whose observations are chat messages.

    messages, info = env.reset(seed=7)              # opening system/user messages
    messages, reward, terminated, truncated, info = env.step(turn)

- `reset` returns the opening messages; `step` returns only the *new* messages the env adds
  (tool results, feedback), so a rollout can extend its token context without re-rendering.
- An action is the assistant's turn: text, an assistant message dict, or an `AssistantTurn` with
  tool calls parsed by an agent. Envs judge; agents parse. A malformed action or a bad tool call
  becomes an error message in the observation, never an exception.
- `terminated` means the task ended (e.g. an answer was submitted); `truncated` means a limit cut
  the episode off. On either, `info["outcome"]` holds the final verifiable reward and its parts.
- `info["signals"]` carries the standard per-step signals (`StepSignals`).
- Same seed, same task, same opening: a GRPO group starts identically. The env draws everything
  from its own `self.np_random`. The ground truth lives on `env.task`, never in an observation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import gymnasium
from gymnasium.error import ResetNeeded

from rlgym_llm.core.errors import MalformedActionError
from rlgym_llm.core.spaces import ActionSpace, ChatSpace
from rlgym_llm.core.tools import Tool
from rlgym_llm.core.types import AssistantTurn, Message, Messages, StepSignals, ToolSpec


@dataclass(frozen=True)
class Task:
    """One task instance. `answer` and `hidden` are ground truth for verifiers and trainers only.

    Args:
        id: a stable id (same seed and options give the same id).
        prompt: the task text shown to the model.
        answer: the reference answer.
        hidden: other ground truth (hidden tests, gold documents, goal predicates, ...).
        meta: public facts about the task (difficulty, kind, source).
    """

    id: str
    prompt: str
    answer: Any = None
    hidden: Mapping[str, Any] = field(default_factory=dict)
    meta: Mapping[str, Any] = field(default_factory=dict)

    def secrets(self) -> list[str]:
        """Strings that must never appear in an observation (checked by `check_env`).

        By default the answer's text when it is at least 3 characters long: shorter answers
        (e.g. "12") occur in ordinary text and cannot be told apart from a leak.
        """
        text = str(self.answer).strip() if self.answer is not None else ""
        return [text] if len(text) >= 3 else []

    def opening_secrets(self) -> list[str]:
        """Strings the opening messages must not contain (by default, `secrets()`).

        Envs whose tools legitimately reveal the answer (search results contain it) return no
        `secrets()` but still keep the answer out of the opening.
        """
        return self.secrets()


@dataclass(frozen=True)
class Step:
    """What an env's `respond` returns; `Env.step` turns it into Gymnasium's 5-tuple."""

    messages: Messages
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    signals: StepSignals = field(default_factory=StepSignals)
    info: Mapping[str, Any] = field(default_factory=dict)


class Env(gymnasium.Env[Messages, Any]):
    """Base class of rlgym-llm envs. Subclasses implement `sample_task`, `opening`, `respond`, `outcome`.

    Class attributes:
        tools: the tool argument models the env accepts (see `rlgym_llm.core.tools.Tool`).
        reward_range: the (min, max) of any reward the env returns; `check_env` enforces it.
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012  (Gymnasium declares it this way)
    tools: ClassVar[tuple[type[Tool], ...]] = ()
    reward_range: ClassVar[tuple[float, float]] = (0.0, 1.0)

    def __init__(self) -> None:
        self.observation_space = ChatSpace()
        self.action_space = ActionSpace([t.name for t in self.tools])
        self.render_mode = None
        self._task: Task | None = None
        self.turn = 0

    # --- to implement --------------------------------------------------------------------------

    def sample_task(self, options: Mapping[str, Any]) -> Task:
        """Draw a task with `self.np_random` (or pick one named in `options`)."""
        raise NotImplementedError

    def opening(self, task: Task) -> Messages:
        """The opening messages for `task`."""
        raise NotImplementedError

    def respond(self, turn: AssistantTurn) -> Step:
        """Judge one assistant turn: run its tool calls, grade answers, say what happens next."""
        raise NotImplementedError

    def outcome(self) -> dict[str, Any]:
        """The final verifiable reward as things stand: `{"reward": float, "components": {...}}`."""
        raise NotImplementedError

    # --- the Gymnasium API ----------------------------------------------------------------------

    @property
    def task(self) -> Task:
        """The current task, ground truth included (for verifiers and trainers, not the model)."""
        if self._task is None:
            raise ResetNeeded("call env.reset() before reading env.task")
        return self._task

    def tool_specs(self) -> list[ToolSpec]:
        """The env's tools as JSON-schema specs, for agents to render with the chat template."""
        return [t.spec() for t in self.tools]

    def tool_schemas(self) -> list[dict[str, Any]]:
        """The OpenAI-format tool list (a fresh copy each call; the schemas are built once per class)."""
        cls = type(self)
        cached = cls.__dict__.get("_tool_schemas_json")
        if cached is None:
            cached = json.dumps([s.to_openai() for s in self.tool_specs()])
            cls._tool_schemas_json = cached  # type: ignore[attr-defined]
        return json.loads(cached)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Messages, dict]:
        super().reset(seed=seed)
        self._task = self.sample_task(options or {})
        self.turn = 0
        return self.opening(self._task), {"task_id": self._task.id, "tools": self.tool_schemas()}

    def step(self, action: Any) -> tuple[Messages, float, bool, bool, dict]:
        if self._task is None:
            raise ResetNeeded("call env.reset() before env.step()")
        self.turn += 1
        try:
            turn = AssistantTurn.coerce(action)
        except MalformedActionError as e:
            result = self.invalid_action(str(e))
        else:
            result = self.respond(turn)
            if turn.parse_errors:  # calls the agent could not parse: tell the model, after the tool results
                errors = [_error_message(f"{e}. Write calls as the tool schemas say.") for e in turn.parse_errors]
                signals = replace(result.signals, tool_ok=False)
                result = replace(result, messages=[*result.messages, *errors], signals=signals)
        info: dict[str, Any] = {**result.info, "turn": self.turn, "signals": result.signals.to_dict()}
        if result.terminated or result.truncated:
            info["outcome"] = self.outcome()
        return result.messages, float(result.reward), result.terminated, result.truncated, info

    def invalid_action(self, problem: str) -> Step:
        """The answer to an action that is not an assistant turn at all. Override to add signals."""
        return Step(
            messages=[_error_message(f"{problem}. Reply with text or a tool call.")], signals=StepSignals(tool_ok=False)
        )


def _error_message(text: str) -> Message:
    return {"role": "user", "content": f"Error: {text}"}

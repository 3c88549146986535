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

import abc
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import gymnasium
from gymnasium.error import ResetNeeded

from rlgym_llm.core.dispatch import Handler, ToolResult, ToolRun, clip_observation, collect_tools, dispatch
from rlgym_llm.core.errors import ConfigError, MalformedActionError
from rlgym_llm.core.spaces import ActionSpace, ChatSpace
from rlgym_llm.core.splits import SPLITS
from rlgym_llm.core.tools import Tool
from rlgym_llm.core.types import AssistantTurn, Message, Messages, StepSignals, ToolSpec

MIN_OBSERVATION_CHARS = 2000  # room for the error and cut notices of a full turn


@dataclass(frozen=True)
class Task:
    """One task instance. `answer` and `hidden` are ground truth for verifiers and trainers only.

    Args:
        id: a stable id (same seed and options give the same id).
        prompt: the task text shown to the model.
        answer: the reference answer.
        hidden: other ground truth (hidden tests, gold documents, goal predicates, ...).
        meta: public facts about the task (difficulty, kind, source).
        key: what makes two tasks "the same task" for content splits (`rlgym_llm.core.splits`): by
            default the prompt; an env whose prompt is shared by every task gives the hidden task here
            (the target, the secret, the bug set, the world).
    """

    id: str
    prompt: str
    answer: Any = None
    hidden: Mapping[str, Any] = field(default_factory=dict)
    meta: Mapping[str, Any] = field(default_factory=dict)
    key: str | None = None

    def content_key(self) -> str:
        """The task's content key: `key` when given, else the prompt."""
        return self.key if self.key is not None else self.prompt

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


class Env(gymnasium.Env[Messages, Any], abc.ABC):
    """Base class of rlgym-llm envs. Subclasses implement `sample_task`, `opening` and `outcome`.

    The base class runs the episode: `reset` draws a task and calls `new_episode(task)` to reset the
    env's per-episode state; `step` turns the action into an `AssistantTurn` and calls `respond`. The
    default `respond` runs the turn's tool calls (`run_tools`: each call answered by the env's handler of
    that tool, `on_<tool>(args)`, or by its `function_tool` method), nudges the model when it called no
    tool, and ends the episode once `episode_over()` says so, paying `outcome()`'s reward on that step.
    Override `respond` for other rules.

    Args:
        max_tool_calls: the most tool calls run per turn; the rest are not run, and one message says so.
        max_observation_chars: the most characters of the messages one step returns; longer tool
            results are cut (each keeps its beginning) with a note saying how much was cut.
        split: the content pool tasks come from, `train` (default), `val` or `test`: pools share no task
            (`rlgym_llm.core.splits`; each env's docstring says how it splits). `sample_task` honours it.

    Class attributes:
        tools: the tools the env accepts: `Tool` models and `function_tool` functions; methods decorated
            with `function_tool` are added. After class creation it holds the `Tool` models.
        reward_range: the (min, max) of any reward the env returns; `check_env` enforces it.
        ignored_call: the answer to a call made after the episode ended (in the same turn).
        no_tool_call: the nudge after a turn without tool calls (default `respond`).
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012  (Gymnasium declares it this way)
    tools: ClassVar[tuple[type[Tool], ...]] = ()
    reward_range: ClassVar[tuple[float, float]] = (0.0, 1.0)
    ignored_call: ClassVar[ToolResult] = ToolResult("Ignored: the episode has already ended.", ok=None)
    no_tool_call: ClassVar[str] = "Call one of the tools."
    _tool_handlers: ClassVar[dict[str, Handler]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        tools, handlers = collect_tools(cls, cls.tools)
        cls.tools, cls._tool_handlers = tools, {**cls._tool_handlers, **handlers}

    def __init__(self, max_tool_calls: int = 16, max_observation_chars: int = 32_000, split: str = "train") -> None:
        problems = []
        if not isinstance(split, str) or split not in SPLITS:
            problems.append(f"split must be one of {list(SPLITS)}, got {split!r}")
        if isinstance(max_tool_calls, bool) or not isinstance(max_tool_calls, int) or max_tool_calls < 1:
            problems.append(f"max_tool_calls must be an int >= 1, got {max_tool_calls!r}")
        if isinstance(max_observation_chars, bool) or not isinstance(max_observation_chars, int):
            problems.append(
                f"max_observation_chars must be an int >= {MIN_OBSERVATION_CHARS}, got {max_observation_chars!r}"
            )
        elif max_observation_chars < MIN_OBSERVATION_CHARS:
            problems.append(f"max_observation_chars must be >= {MIN_OBSERVATION_CHARS}, got {max_observation_chars!r}")
        if problems:
            raise ConfigError(problems)
        self.max_tool_calls = max_tool_calls
        self.max_observation_chars = max_observation_chars
        self.split = split
        self.observation_space = ChatSpace()
        self.action_space = ActionSpace([t.name for t in self.tools])
        self.render_mode = None
        self._task: Task | None = None
        self.turn = 0

    # --- to implement --------------------------------------------------------------------------

    @abc.abstractmethod
    def sample_task(self, options: Mapping[str, Any]) -> Task:
        """Draw a task with `self.np_random` (or pick one named in `options`)."""

    @abc.abstractmethod
    def opening(self, task: Task) -> Messages:
        """The opening messages for `task`."""

    @abc.abstractmethod
    def outcome(self) -> dict[str, Any]:
        """The final verifiable reward as things stand: `{"reward": float, "components": {...}}`."""

    # --- to override when needed ---------------------------------------------------------------

    def new_episode(self, task: Task) -> None:
        """Reset the per-episode state for `task`; called by `reset` after `sample_task`, before `opening`."""

    def episode_over(self) -> bool:
        """Whether the episode's task has ended (e.g. an answer was submitted): later calls are not run."""
        return False

    def respond(self, turn: AssistantTurn) -> Step:
        """Judge one assistant turn: run its tool calls, grade answers, say what happens next."""
        was_over = self.episode_over()
        run = self.run_tools(turn)
        nudge: Message = {"role": "user", "content": self.no_tool_call}
        messages = run.messages if turn.tool_calls else [nudge]
        done = self.episode_over()
        outcome: dict[str, Any] = self.outcome() if done else {"reward": 0.0, "components": {}}
        reward = float(outcome["reward"]) if done and not was_over else 0.0
        signals = StepSignals(tool_ok=run.ok, reward_components=outcome["components"])
        return Step(messages, reward=reward, terminated=done, signals=signals)

    def handle_tool(self, args: Tool) -> str | ToolResult:
        """Run a tool that has no `on_<name>` handler (override to handle several tools in one place)."""
        raise TypeError(f"{type(self).__name__} has no handler for its tool {args.name!r}: define on_{args.name}")

    # --- helpers for `respond` -----------------------------------------------------------------

    def run_tools(self, turn: AssistantTurn) -> ToolRun:
        """Validate and run the turn's tool calls in order, one `tool` message each.

        A bad call (unknown tool, bad arguments) is answered with an error message; a call made once
        `episode_over()` holds is not run and gets `ignored_call`. Only the first `max_tool_calls` calls
        run; one user message after their results says how many more were dropped.
        """
        return dispatch(
            self,
            turn.tool_calls,
            self.tools,
            self._tool_handlers,
            self.episode_over,
            self.ignored_call,
            self.max_tool_calls,
        )

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
        task = self.sample_task(options or {})
        self._task, self.turn = task, 0
        self.new_episode(task)
        info = {"task_id": task.id, "split": self.split, "tools": self.tool_schemas(), **self.extra_info()}
        return self.opening(task), info

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
                shown = turn.parse_errors[: self.max_tool_calls]
                errors = [_error_message(f"{e}. Write calls as the tool schemas say.") for e in shown]
                if len(turn.parse_errors) > len(shown):
                    errors.append(
                        _error_message(f"{len(turn.parse_errors) - len(shown)} more calls could not be read.")
                    )
                signals = replace(result.signals, tool_ok=False)
                result = replace(result, messages=[*result.messages, *errors], signals=signals)
        clipped = clip_observation(result.messages, self.max_observation_chars)
        if clipped is not result.messages:
            result = replace(result, messages=clipped)
        info: dict[str, Any] = {
            **self.extra_info(),
            **result.info,
            "turn": self.turn,
            "signals": result.signals.to_dict(),
        }
        if result.terminated or result.truncated:
            info["outcome"] = self.outcome()
        return result.messages, float(result.reward), result.terminated, result.truncated, info

    def extra_info(self) -> dict[str, Any]:
        """Entries added to the `info` of every reset and step (e.g. a screenshot); none by default."""
        return {}

    def invalid_action(self, problem: str) -> Step:
        """The answer to an action that is not an assistant turn at all. Override to add signals."""
        return Step(
            messages=[_error_message(f"{problem}. Reply with text or a tool call.")], signals=StepSignals(tool_ok=False)
        )


def _error_message(text: str) -> Message:
    return {"role": "user", "content": f"Error: {text}"}

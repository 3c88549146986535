"""`rlgym/GUI-v0`: operate deterministic fake phone apps through their accessibility tree.

Each episode draws a goal for one app (settings, mail, shop checkout, file manager by default) and
starts on the home screen, so the agent navigates home -> app -> sub-screens past distractor apps,
settings, mails, products and files. Observations are the accessibility tree as text; with
`render_screenshot=True` (or `options={"render_screenshot": True}`) `info["screenshot"]` also holds
a PNG of the screen, base64-encoded so `info` stays JSON (it drops straight into an image data URL:
`"data:image/png;base64," + info["screenshot"]`). Screenshots need Pillow (the `gui` extra).

Reward: 1.0 when `done()` is called with every goal predicate satisfied, else 0.0; `done()` ends
the episode. Signals: `tool_ok`, `subgoals` (met, total), `progress` (met / total), `state_key`
(sha1 of the canonical device state: equal states, equal keys, whatever the path) and the extra
`invalid_action` (the UI rejected an action or a tool call was malformed).

Ground truth lives in `env.task.hidden` (`app`, `preds`, `relevant`, `texts`, `initial_state`).
The goal text itself is the prompt, and the answer is an action sequence rather than a string, so
`Task.secrets()` is empty: nothing in an observation can leak the solution.

Splits: a task is its goal. `Task.key` is the goal's app and predicates (`goal_key`, e.g.
`settings: display.dark_mode eq true`), whatever the initial state or the order the text names its
parts in, and the key's hash (`rlgym_llm.core.splits`) puts each goal in one split. The env redraws
the goal until it falls in its own split, so a `test` goal (its text, predicates and target state)
never comes from `train` or `val`. In the built-in apps the text names exactly one set of
predicates, so prompts are disjoint too. Pool sizes: docs/gui_env.md.

Reset options: `app` (draw the goal for this app), `task` (play this `Task`, taken from a GUI env's
`env.task` with the same apps: its initial state and goal; a `ValueError` names the split when the
task belongs to another) and `render_screenshot` (bool).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, Literal

from pydantic import Field

from rlgym_envs.gui.app import App, Goal, Pred, clone
from rlgym_envs.gui.apps import DEFAULT_APPS
from rlgym_envs.gui.device import Device, InvalidAction, state_key
from rlgym_llm import AssistantTurn, Env, Messages, Step, StepSignals, Task, Tool, ToolResult
from rlgym_llm.core.errors import ConfigError
from rlgym_llm.core.splits import MAX_DRAWS, draw_in_split, split_of

MAX_REDRAWS = 1000  # goals drawn before `max_subgoals` gives up on an app that never has so few

SYSTEM_PROMPT = """You operate a phone through its accessibility tree. Each screen lists one element a line: \
[id] role "label" and its state (on/off, checked, value, options, disabled).
Tools: click(id) presses a button, link, list item, switch or checkbox; type(id, text) replaces the text of a \
textbox; select(id, option) picks a combobox option; scroll(direction) shows list items hidden "up" or "down"; \
back() returns to the previous screen; done() ends the episode when the goal is reached.
Ids refer to the most recent screen and change from screen to screen."""


class Click(Tool):
    """Click an element of the current screen: a button, link, list item, switch or checkbox."""

    name: ClassVar[str] = "click"
    id: int = Field(description="the element's id, the number in [brackets]")


class TypeText(Tool):
    """Replace the text of a textbox of the current screen."""

    name: ClassVar[str] = "type"
    id: int = Field(description="the textbox's id")
    text: str = Field(max_length=500, description="the new text")


class Select(Tool):
    """Choose an option of a combobox of the current screen."""

    name: ClassVar[str] = "select"
    id: int = Field(description="the combobox's id")
    option: str = Field(description="one of the combobox's options, exactly as listed")


class Scroll(Tool):
    """Scroll the current screen's list to show items hidden above or below."""

    name: ClassVar[str] = "scroll"
    direction: Literal["up", "down"]


class Back(Tool):
    """Go back to the previous screen."""

    name: ClassVar[str] = "back"


class Done(Tool):
    """Declare the goal reached. Ends the episode."""

    name: ClassVar[str] = "done"


class GUIEnv(Env):
    """Fake phone apps driven by click/type/select/scroll/back/done.

    Args:
        apps: the installed apps (`App` instances, names unique); default: settings, mail, shop, files.
        task_apps: names of the apps goals are drawn from (default: all installed apps).
        render_screenshot: add a PNG screenshot to every `info` (needs Pillow).
        max_subgoals: the difficulty: draw only goals with at most this many subgoals (goal
            predicates; settings goals have 1 to 3), redrawing from the env's RNG. `None`: any goal.
        split: the goal pool, `train` (default), `val` or `test`: the pools share no goal (`goal_key`;
            the module docstring says how).
        max_tool_calls, max_observation_chars: the per-turn caps on tool calls run and on the
            characters returned (see `rlgym_llm.Env`).
    """

    tools: ClassVar[tuple[type[Tool], ...]] = (Click, TypeText, Select, Scroll, Back, Done)
    ignored_call = ToolResult("Ignored: the episode already ended with done().", ok=None)

    def __init__(
        self,
        apps: Sequence[App] | None = None,
        task_apps: Sequence[str] | None = None,
        render_screenshot: bool = False,
        max_subgoals: int | None = None,
        split: str = "train",
        max_tool_calls: int = 16,
        max_observation_chars: int = 32_000,
    ):
        super().__init__(max_tool_calls=max_tool_calls, max_observation_chars=max_observation_chars, split=split)
        self.device = Device(DEFAULT_APPS if apps is None else apps)
        names = [a.name for a in self.device.apps]
        self.task_apps = tuple(names if task_apps is None else task_apps)
        unknown = [n for n in self.task_apps if n not in names]
        if unknown or not self.task_apps:
            raise ValueError(f"task_apps {list(self.task_apps)} must name installed apps: {names}")
        if max_subgoals is not None and max_subgoals < 1:
            raise ValueError(f"max_subgoals must be >= 1 or None, got {max_subgoals}")
        self.max_subgoals = max_subgoals
        self.render_screenshot = render_screenshot
        self._screenshots = render_screenshot
        self._state: dict[str, Any] = {}
        self._preds: tuple[Pred, ...] = ()
        self._done = False

    # --- public helpers for planners and trainers ------------------------------------------------

    @property
    def state(self) -> dict[str, Any]:
        """A copy of the canonical device state (changing it does not change the env)."""
        return clone(self._state)

    def subgoals(self, state: Mapping[str, Any] | None = None) -> tuple[int, int]:
        """(met, total) goal predicates in `state` (default: the current state)."""
        return self.device.subgoals(self._state if state is None else state, self.task.hidden["app"], self._preds)

    # --- the Env contract -----------------------------------------------------------------------

    def new_episode(self, task: Task) -> None:
        self._state = clone(task.hidden["initial_state"])
        self._preds = tuple(Pred.from_dict(p) for p in task.hidden["preds"])
        self._done = False

    def episode_over(self) -> bool:
        return self._done

    def sample_task(self, options: Mapping[str, Any]) -> Task:
        unknown = set(options) - {"app", "task", "render_screenshot"}
        if unknown:
            raise ValueError(
                f"unknown reset options {sorted(unknown)}; GUIEnv takes 'app', 'task' and 'render_screenshot'"
            )
        self._screenshots = bool(options.get("render_screenshot", self.render_screenshot))
        if options.get("task") is not None:
            if options.get("app") is not None:
                raise ValueError("reset options 'task' and 'app' exclude each other: the task names its app")
            return self._own_task(options["task"])
        name = options.get("app")
        if name is None:
            name = self.task_apps[int(self.np_random.integers(len(self.task_apps)))]
        app = self.device.app(name)
        try:  # the goal app draws alone until its goal fits; the other apps' data follows
            data, goal = draw_in_split(
                lambda: self._draw_goal(app), self.split, key=lambda drawn: goal_key(name, drawn[1].preds)
            )
        except ConfigError:
            problem = f"app {name!r} drew no goal of split {self.split!r} in {MAX_DRAWS} draws: too few goals to split"
            raise ConfigError([problem]) from None
        state = self.device.initial_state(self.np_random, {name: data})
        hidden = {
            "app": name,
            "preds": [p.to_dict() for p in goal.preds],
            "relevant": None if goal.relevant is None else list(goal.relevant),
            "texts": _strings([p.value for p in goal.preds]),
            "initial_state": state,
        }
        digest = hashlib.sha1(json.dumps([state, hidden["preds"]], sort_keys=True).encode()).hexdigest()
        return Task(
            id=f"gui-{name}-{digest[:12]}",
            prompt=goal.text,
            hidden=hidden,
            meta={"app": name, "subgoals": len(goal.preds)},
            key=goal_key(name, goal.preds),
        )

    def _draw_goal(self, app: App) -> tuple[dict[str, Any], Goal]:
        """The app's data and a goal of at most `max_subgoals` subgoals."""
        for _ in range(MAX_REDRAWS):
            data, goal = app.sample(self.np_random)
            if self.max_subgoals is None or len(goal.preds) <= self.max_subgoals:
                return data, goal
        raise ValueError(
            f"no goal of app {app.name!r} with at most {self.max_subgoals} subgoals in {MAX_REDRAWS} draws"
        )

    def _own_task(self, task: Any) -> Task:
        """`options["task"]`, checked: a GUI task for these apps, of this env's split."""
        hidden = task.hidden if isinstance(task, Task) else {}
        if not {"app", "preds", "relevant", "texts", "initial_state"} <= set(hidden):
            raise ValueError(f"options['task'] must be a Task of a GUI env (its `env.task`), got {task!r:.200}")
        self.device.app(hidden["app"])
        apps = sorted(k for k in hidden["initial_state"] if k != "ui")
        installed = sorted(a.name for a in self.device.apps)
        if apps != installed:
            raise ValueError(f"options['task'] is for a device with apps {apps}; this env has {installed}")
        key = goal_key(hidden["app"], [Pred.from_dict(p) for p in hidden["preds"]])
        owner = split_of(key)
        if owner != self.split:
            raise ValueError(
                f"options['task'] ({task.id}: {task.prompt!r}) belongs to the {owner!r} split, not to this env's "
                f"{self.split!r} split; play it in an env made with split={owner!r}"
            )
        return dataclasses.replace(task, key=key)

    def opening(self, task: Task) -> Messages:
        screen = self.device.screen(task.hidden["initial_state"])
        return [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": f"Goal: {task.prompt}\n\n{screen.text()}"},
        ]

    def respond(self, turn: AssistantTurn) -> Step:
        if not turn.tool_calls:
            text = "No action taken: call one of the tools (click, type, select, scroll, back, done)."
            return self._step([{"role": "user", "content": f"{text}\n\n{self._screen_text()}"}], None, False)
        run = self.run_tools(turn)
        invalid = run.dropped > 0 or any(r is False for r in run.results)
        if not self._done:
            run.messages[-1]["content"] += f"\n\n{self._screen_text()}"
        return self._step(run.messages, run.ok, invalid, terminated=self._done)

    def on_done(self, args: Done) -> str:
        self._done = True
        return "Done. The episode has ended."

    def handle_tool(self, args: Tool) -> ToolResult:
        """The UI actions (click, type, select, scroll, back) go to the device."""
        try:
            self._state, result = self.device.apply(self._state, args.name, args.model_dump())
        except InvalidAction as e:
            return ToolResult(f"Error: invalid action: {e}.", ok=False)
        return ToolResult(result)

    def outcome(self) -> dict[str, Any]:
        met, total = self.subgoals()
        goal = met == total
        return {
            "reward": float(goal and self._done),
            "components": {"goal": float(goal), "subgoals_frac": met / total, "done_called": float(self._done)},
        }

    def invalid_action(self, problem: str) -> Step:
        content = f"Error: {problem}. Reply with a tool call.\n\n{self._screen_text()}"
        return self._step([{"role": "user", "content": content}], False, True)

    # --- internals ------------------------------------------------------------------------------

    def _step(self, messages: Messages, ok: bool | None, invalid: bool, terminated: bool = False) -> Step:
        met, total = self.subgoals()
        outcome: dict[str, Any] = self.outcome() if terminated else {"reward": 0.0, "components": {}}
        signals = StepSignals(
            tool_ok=ok,
            progress=met / total,
            subgoals=(met, total),
            reward_components=outcome["components"],
            state_key=state_key(self._state),
            extra={"invalid_action": invalid},
        )
        return Step(messages, outcome["reward"], terminated=terminated, signals=signals)

    def _screen_text(self) -> str:
        return self.device.screen(self._state).text()

    def extra_info(self) -> dict[str, Any]:
        if not self._screenshots:
            return {}
        from rlgym_envs.gui.render import screenshot_png  # Pillow loads only when screenshots are on

        png = screenshot_png(self.device.screen(self._state))
        return {"screenshot": base64.b64encode(png).decode("ascii")}


def goal_key(app: str, preds: Iterable[Pred]) -> str:
    """A goal's content key (`Task.key`): its app and its predicates in sorted order, e.g.
    `settings: display.dark_mode eq true`. Goals with equal keys are the same task, however their text
    orders the parts and whatever the initial state."""
    parts = sorted(f"{p.path} {p.op} {json.dumps(p.value, sort_keys=True, ensure_ascii=False)}" for p in preds)
    return f"{app}: " + "; ".join(parts)


def _strings(values: Any) -> list[str]:
    """The distinct strings inside JSON values, in order: what a planner may need to type."""
    out: list[str] = []
    stack = [values]
    while stack:
        v = stack.pop(0)
        if isinstance(v, str):
            if v not in out:
                out.append(v)
        elif isinstance(v, Mapping):
            stack.extend(v.values())
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
    return out

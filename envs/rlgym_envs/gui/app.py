"""The app model of the GUI env: apps as small declarative state machines.

An app's state is plain JSON data (a dict). Screens are derived from it: `App.view(data, screen)`
returns the screen's elements, and actions change the data through the elements' bindings and
effects. There is no hidden state, so the whole device has one canonical state (see `Device`).

    class Thermostat(App):
        name, title = "thermostat", "Thermostat"

        def sample(self, rng):
            data = {"mode": "off", "target": "20"}
            return data, Goal("In Thermostat, set the mode to heat.", (Pred("mode", "eq", "heat"),))

        def view(self, data, screen):
            return [Element("combobox", "Mode", bind="mode", options=("off", "heat", "cool"))]

Elements with a `bind` show and change the value at that dotted path of the app's data: a
switch or checkbox toggles a bool when clicked, a textbox takes `type`, a combobox takes `select`.
Buttons, links and list items run their `on_click` effects: functions of a `Ctx` that may change
the data and navigate (`go`, `back`, `root`). Helpers build the common effects.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np

HOME = "home"  # the launcher screen, below every app on the navigation stack

ROLES = ("button", "link", "listitem", "switch", "checkbox", "textbox", "combobox", "text")
CLICKABLE = frozenset({"button", "link", "listitem", "switch", "checkbox"})
BOUND = frozenset({"switch", "checkbox", "textbox", "combobox"})  # roles that show a value from the data

PredOp = Literal["eq", "contains", "excludes", "len"]


# --- dotted paths into JSON data -------------------------------------------------------------------


def get_path(data: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted path (`"display.dark_mode"`); KeyError if it is missing."""
    node: Any = data
    for part in path.split("."):
        node = node[part]
    return node


def set_path(data: dict[str, Any], path: str, value: Any) -> None:
    """Set the value at a dotted path; the parent dicts must exist."""
    *parents, last = path.split(".")
    node = data
    for part in parents:
        node = node[part]
    node[last] = value


def clone(value: Any) -> Any:
    """A deep copy of JSON data (dicts, lists, scalars); faster than `copy.deepcopy` for planners."""
    if isinstance(value, dict):
        return {k: clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clone(v) for v in value]
    return value


# --- goals --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pred:
    """One sub-goal: a predicate over the app's data.

    Args:
        path: dotted path into the app's data.
        op: `eq` (value equals), `contains` / `excludes` (the list at `path` has / lacks an item equal
            to `value`, or, when `value` is a dict, an item whose fields include all of `value`'s),
            `len` (the list at `path` has exactly `value` items).
        value: the JSON value to compare with.
    """

    path: str
    op: PredOp
    value: Any

    def holds(self, data: Mapping[str, Any]) -> bool:
        try:
            actual = get_path(data, self.path)
        except (KeyError, TypeError):
            return False
        if self.op == "eq":
            return bool(actual == self.value)
        if self.op == "len":
            return isinstance(actual, list) and len(actual) == self.value
        if self.op in ("contains", "excludes"):
            found = isinstance(actual, list) and any(_matches(item, self.value) for item in actual)
            return found if self.op == "contains" else not found
        raise ValueError(f"unknown predicate op {self.op!r}; use eq, contains, excludes or len")

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "op": self.op, "value": clone(self.value)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Pred:
        return cls(path=d["path"], op=d["op"], value=d["value"])


def _matches(item: Any, pattern: Any) -> bool:
    if isinstance(pattern, Mapping):
        return isinstance(item, Mapping) and all(k in item and item[k] == v for k, v in pattern.items())
    return bool(item == pattern)


@dataclass(frozen=True)
class Goal:
    """A task for one app: its text (shown to the model) and its sub-goal predicates (all must hold).

    Args:
        text: the goal as the user states it.
        preds: the sub-goals; the task is solved when all hold.
        relevant: dotted paths of the app's data a solution needs to change (`None`: any). Planners
            leave the rest alone, which keeps their search small; grading ignores it.
    """

    text: str
    preds: tuple[Pred, ...]
    relevant: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if not self.preds:
            raise ValueError("a Goal needs at least one Pred")


# --- elements and effects -------------------------------------------------------------------------


@dataclass
class Ctx:
    """What an effect may touch: the current app's data (mutable) and the navigation stack.

    Effects run on a copy of the device state, so mutating `data` in place is safe.
    """

    app: str
    data: dict[str, Any]
    nav: list[str]

    def go(self, screen: str) -> None:
        """Open a screen of this app on top of the current one."""
        self.nav.append(f"{self.app}:{screen}")

    def back(self) -> None:
        """Return to the previous screen."""
        if len(self.nav) > 1:
            self.nav.pop()

    def root(self) -> None:
        """Return to the app's main screen."""
        self.nav[:] = [HOME, f"{self.app}:main"]


Effect = Callable[[Ctx], None]


def go(screen: str) -> Effect:
    """Effect: open `screen` of the current app."""
    return lambda ctx: ctx.go(screen)


def back() -> Effect:
    """Effect: return to the previous screen."""
    return lambda ctx: ctx.back()


def root() -> Effect:
    """Effect: return to the app's main screen."""
    return lambda ctx: ctx.root()


def put(path: str, value: Any) -> Effect:
    """Effect: set the data at `path` to (a copy of) `value`."""
    return lambda ctx: set_path(ctx.data, path, clone(value))


@dataclass(frozen=True)
class Element:
    """One accessibility-tree node of a screen.

    Args:
        role: one of `ROLES`. Switches, checkboxes, textboxes and comboboxes need `bind`.
        label: the accessible name shown to the model.
        bind: dotted path of the data holding the element's value.
        options: the choices of a combobox.
        on_click: effects run, in order, when the element is clicked (after a switch/checkbox toggles).
        disabled: disabled elements reject every action.
        scrolls: the element belongs to the screen's scrolling list (shown a page at a time).
    """

    role: str
    label: str
    bind: str | None = None
    options: tuple[str, ...] = ()
    on_click: Effect | Sequence[Effect] = field(default=(), repr=False, compare=False)
    disabled: bool = False
    scrolls: bool = False

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"unknown role {self.role!r}; roles are {', '.join(ROLES)}")
        if self.role in BOUND and not self.bind:
            raise ValueError(f"a {self.role} element ({self.label!r}) needs `bind`, the data path of its value")
        if self.role == "combobox" and not self.options:
            raise ValueError(f"combobox {self.label!r} needs `options`")
        # A single effect is accepted for convenience; store a tuple either way.
        object.__setattr__(self, "on_click", self.effects)

    @property
    def effects(self) -> tuple[Effect, ...]:
        """The `on_click` effects as a tuple."""
        return (self.on_click,) if callable(self.on_click) else tuple(self.on_click)


# --- apps ---------------------------------------------------------------------------------------


class App(abc.ABC):
    """Base class of fake apps. Subclass it, set `name` and `title`, implement `sample` and `view`.

    Apps hold no state of their own: everything lives in the data dict that `sample` creates, so
    one instance serves every episode, and planners can run the model on copies of the state.
    """

    name: ClassVar[str] = ""
    title: ClassVar[str] = ""
    page_size: ClassVar[int] = 6  # list items shown per scroll page

    @abc.abstractmethod
    def sample(self, rng: np.random.Generator) -> tuple[dict[str, Any], Goal]:
        """Draw the app's initial data (with distractors) and a goal reachable from it, using `rng` only."""

    @abc.abstractmethod
    def view(self, data: Mapping[str, Any], screen: str) -> list[Element]:
        """The elements of `screen` (`"main"` is the app's first screen) for this data."""

    def screen_title(self, data: Mapping[str, Any], screen: str) -> str:
        """The title shown above a screen."""
        if screen == "main":
            return self.title
        return f"{self.title} > {screen.replace('_', ' ').capitalize()}"

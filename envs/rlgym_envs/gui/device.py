"""The device: a launcher with several apps, its canonical state and its transition function.

The state is JSON data: `{"ui": {"nav": [...], "scroll": int}, "<app name>": <app data>, ...}`.
`nav` is the screen stack (`"home"`, then `"<app>:<screen>"` entries); `scroll` is the page of the
current screen's list. Everything the screen shows is derived from the state, and `apply` returns
a new state without touching the old one, so planners can search over copies (see
`rlgym_agents.gui`). Equal states have equal `key`s, whatever actions led to them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlgym_envs.gui.app import BOUND, CLICKABLE, HOME, App, Ctx, Element, Goal, Pred, clone, get_path, set_path

SCROLL_DIRECTIONS = ("up", "down")


class InvalidAction(Exception):
    """The UI rejected an action (unknown id, wrong element type, disabled, unknown option, ...)."""


@dataclass(frozen=True)
class Item:
    """An element as shown on the current screen, with its id and current value."""

    id: int
    element: Element
    value: Any
    app: str


@dataclass(frozen=True)
class Screen:
    """The current screen: title, visible items, and how many list items are hidden above/below."""

    title: str
    items: tuple[Item, ...]
    above: int = 0
    below: int = 0

    def item(self, element_id: Any) -> Item:
        if isinstance(element_id, int) and 1 <= element_id <= len(self.items):
            return self.items[element_id - 1]
        raise InvalidAction(
            f"there is no element [{element_id}] on this screen; ids here go from 1 to {len(self.items)}"
        )

    def text(self) -> str:
        """The accessibility tree as text, one element a line: `[7] switch "Dark mode" off`."""
        lines = [f"Screen: {self.title}"]
        if self.above:
            lines.append(f"({self.above} more above; scroll up)")
        lines += [describe(it) for it in self.items]
        if self.below:
            lines.append(f"({self.below} more below; scroll down)")
        return "\n".join(lines)


def describe(it: Item) -> str:
    """One line of the accessibility tree."""
    el = it.element
    line = f"[{it.id}] {el.role} {json.dumps(el.label, ensure_ascii=False)}"
    if el.role == "switch":
        line += " on" if it.value else " off"
    elif el.role == "checkbox":
        line += " checked" if it.value else " unchecked"
    elif el.role == "textbox":
        line += f" value={json.dumps(str(it.value), ensure_ascii=False)}"
    elif el.role == "combobox":
        opts = ", ".join(json.dumps(o, ensure_ascii=False) for o in el.options)
        line += f" value={json.dumps(str(it.value), ensure_ascii=False)} options=[{opts}]"
    if el.disabled:
        line += " disabled"
    return line


def state_key(state: Mapping[str, Any]) -> str:
    """Canonical key of a state: sha1 of its sorted, compact JSON."""
    blob = json.dumps(state, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha1(blob.encode()).hexdigest()


class Device:
    """A phone-like device: a home screen that opens each app, and the transition function.

    Args:
        apps: the installed apps, shown on the home screen in this order; names must be unique.
    """

    def __init__(self, apps: Sequence[App]):
        if not apps:
            raise ValueError("a Device needs at least one App")
        names = [a.name for a in apps]
        if any(not n or ":" in n or "." in n for n in names) or len(set(names)) != len(names):
            raise ValueError(f"app names must be unique, non-empty and free of ':' and '.', got {names}")
        self.apps = tuple(apps)
        self._by_name = {a.name: a for a in apps}

    key = staticmethod(state_key)

    # --- tasks ----------------------------------------------------------------------------------

    def app(self, name: str) -> App:
        """The installed app called `name`."""
        if name not in self._by_name:
            raise ValueError(f"unknown app {name!r}; installed apps: {', '.join(self._by_name)}")
        return self._by_name[name]

    def sample(self, rng: np.random.Generator, app_name: str) -> tuple[dict[str, Any], Goal]:
        """Initial state of every app (distractors included) and the goal of `app_name`."""
        data, goal = self.app(app_name).sample(rng)
        return self.initial_state(rng, {app_name: data}), goal

    def initial_state(self, rng: np.random.Generator, given: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
        """The home screen over every app's data: `given`'s, and for the other apps a fresh draw.

        The other apps draw in their installed order, so the RNG stream is reproducible; the goal app
        draws first (`sample`), which lets an env redraw its goal alone until the goal fits.
        """
        unknown = set(given) - set(self._by_name)
        if unknown:
            raise ValueError(f"unknown apps {sorted(unknown)}; installed apps: {', '.join(self._by_name)}")
        state: dict[str, Any] = {"ui": {"nav": [HOME], "scroll": 0}}
        for app in self.apps:
            state[app.name] = given[app.name] if app.name in given else app.sample(rng)[0]
        return state

    def subgoals(self, state: Mapping[str, Any], app_name: str, preds: Sequence[Pred]) -> tuple[int, int]:
        """(met, total) sub-goal predicates of `app_name` in `state`."""
        data = state[app_name]
        return sum(p.holds(data) for p in preds), len(preds)

    # --- screens --------------------------------------------------------------------------------

    def screen(self, state: Mapping[str, Any]) -> Screen:
        """The current screen, derived from the state."""
        top = state["ui"]["nav"][-1]
        if top == HOME:
            items = tuple(
                Item(i + 1, Element("button", a.title, on_click=(_opener(a.name),)), None, a.name)
                for i, a in enumerate(self.apps)
            )
            return Screen("Home", items)
        app_name, screen = top.split(":", 1)
        app = self._by_name[app_name]
        data = state[app_name]
        elements = app.view(data, screen)
        n_list = sum(e.scrolls for e in elements)
        page = app.page_size
        start = state["ui"]["scroll"] * page
        shown: list[Item] = []
        list_index = 0
        for el in elements:
            if el.scrolls:
                list_index += 1
                if not start < list_index <= start + page:
                    continue
            value = get_path(data, el.bind) if el.role in BOUND and el.bind else None
            shown.append(Item(len(shown) + 1, el, value, app_name))
        return Screen(
            app.screen_title(data, screen),
            tuple(shown),
            above=min(start, n_list),
            below=max(0, n_list - start - page),
        )

    # --- transitions ----------------------------------------------------------------------------

    def apply(self, state: Mapping[str, Any], tool: str, args: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
        """Run one UI action on a copy of `state`.

        Args:
            state: the current state (left unchanged).
            tool: `click`, `type`, `select`, `scroll` or `back`.
            args: the tool's arguments (`id`, `text`, `option`, `direction`).

        Returns:
            The new state and a one-line description of what happened. The new state shares the
            parts the action left alone with `state`: treat states as immutable values.

        Raises:
            InvalidAction: the UI rejects the action; the message says why and what to do instead.
        """
        return self._apply(state, self.screen(state), tool, args)

    def _apply(
        self, state: Mapping[str, Any], screen: Screen, tool: str, args: Mapping[str, Any]
    ) -> tuple[dict[str, Any], str]:
        # Copy on write: only the UI and the app an element belongs to can change, so the other
        # apps' data is shared with `state` (nothing mutates a state in place).
        new = dict(state)
        new["ui"] = ui = clone(state["ui"])
        if tool == "back":
            if len(ui["nav"]) == 1:
                raise InvalidAction("already on the home screen; there is nothing to go back to")
            ui["nav"].pop()
            ui["scroll"] = 0
            return self._settle(new), "went back"
        if tool == "scroll":
            direction = args.get("direction")
            if direction not in SCROLL_DIRECTIONS:
                raise InvalidAction(f"scroll direction must be 'up' or 'down', got {direction!r}")
            if (screen.below if direction == "down" else screen.above) == 0:
                raise InvalidAction(f"nothing to scroll {direction} on this screen")
            ui["scroll"] += 1 if direction == "down" else -1
            return new, f"scrolled {direction}"
        if tool not in ("click", "type", "select"):
            raise InvalidAction(f"unknown UI action {tool!r}")

        it = screen.item(args.get("id"))
        el = it.element
        if el.disabled:
            raise InvalidAction(f"[{it.id}] {el.role} {el.label!r} is disabled")
        new[it.app] = clone(state[it.app])
        ctx = Ctx(it.app, new[it.app], ui["nav"])
        path = el.bind or ""  # Element checks that every bound role has one
        nav_before = list(ui["nav"])
        if tool == "click":
            if el.role not in CLICKABLE:
                raise InvalidAction(f"[{it.id}] is a {el.role}, which cannot be clicked; {_hint(el.role)}")
            if el.role in ("switch", "checkbox"):
                set_path(ctx.data, path, not bool(it.value))
            for effect in el.effects:
                effect(ctx)
            done = f"clicked [{it.id}] {el.role} {el.label!r}"
        elif tool == "type":
            if el.role != "textbox":
                raise InvalidAction(f"[{it.id}] is a {el.role}, not a textbox; {_hint(el.role)}")
            text = args.get("text")
            if not isinstance(text, str):
                raise InvalidAction("type needs a string `text`")
            set_path(ctx.data, path, text)
            done = f"typed into [{it.id}] {el.label!r}"
        else:
            if el.role != "combobox":
                raise InvalidAction(f"[{it.id}] is a {el.role}, not a combobox; {_hint(el.role)}")
            option = args.get("option")
            if option not in el.options:
                raise InvalidAction(
                    f"{option!r} is not an option of [{it.id}] {el.label!r}; options: {', '.join(el.options)}"
                )
            set_path(ctx.data, path, option)
            done = f"selected {option!r} in [{it.id}] {el.label!r}"
        if ui["nav"] != nav_before:
            ui["scroll"] = 0
        return self._settle(new), done

    def _settle(self, state: dict[str, Any]) -> dict[str, Any]:
        """Clamp the scroll page to the current list, so equal screens have equal states."""
        ui = state["ui"]
        if ui["scroll"]:
            top = ui["nav"][-1]
            if top == HOME:
                ui["scroll"] = 0
            else:
                app_name, screen = top.split(":", 1)
                app = self._by_name[app_name]
                n_list = sum(e.scrolls for e in app.view(state[app_name], screen))
                ui["scroll"] = max(0, min(ui["scroll"], (n_list - 1) // app.page_size))
        return state

    def successors(
        self, state: Mapping[str, Any], texts: Sequence[str] = ()
    ) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
        """`(tool, args, next state)` for every action of `actions`: what a planner expands."""
        screen = self.screen(state)
        return [(t, a, self._apply(state, screen, t, a)[0]) for t, a in self.actions(state, texts, screen)]

    def actions(
        self, state: Mapping[str, Any], texts: Sequence[str] = (), screen: Screen | None = None
    ) -> list[tuple[str, dict[str, Any]]]:
        """Every action the UI accepts in `state` (typing only the given `texts`), for planners."""
        screen = screen or self.screen(state)
        out: list[tuple[str, dict[str, Any]]] = []
        for it in screen.items:
            el = it.element
            if el.disabled:
                continue
            if el.role in CLICKABLE:
                out.append(("click", {"id": it.id}))
            elif el.role == "textbox":
                out += [("type", {"id": it.id, "text": t}) for t in texts if t != it.value]
            elif el.role == "combobox":
                out += [("select", {"id": it.id, "option": o}) for o in el.options if o != it.value]
        out += [("scroll", {"direction": d}) for d, n in (("up", screen.above), ("down", screen.below)) if n]
        if len(state["ui"]["nav"]) > 1:
            out.append(("back", {}))
        return out


def _opener(app_name: str):
    def open_app(ctx: Ctx) -> None:
        ctx.nav[:] = [HOME, f"{app_name}:main"]

    return open_app


def _hint(role: str) -> str:
    if role == "textbox":
        return "use type(id, text)"
    if role == "combobox":
        return "use select(id, option)"
    if role in CLICKABLE:
        return "use click(id)"
    return "it is static text; act on another element"

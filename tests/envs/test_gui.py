"""rlgym/GUI-v0: the contract, the app model, invalid actions, signals, state keys and screenshots."""

import base64
import hashlib
import io
import json
import sys

import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from hypothesis import given, settings
from hypothesis import strategies as st

import rlgym_llm
from rlgym_envs.gui import DEFAULT_APPS, App, Device, Element, Goal, GUIEnv, Pred, goal_key, render
from rlgym_envs.gui.apps import SETTINGS
from rlgym_envs.gui.device import InvalidAction
from rlgym_llm.core.splits import split_of


def call(name, **arguments):
    return {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": name, "arguments": arguments}]}


def click(i):
    return call("click", id=i)


def item_id(env, label):
    """The id of the element labelled `label` on the current screen."""
    screen = env.unwrapped.device.screen(env.unwrapped.state)
    return next(it.id for it in screen.items if it.element.label == label)


def open_app(env, title):
    return env.step(click(item_id(env, title)))


@pytest.fixture
def env():
    return rlgym_llm.make("rlgym/GUI-v0")


# --- contract -----------------------------------------------------------------------------------


def test_registered_with_a_turn_limit():
    assert "rlgym/GUI-v0" in rlgym_llm.list_envs()
    env = rlgym_llm.make("rlgym/GUI-v0")
    assert isinstance(env, rlgym_llm.TurnLimit) and env.max_turns == 30
    assert isinstance(env.unwrapped, GUIEnv)


def test_gymnasium_checker_passes():
    gym_check_env(rlgym_llm.make("rlgym/GUI-v0").unwrapped)


def test_project_checker_passes():
    report = rlgym_llm.check_env("rlgym/GUI-v0", n_fuzz=120)
    assert report.ok, report.format()


def test_checkers_pass_with_screenshots():
    pytest.importorskip("PIL")
    gym_check_env(rlgym_llm.make("rlgym/GUI-v0", render_screenshot=True).unwrapped)
    assert rlgym_llm.check_env(rlgym_llm.make("rlgym/GUI-v0", render_screenshot=True), n_fuzz=20).ok


def test_same_seed_same_task_and_opening_and_every_app_gets_goals():
    a, b = GUIEnv(), GUIEnv()
    apps = set()
    for seed in range(40):
        (oa, ia), (ob, ib) = a.reset(seed=seed), b.reset(seed=seed)
        assert oa == ob and ia == ib and a.task == b.task
        apps.add(a.task.hidden["app"])
    assert apps == {"settings", "mail", "shop", "files"}
    assert len({GUIEnv().reset(seed=s)[1]["task_id"] for s in range(40)}) == 40


def test_opening_shows_goal_and_home_screen_and_hides_ground_truth(env):
    messages, info = env.reset(seed=0, options={"app": "settings"})
    assert [m["role"] for m in messages] == ["system", "user"]
    user = messages[1]["content"]
    assert user.startswith(f"Goal: {env.unwrapped.task.prompt}")
    assert 'Screen: Home\n[1] button "Settings"\n[2] button "Mail"\n[3] button "Shop"\n[4] button "Files"' in user
    assert env.unwrapped.task.secrets() == []
    assert set(env.unwrapped.task.hidden) == {"app", "preds", "relevant", "texts", "initial_state"}
    assert "screenshot" not in info and [t["function"]["name"] for t in info["tools"]] == [
        "click",
        "type",
        "select",
        "scroll",
        "back",
        "done",
    ]


def test_info_is_fresh_json_without_timings(env):
    env.reset(seed=1)
    _, _, _, _, first = env.step(click(1))
    _, _, _, _, second = env.step(call("back"))
    assert first is not second and first["signals"] is not second["signals"]
    assert set(first) == {"turn", "signals"}
    json.dumps(first)


def test_unknown_reset_option_raises(env):
    with pytest.raises(ValueError, match="unknown reset options"):
        env.reset(seed=0, options={"level": 3})
    with pytest.raises(ValueError, match="unknown app"):
        env.reset(seed=0, options={"app": "calendar"})


# --- the accessibility tree and actions ------------------------------------------------------------


def test_settings_goal_is_reachable_by_hand_and_signals_track_subgoals(env):
    for seed in range(100):  # a multi-part goal without network settings (those may need airplane mode off)
        env.reset(seed=seed, options={"app": "settings"})
        preds = env.unwrapped.task.hidden["preds"]
        if len(preds) >= 2 and not any(p["path"].startswith("network.") for p in preds):
            break
    total = len(preds)
    open_app(env, "Settings")
    for met, pred in enumerate(preds, start=1):
        section = pred["path"].split(".")[0]
        env.step(click(item_id(env, SETTINGS[section][0])))  # the section's title
        screen = env.unwrapped.device.screen(env.unwrapped.state)
        it = next(it for it in screen.items if it.element.bind == pred["path"])
        if it.element.role == "switch":
            obs, reward, terminated, _, info = env.step(click(it.id))
        else:
            obs, reward, terminated, _, info = env.step(call("select", id=it.id, option=pred["value"]))
        assert info["signals"]["subgoals"] == [met, total]
        assert info["signals"]["progress"] == pytest.approx(met / total)
        assert info["signals"]["tool_ok"] is True and info["signals"]["invalid_action"] is False
        assert (reward, terminated) == (0.0, False)
        assert obs[0]["role"] == "tool" and "Screen: Settings > " in obs[0]["content"]
        env.step(call("back"))
    obs, reward, terminated, truncated, info = env.step(call("done"))
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert info["outcome"] == {"reward": 1.0, "components": {"goal": 1.0, "subgoals_frac": 1.0, "done_called": 1.0}}
    assert info["signals"]["reward_components"]["goal"] == 1.0


def test_done_before_the_goal_ends_with_zero_reward(env):
    env.reset(seed=4)
    _, reward, terminated, _, info = env.step(call("done"))
    assert (reward, terminated) == (0.0, True)
    assert info["outcome"]["reward"] == 0.0 and info["outcome"]["components"]["done_called"] == 1.0


def test_turn_limit_grades_the_goal_but_requires_done():
    env = rlgym_llm.make("rlgym/GUI-v0", max_turns=2)
    env.reset(seed=0)
    env.step(click(1))
    _, _, terminated, truncated, info = env.step(click(1))
    assert (terminated, truncated) == (False, True)
    assert info["outcome"]["reward"] == 0.0 and info["outcome"]["components"]["done_called"] == 0.0


def _invalid(env, action):
    key = env.unwrapped.device.key(env.unwrapped.state)
    obs, reward, terminated, _, info = env.step(action)
    assert info["signals"]["invalid_action"] is True and info["signals"]["tool_ok"] is False
    assert info["signals"]["state_key"] == key == env.unwrapped.device.key(env.unwrapped.state)
    assert (reward, terminated) == (0.0, False)
    assert "Screen: " in obs[-1]["content"]  # the model sees where it is after a mistake
    return obs[-1]["content"]


def test_invalid_actions_are_error_observations(env):
    env.reset(seed=2, options={"app": "shop"})
    assert "no element [9]" in _invalid(env, click(9))
    assert "already on the home screen" in _invalid(env, call("back"))
    assert "nothing to scroll up" in _invalid(env, call("scroll", direction="up"))
    assert "not a textbox" in _invalid(env, call("type", id=1, text="hi"))
    assert "invalid arguments for click" in _invalid(env, call("click", ident=1))
    assert "unknown tool" in _invalid(env, call("swipe", id=1))
    open_app(env, "Shop")
    product = env.unwrapped.state["shop"]["catalog"][0]["name"]
    env.step(click(next(it.id for it in _items(env) if it.element.label.startswith(product))))
    env.step(click(item_id(env, "Buy now")))
    assert "cannot be clicked" in _invalid(env, click(item_id(env, f"Item: {product}")))
    assert "is disabled" in _invalid(env, click(item_id(env, "Place order")))
    assert "not an option" in _invalid(env, call("select", id=item_id(env, "Shipping"), option="Drone"))
    assert "not a combobox" in _invalid(env, call("select", id=item_id(env, f"Item: {product}"), option="1"))


def _items(env):
    return env.unwrapped.device.screen(env.unwrapped.state).items


def test_disabled_until_airplane_mode_is_off(env):
    for seed in range(50):
        env.reset(seed=seed, options={"app": "settings"})
        if env.unwrapped.state["settings"]["network"]["airplane_mode"]:
            break
    assert env.unwrapped.state["settings"]["network"]["airplane_mode"]
    open_app(env, "Settings")
    env.step(click(item_id(env, "Network")))
    assert "is disabled" in _invalid(env, click(item_id(env, "Wi-Fi")))
    env.step(click(item_id(env, "Airplane mode")))
    before = env.unwrapped.state["settings"]["network"]["wifi"]
    env.step(click(item_id(env, "Wi-Fi")))
    assert env.unwrapped.state["settings"]["network"]["wifi"] is (not before)


def test_plain_text_gets_a_nudge_and_no_tool_signal(env):
    env.reset(seed=0)
    obs, _, terminated, _, info = env.step("I think I should open settings")
    assert obs[0]["role"] == "user" and "call one of the tools" in obs[0]["content"]
    assert info["signals"]["tool_ok"] is None and info["signals"]["invalid_action"] is False
    assert not terminated


def test_several_calls_in_one_turn_run_in_order_and_nothing_runs_after_done(env):
    env.reset(seed=0)
    turn = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "a", "name": "click", "arguments": {"id": 1}},
            {"id": "b", "name": "done", "arguments": {}},
            {"id": "c", "name": "back", "arguments": {}},
        ],
    }
    obs, _, terminated, _, _ = env.step(turn)
    assert [m["tool_call_id"] for m in obs] == ["a", "b", "c"]
    assert terminated and obs[2]["content"].startswith("Ignored")
    assert env.unwrapped.state["ui"]["nav"] == ["home", "settings:main"]


def test_calls_past_the_per_turn_cap_are_not_run_and_one_error_says_so(env):
    env.reset(seed=0)
    calls = [{"id": f"c{i}", "name": "back", "arguments": {}} for i in range(100)]
    obs, _, _, _, info = env.step({"role": "assistant", "content": "", "tool_calls": calls})
    assert [m["role"] for m in obs] == ["tool"] * 16 + ["user"]
    assert "84 more tool call(s) were not run: at most 16" in obs[-1]["content"]
    assert "[" in obs[-1]["content"].split("\n\n", 1)[1], "the screen follows"
    assert info["signals"]["invalid_action"] is True and info["signals"]["tool_ok"] is False


def test_long_lists_scroll_a_page_at_a_time(env):
    for seed in range(100):
        env.reset(seed=seed, options={"app": "shop"})
        if len(env.unwrapped.state["shop"]["catalog"]) > 6:
            break
    n = len(env.unwrapped.state["shop"]["catalog"])
    obs, *_ = open_app(env, "Shop")
    assert f"({n - 6} more below; scroll down)" in obs[0]["content"]
    assert sum(it.element.scrolls for it in _items(env)) == 6
    obs, *_ = env.step(call("scroll", direction="down"))
    assert "(6 more above; scroll up)" in obs[0]["content"]
    assert sum(it.element.scrolls for it in _items(env)) == n - 6
    env.step(call("back"))
    assert env.unwrapped.state["ui"] == {"nav": ["home"], "scroll": 0}


# --- state keys -----------------------------------------------------------------------------------


def test_equal_states_have_equal_keys_across_different_paths(env):
    env.reset(seed=5, options={"app": "settings"})
    start = env.unwrapped.device.key(env.unwrapped.state)
    open_app(env, "Settings")
    env.step(click(item_id(env, "Display")))
    _, _, _, _, toggled = env.step(click(item_id(env, "Dark mode")))
    _, _, _, _, twice = env.step(click(item_id(env, "Dark mode")))
    env.step(call("back"))
    env.step(click(item_id(env, "General")))
    _, _, _, _, via_display = env.step(call("back"))

    env.reset(seed=5, options={"app": "settings"})
    _, _, _, _, direct = open_app(env, "Settings")
    assert via_display["signals"]["state_key"] == direct["signals"]["state_key"]
    assert toggled["signals"]["state_key"] != twice["signals"]["state_key"]
    env.step(call("back"))
    assert env.unwrapped.device.key(env.unwrapped.state) == start


def test_state_key_is_sha1_of_sorted_json(env):
    env.reset(seed=3)
    _, _, _, _, info = env.step(click(2))
    blob = json.dumps(env.unwrapped.state, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert info["signals"]["state_key"] == hashlib.sha1(blob.encode()).hexdigest()


ACTIONS = st.one_of(
    st.builds(lambda i: ("click", {"id": i}), st.integers(1, 8)),
    st.builds(lambda i, o: ("select", {"id": i, "option": o}), st.integers(1, 6), st.sampled_from(["14", "Express"])),
    st.builds(lambda d: ("scroll", {"direction": d}), st.sampled_from(["up", "down"])),
    st.just(("back", {})),
)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 50), paths=st.lists(st.lists(ACTIONS, max_size=12), min_size=2, max_size=4))
def test_keys_match_states_one_to_one(seed, paths):
    """Across random trajectories of one task: equal keys <=> equal canonical states."""
    env = GUIEnv()
    by_key = {}
    for path in paths:
        env.reset(seed=seed)
        for tool, args in path:
            _, _, _, _, info = env.step(call(tool, **args))
            state = json.dumps(env.unwrapped.state, sort_keys=True)
            assert by_key.setdefault(info["signals"]["state_key"], state) == state
    assert len(set(by_key.values())) == len(by_key)


# --- the app model ------------------------------------------------------------------------------


def test_apply_never_mutates_its_input():
    device = Device(DEFAULT_APPS)
    env = GUIEnv()
    env.reset(seed=7)
    state = env.state
    frozen = json.dumps(state, sort_keys=True)
    nxt = state
    for tool, args in [("click", {"id": 2}), ("click", {"id": 1}), ("type", {"id": 1, "text": "x@y.z"})]:
        nxt, _ = device.apply(nxt, tool, args)
    assert json.dumps(state, sort_keys=True) == frozen
    assert nxt["mail"]["draft"]["to"] == "x@y.z"
    with pytest.raises(InvalidAction):
        device.apply(state, "type", {"id": 1, "text": "x"})


def test_element_and_device_validation():
    with pytest.raises(ValueError, match="needs `bind`"):
        Element("switch", "Dark mode")
    with pytest.raises(ValueError, match="needs `options`"):
        Element("combobox", "Size", bind="size")
    with pytest.raises(ValueError, match="unknown role"):
        Element("slider", "Volume")
    with pytest.raises(ValueError, match="unique"):
        Device([DEFAULT_APPS[0], DEFAULT_APPS[0]])
    with pytest.raises(ValueError, match="at least one Pred"):
        Goal("nothing", ())
    with pytest.raises(ValueError, match="task_apps"):
        GUIEnv(task_apps=["calendar"])


def test_predicates():
    data = {"a": {"b": 1}, "items": [{"x": 1, "y": 2}, "s"]}
    assert Pred("a.b", "eq", 1).holds(data) and not Pred("a.c", "eq", 1).holds(data)
    assert Pred("items", "contains", {"x": 1}).holds(data) and Pred("items", "contains", "s").holds(data)
    assert not Pred("items", "contains", {"x": 1, "y": 3}).holds(data)
    assert Pred("items", "excludes", {"z": 0}).holds(data) and Pred("items", "len", 2).holds(data)


class Counter(App):
    name = "counter"
    title = "Counter"

    def sample(self, rng):
        return {"n": "0", "sure": False}, Goal("In Counter, set it to 2.", (Pred("n", "eq", "2"),))

    def view(self, data, screen):
        return [
            Element("combobox", "Count", bind="n", options=("0", "1", "2")),
            Element("checkbox", "Sure", bind="sure"),
        ]


def test_a_user_app_runs_beside_the_built_ins():
    split = split_of(goal_key("counter", [Pred("n", "eq", "2")]))  # its one goal belongs to one split
    env = GUIEnv(apps=(*DEFAULT_APPS, Counter()), task_apps=["counter"], split=split)
    messages, _ = env.reset(seed=0)
    assert '[5] button "Counter"' in messages[1]["content"]
    obs, *_ = env.step(click(5))
    assert '[1] combobox "Count" value="0" options=["0", "1", "2"]\n[2] checkbox "Sure" unchecked' in obs[0]["content"]
    env.step(call("select", id=1, option="2"))
    _, reward, terminated, _, _ = env.step(call("done"))
    assert (reward, terminated) == (1.0, True)


# --- screenshots ----------------------------------------------------------------------------------


def test_screenshot_is_a_valid_png_of_plausible_size():
    pil = pytest.importorskip("PIL.Image")
    env = rlgym_llm.make("rlgym/GUI-v0")
    _, info = env.reset(seed=0, options={"render_screenshot": True})
    _, _, _, _, info = env.step(click(3))
    png = base64.b64decode(info["screenshot"], validate=True)
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and 2_000 < len(png) < 200_000
    img = pil.open(io.BytesIO(png))
    img.verify()
    rows = len(_items(env)) + 1  # items + the "more below" line of the shop's long catalog
    assert img.format == "PNG" and img.size == (render.WIDTH, render.HEADER + 2 * render.PAD + rows * render.ROW)
    again = GUIEnv(render_screenshot=True)
    again.reset(seed=0)
    assert again.step(click(3))[4]["screenshot"] == info["screenshot"]  # deterministic pixels
    env.reset(seed=0)
    assert "screenshot" not in env.step(click(3))[4]  # the option lasts one episode


def test_screenshot_without_pillow_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "PIL", None)
    render._font.cache_clear()
    env = GUIEnv(render_screenshot=True)
    with pytest.raises(rlgym_llm.MissingDependencyError, match=r"rlgym-llm\[gui\]"):
        env.reset(seed=0)
    render._font.cache_clear()
    GUIEnv().reset(seed=0)  # text-only episodes never import Pillow


def test_max_subgoals_draws_only_goals_that_small_and_stays_seeded():
    counts = set()
    for seed in range(40):
        env = rlgym_llm.make("rlgym/GUI-v0", task_apps=["settings"], max_subgoals=1)
        first, _ = env.reset(seed=seed)
        counts.add(len(env.unwrapped.task.hidden["preds"]))
        assert env.reset(seed=seed)[0] == first  # same seed, same task
    assert counts == {1}
    # without the setting, settings goals have 1 to 3 subgoals
    env = rlgym_llm.make("rlgym/GUI-v0", task_apps=["settings"])
    sizes = set()
    for seed in range(40):
        env.reset(seed=seed)
        sizes.add(len(env.unwrapped.task.hidden["preds"]))
    assert sizes == {1, 2, 3}
    with pytest.raises(ValueError, match="max_subgoals"):
        GUIEnv(max_subgoals=0)
    with pytest.raises(ValueError, match="at most 1 subgoals"):  # shop goals always have 4
        rlgym_llm.make("rlgym/GUI-v0", task_apps=["shop"], max_subgoals=1).reset(seed=0)

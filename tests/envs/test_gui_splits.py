"""`rlgym/GUI-v0`'s content splits: a task is its goal (app and predicates, `goal_key`), each goal
belongs to one split, so no split draws another's prompt or goal; the learnable tier (one-subgoal
Settings goals, configs/env/gui.yaml) holds 200+ goals per split; a seed fixes the task; a task named
in `reset(options=...)` must belong to the env's split; the oracle solves every split."""

import dataclasses

import pytest

import rlgym_llm
from rlgym_agents.gui import GUIPlannerAgent, play
from rlgym_envs.gui import App, Element, Goal, Pred, goal_key
from rlgym_envs.gui.apps import SETTINGS
from rlgym_llm.core.errors import ConfigError
from rlgym_llm.core.splits import SPLITS, split_of
from rlgym_llm.testing.splits import assert_disjoint, split_pools

LEARNABLE = {"task_apps": ["settings"], "max_subgoals": 1}  # configs/env/gui.yaml
DEFAULT: dict = {}
# A reset is ~1 ms (a held-out split redraws its goal ~17 times): 1,500 draws per split see ~250 of
# the ~300 goals of a held-out split of the learnable tier; the default tier's goals rarely repeat.
DRAWS = {"learnable": 1500, "default": 600}


def one_subgoal_goals() -> dict[str, set[str]]:
    """Every one-subgoal Settings goal's key, by split: each switch on and off, each combobox value."""
    keys: dict[str, set[str]] = {s: set() for s in SPLITS}
    for section, (_, settings) in SETTINGS.items():
        for setting in settings:
            for value in (True, False) if setting.values is None else setting.values:
                key = goal_key("settings", [Pred(f"{section}.{setting.key}", "eq", value)])
                keys[split_of(key)].add(key)
    return keys


@pytest.fixture(scope="module")
def pools():
    tiers = {"learnable": LEARNABLE, "default": DEFAULT}
    return {name: split_pools("rlgym/GUI-v0", seeds=range(DRAWS[name]), **kw) for name, kw in tiers.items()}


@pytest.mark.parametrize("tier", ["learnable", "default"])
def test_splits_share_no_prompt_or_goal_and_each_holds_200_goals(pools, tier):
    assert_disjoint(pools[tier])
    for split, pool in pools[tier].items():
        assert pool.episodes == DRAWS[tier] and len(pool.keys) >= 200, (split, len(pool.keys))
        assert all(split_of(key) == split for key in pool.keys)
        if tier == "learnable":  # one goal, one text: as many prompts as goals
            assert len(pool.prompts) == len(pool.keys)


def test_the_learnable_tier_draws_only_its_splits_one_subgoal_goals_and_each_split_has_200_or_more():
    space = one_subgoal_goals()
    sizes = {s: len(keys) for s, keys in space.items()}
    assert sizes == {"train": 816, "val": 291, "test": 303}, sizes  # docs/gui_env.md, SettingsApp
    env = rlgym_llm.make("rlgym/GUI-v0", split="test", **LEARNABLE)
    for seed in range(300):
        env.reset(seed=seed)
        task = env.unwrapped.task
        assert task.key in space["test"] and task.meta["subgoals"] == 1
        assert task.key == goal_key("settings", [Pred.from_dict(p) for p in task.hidden["preds"]])


def test_the_key_is_the_goal_whatever_the_initial_state_or_the_texts_order():
    a = goal_key("settings", [Pred("display.dark_mode", "eq", True), Pred("sound.ringtone", "eq", "Harp")])
    b = goal_key("settings", [Pred("sound.ringtone", "eq", "Harp"), Pred("display.dark_mode", "eq", True)])
    assert a == b == 'settings: display.dark_mode eq true; sound.ringtone eq "Harp"'
    assert goal_key("mail", [Pred("sent", "contains", {"to": "x", "body": "y"})]) == (
        'mail: sent contains {"body": "y", "to": "x"}'
    )
    env = rlgym_llm.make("rlgym/GUI-v0", split="val")
    seen: dict[str, set[str]] = {}  # the same goal from different seeds: one key, different initial states
    for seed in range(400):
        env.reset(seed=seed, options={"app": "shop"})
        task = env.unwrapped.task
        seen.setdefault(task.key, set()).add(task.id)
    assert any(len(ids) > 1 for ids in seen.values())


@pytest.mark.parametrize("split", SPLITS)
def test_same_seed_same_task_and_every_app_has_goals_in_every_split(split):
    a, b = rlgym_llm.make("rlgym/GUI-v0", split=split), rlgym_llm.make("rlgym/GUI-v0", split=split)
    apps = set()
    for seed in range(40):
        (opening_a, info_a), (opening_b, info_b) = a.reset(seed=seed), b.reset(seed=seed)
        assert opening_a == opening_b and info_a == info_b and a.unwrapped.task == b.unwrapped.task
        assert info_a["split"] == split
        apps.add(a.unwrapped.task.hidden["app"])
        assert a.reset(seed=seed)[0] == opening_a
    assert apps == {"settings", "mail", "shop", "files"}


def test_an_invalid_split_is_a_config_error_at_make():
    for bad in ("dev", "Train", None, 1):
        with pytest.raises(ConfigError, match="split must be one of"):
            rlgym_llm.make("rlgym/GUI-v0", split=bad)


def test_a_task_named_in_the_options_must_belong_to_the_envs_split():
    test_env = rlgym_llm.make("rlgym/GUI-v0", split="test", **LEARNABLE)
    opening, _ = test_env.reset(seed=3)
    task = test_env.unwrapped.task
    for split in ("train", "val"):
        env = rlgym_llm.make("rlgym/GUI-v0", split=split)
        with pytest.raises(ValueError, match="belongs to the 'test' split, not to this env's"):
            env.reset(seed=0, options={"task": task})
        with pytest.raises(ValueError, match="'test' split"):  # the split is the goal's, not the stored key's
            env.reset(seed=0, options={"task": dataclasses.replace(task, key="anything")})
    # in its own split it plays as drawn (any seed), and the oracle solves it
    same = rlgym_llm.make("rlgym/GUI-v0", split="test")
    assert same.reset(seed=99, options={"task": task})[0] == opening and same.unwrapped.task == task
    assert play(same, GUIPlannerAgent(same), options={"task": task})["reward"] == 1.0
    with pytest.raises(ValueError, match="exclude each other"):
        same.reset(seed=0, options={"task": task, "app": "settings"})
    with pytest.raises(ValueError, match="must be a Task of a GUI env"):
        same.reset(seed=0, options={"task": "In Settings, turn on dark mode."})


class Lamp(App):
    """One goal only: it belongs to one split, and an env of another split cannot draw it."""

    name, title = "lamp", "Lamp"

    def sample(self, rng):
        return {"on": False}, Goal("In Lamp, turn the light on.", (Pred("on", "eq", True),))

    def view(self, data, screen):
        return [Element("switch", "Light", bind="on")]


def test_an_app_whose_goals_all_fall_in_other_splits_says_so():
    home = split_of(goal_key("lamp", [Pred("on", "eq", True)]))
    env = rlgym_llm.make("rlgym/GUI-v0", apps=[Lamp()], split=home)
    env.reset(seed=0)
    assert env.unwrapped.task.key == "lamp: on eq true"
    for other in set(SPLITS) - {home}:
        with pytest.raises(ConfigError, match=f"app 'lamp' drew no goal of split '{other}'"):
            rlgym_llm.make("rlgym/GUI-v0", apps=[Lamp()], split=other).reset(seed=0)


@pytest.mark.parametrize("split", SPLITS)
@pytest.mark.parametrize("tier", ["learnable", "default"])
def test_the_oracle_solves_every_split(tier, split):
    env = rlgym_llm.make("rlgym/GUI-v0", split=split, **(LEARNABLE if tier == "learnable" else DEFAULT))
    results = [play(env, GUIPlannerAgent(env), seed=seed) for seed in range(16)]
    assert all(r["reward"] == 1.0 for r in results)
    if tier == "learnable":  # home -> Settings -> section -> control -> done, one more for airplane mode
        assert max(r["turns"] for r in results) <= 5

"""`rlgym/GUI-v0`: deterministic fake phone apps driven through an accessibility tree.

Extend it with your own app: subclass `App`, then build `GUIEnv(apps=[*DEFAULT_APPS, MyApp()])`
or register a variant (see `examples/custom_gui_app.py`).
"""

from rlgym_envs.gui.app import HOME, App, Ctx, Element, Goal, Pred, back, go, put, root
from rlgym_envs.gui.apps import DEFAULT_APPS, FilesApp, MailApp, SettingsApp, ShopApp
from rlgym_envs.gui.device import Device, InvalidAction, Screen, state_key
from rlgym_envs.gui.env import GUIEnv, goal_key

__all__ = [
    "DEFAULT_APPS",
    "HOME",
    "App",
    "Ctx",
    "Device",
    "Element",
    "FilesApp",
    "GUIEnv",
    "Goal",
    "InvalidAction",
    "MailApp",
    "Pred",
    "Screen",
    "SettingsApp",
    "ShopApp",
    "back",
    "go",
    "goal_key",
    "put",
    "root",
    "state_key",
]

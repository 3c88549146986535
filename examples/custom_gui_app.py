"""Add your own app to the GUI env, register the variant, and solve one episode with the planner oracle.

Run `python examples/custom_gui_app.py`."""

from typing import ClassVar

import rlgym_llm
from rlgym_agents.gui import GUIPlannerAgent, play
from rlgym_envs.gui import DEFAULT_APPS, App, Element, Goal, Pred, go

MODES = ("Off", "Heat", "Cool", "Auto")
TEMPS = tuple(str(t) for t in range(16, 27))


class ThermostatApp(App):
    """Two screens; the target temperature is disabled while the mode is Off."""

    name: ClassVar[str] = "thermostat"
    title: ClassVar[str] = "Thermostat"

    def sample(self, rng):  # all state lives in this dict; draw from `rng` only
        data = {"mode": "Off", "target": "20", "eco": False}
        mode, temp = MODES[int(rng.integers(1, 4))], TEMPS[int(rng.integers(len(TEMPS)))]
        text = f"In Thermostat, set the mode to {mode} and the target to {temp} degrees, with eco mode on."
        preds = (Pred("mode", "eq", mode), Pred("target", "eq", temp), Pred("eco", "eq", True))
        return data, Goal(text, preds)

    def view(self, data, screen):  # screens are derived from the data
        if screen == "main":
            return [
                Element("text", f"Now: {data['mode']}, {data['target']} C"),
                Element("combobox", "Mode", bind="mode", options=MODES),
                Element("link", "Advanced", on_click=go("advanced")),
            ]
        off = data["mode"] == "Off"
        return [
            Element("combobox", "Target temperature", bind="target", options=TEMPS, disabled=off),
            Element("switch", "Eco mode", bind="eco"),
        ]


# Installed beside the built-in apps (distractors on the home screen); goals come from the new app only.
rlgym_llm.register(
    "demo/Thermostat-v0",
    "rlgym_envs.gui.env:GUIEnv",
    max_turns=20,
    apps=(*DEFAULT_APPS, ThermostatApp()),
    task_apps=("thermostat",),
)

if __name__ == "__main__":
    env = rlgym_llm.make("demo/Thermostat-v0")
    result = play(env, GUIPlannerAgent(env), seed=0)
    print(env.unwrapped.task.prompt)
    print(f"solved in {result['turns']} turns: reward={result['reward']} outcome={result['outcome']}")

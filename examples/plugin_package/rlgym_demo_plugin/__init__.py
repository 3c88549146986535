"""An example env package for rlgym-llm. Registering imports no env code: the entry point is a string."""

from rlgym_llm import register


def register_envs() -> None:
    """Called by rlgym-llm through the `rlgym_llm.envs` entry point declared in pyproject.toml."""
    register("demo/Reverse-v0", "rlgym_demo_plugin.env:ReverseEnv", max_turns=3)

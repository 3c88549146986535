"""Registers the built-in envs; run through the `rlgym_llm.envs` entry point. Imports no env module."""

from rlgym_llm import register


def register_envs() -> None:
    register("rlgym/Math-v0", "rlgym_envs.math.env:MathEnv", max_turns=6)
    register("rlgym/Search-v0", "rlgym_envs.search.env:SearchEnv", max_turns=10)
    register("rlgym/Code-v0", "rlgym_envs.code.env:CodeEnv", max_turns=8)
    register("rlgym/GUI-v0", "rlgym_envs.gui.env:GUIEnv", max_turns=30)
    register("rlgym/SWE-v0", "rlgym_envs.swe.env:SWEEnv", max_turns=30)
    # testbeds for the credit-assignment claims (docs/testbeds.md)
    register("rlgym/Ladder-v0", "rlgym_envs.testbeds.ladder:LadderEnv", max_turns=12)
    register("rlgym/TwentyQ-v0", "rlgym_envs.testbeds.twenty_questions:TwentyQuestionsEnv", max_turns=6)
    register("rlgym/BugFix-v0", "rlgym_envs.testbeds.bugfix:BugFixEnv", max_turns=8)

"""Fakes that ship with the library, for tests and examples: toy envs with known optimal returns.

import rlgym_llm
from rlgym_llm.testing import Bisector

rlgym_llm.register("test/Guess-v0", "rlgym_llm.testing.toy:GuessNumberEnv", max_turns=10)
"""

from rlgym_llm.testing.toy import Bisector, CounterEnv, CounterPlayer, GuessNumberEnv

__all__ = ["Bisector", "CounterEnv", "CounterPlayer", "GuessNumberEnv"]

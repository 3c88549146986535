"""An env whose steps take 3 s, for the remote env's step timeout (served as `tests.serve.slow_env:SlowCounterEnv`,
or by id with `--module tests.serve.slow_env`)."""

import time

import rlgym_llm
from rlgym_llm.testing.toy import CounterEnv


class SlowCounterEnv(CounterEnv):
    def step(self, action):
        time.sleep(3.0)
        return super().step(action)


# Registered on import: `rlgym serve --module tests.serve.slow_env slowtest/SlowCounter-v0` serves it by id,
# as a plugin's or a user's module would be.
rlgym_llm.register("slowtest/SlowCounter-v0", "tests.serve.slow_env:SlowCounterEnv", max_turns=4)

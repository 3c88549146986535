"""An env whose steps take 3 s, for the remote env's step timeout (served as `tests.serve.slow_env:SlowCounterEnv`)."""

import time

from rlgym_llm.testing.toy import CounterEnv


class SlowCounterEnv(CounterEnv):
    def step(self, action):
        time.sleep(3.0)
        return super().step(action)

"""Testbeds built for one credit-assignment claim each (docs/testbeds.md):

- `rlgym/Ladder-v0` (`ladder.py`): a long counter (8-11 turns) where one overshoot among many right
  moves fails the episode; the same states recur across a group (GiGPO's step groups, SPA-RL).
- `rlgym/TwentyQ-v0` (`twenty_questions.py`): find a hidden number with yes/no range questions;
  each informative question raises the probability of the answer (IGPO).
- `rlgym/BugFix-v0` (`bugfix.py`): run the tests, set the failing lines to the digits they expect,
  submit; running the tests is a valid call that can be repeated forever without submitting (G-RA's
  gate vs D-RA).

Each takes `split` (`train`, `val`, `test`): the pools share no task (the (start, target) pair, the
hidden number, the bug set), each holding 200+ tasks as shipped (docs/testbeds.md, Splits).
"""

"""`rlgym/Code-v0`: Python programming tasks with visible examples and hidden tests, graded in a sandbox.

Modules: `env` (the env and its tools), `tasks` (task format, JSONL loader, prompts), `grading`
(running cases in a sandbox and judging them on the host), `_harness` (the in-box harness, stdlib
only, never imported). The shipped task set is `data/tasks.jsonl`, written by `data/build_tasks.py`.
"""

"""`ast.parse` under one process-wide lock.

CPython 3.11 keeps the recursion-depth counter of its AST-to-Python conversion per interpreter, not
per thread: two threads parsing at once can fail with `SystemError: AST constructor recursion depth
mismatch` (seen with SWE envs stepping in the rollout manager's threads). The envs parse through
this function so that their parses never overlap.
"""

from __future__ import annotations

import ast
import threading
from typing import Any

_LOCK = threading.Lock()


def parse(source: str, *args: Any, **kwargs: Any) -> Any:
    """`ast.parse(source, ...)`, one at a time in this process."""
    with _LOCK:
        return ast.parse(source, *args, **kwargs)

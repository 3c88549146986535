"""Run sandbox coroutines from synchronous code (Gymnasium's `reset`/`step` are synchronous).

Sandboxes are asyncio objects bound to the loop that started them. Envs use one process-wide
background loop, in its own daemon thread, so `step` works the same whether it is called from plain
code, from a worker thread of the rollout manager, or from inside a running event loop.

    box = run_sync(make_sandbox("local").__aenter__())
    result = run_sync(box.exec(["python", "-c", "print(1)"]))
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_loop: asyncio.AbstractEventLoop | None = None
_lock = threading.Lock()


def background_loop() -> asyncio.AbstractEventLoop:
    """The process-wide loop that sandboxes used by synchronous code live on (started on first use)."""
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="rlgym-sandbox-loop", daemon=True).start()
            _loop = loop
        return _loop


def run_sync(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run `coro` on the background loop and wait for its result (exceptions propagate).

    Past `timeout` seconds the coroutine is cancelled and `TimeoutError` raised. A backend thread it
    started (a blocking Docker call) is not interrupted by that: close the box to end it.
    """
    loop = background_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        coro.close()
        raise RuntimeError("run_sync called from the sandbox loop itself; await the coroutine instead")
    future = asyncio.run_coroutine_threadsafe(coro, loop)
    try:
        return future.result(timeout)
    except TimeoutError:
        future.cancel()  # a no-op when the coroutine itself raised the TimeoutError
        raise

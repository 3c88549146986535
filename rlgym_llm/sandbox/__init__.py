"""Sandboxes: run untrusted commands under limits. See `rlgym_llm.sandbox.base` for the protocol.

from rlgym_llm.sandbox import make_sandbox
async with make_sandbox("local") as box:
    result = await box.exec(["python", "-c", "print(1)"])
"""

from rlgym_llm.sandbox.base import (
    BACKENDS,
    ExecResult,
    Limits,
    Sandbox,
    SandboxArgumentError,
    SandboxError,
    SandboxPathError,
    SandboxPool,
    check_box_path,
    check_exec_args,
    file_error,
    make_sandbox,
)

__all__ = [
    "BACKENDS",
    "ExecResult",
    "Limits",
    "Sandbox",
    "SandboxArgumentError",
    "SandboxError",
    "SandboxPathError",
    "SandboxPool",
    "check_box_path",
    "check_exec_args",
    "file_error",
    "make_sandbox",
]

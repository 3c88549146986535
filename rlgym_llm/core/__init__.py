"""The vocabulary every room shares: types, the Env base, spaces, tools, registry, checker, errors."""

from rlgym_llm.core.checker import check_env
from rlgym_llm.core.dispatch import ToolResult, ToolRun, function_tool, tool_message
from rlgym_llm.core.env import Env, Step, Task
from rlgym_llm.core.errors import (
    ConfigError,
    DataFileError,
    EnvCheckError,
    MalformedActionError,
    MissingDependencyError,
    RegistrationError,
    RlgymError,
    UnknownEnvError,
)
from rlgym_llm.core.registry import ENTRY_POINT_GROUP, list_envs, load_plugins, make, register, spec
from rlgym_llm.core.spaces import ActionSpace, ChatSpace
from rlgym_llm.core.tools import Tool, ToolError, parse_call
from rlgym_llm.core.types import (
    AssistantTurn,
    Failure,
    FailureKind,
    Message,
    Messages,
    StepSignals,
    ToolCall,
    ToolSpec,
    Trajectory,
    Turn,
)
from rlgym_llm.core.wrappers import TurnLimit

__all__ = [
    "ENTRY_POINT_GROUP",
    "ActionSpace",
    "AssistantTurn",
    "ChatSpace",
    "ConfigError",
    "DataFileError",
    "Env",
    "EnvCheckError",
    "Failure",
    "FailureKind",
    "MalformedActionError",
    "Message",
    "Messages",
    "MissingDependencyError",
    "RegistrationError",
    "RlgymError",
    "Step",
    "StepSignals",
    "Task",
    "Tool",
    "ToolCall",
    "ToolError",
    "ToolResult",
    "ToolRun",
    "ToolSpec",
    "Trajectory",
    "Turn",
    "TurnLimit",
    "UnknownEnvError",
    "check_env",
    "function_tool",
    "list_envs",
    "load_plugins",
    "make",
    "parse_call",
    "register",
    "spec",
    "tool_message",
]

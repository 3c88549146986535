"""Any rlgym env (in process, or served: rlgym/Remote-v0) as an `environment_factory` of TRL's GRPOTrainer.

    from trl import GRPOTrainer
    from rlgym_llm.serve.trl import seed_dataset, trl_environment

    Env = trl_environment("rlgym/Search-v0")                       # or ("rlgym/Remote-v0", url=...)
    trainer = GRPOTrainer(model=..., environment_factory=Env, train_dataset=seed_dataset(64), ...)

TRL's contract (trl 1.16, `GRPOTrainer(environment_factory=...)`): an instance per rollout, its public
methods are the tools (schemas from their signatures and docstrings), `reset(**example)` returns text
that TRL appends to the example's last user message, and `get_reward()` scores the finished rollout.
The class built here maps that onto the env: `reset` resets it (with the example's `seed`, or the next
seed of the instance) and returns its opening; each tool method sends one tool call as one env step and
returns what the env answered; `get_reward` is the env's outcome reward (for an episode the policy left
unfinished: what the outcome says as things stand, e.g. 0 for an unsubmitted answer).

What differs from this project's trainer is in docs/interop.md ("Training from TRL").
"""

from __future__ import annotations

import inspect
import itertools
import json
from typing import Any

from rlgym_llm.core import registry

JSON_TYPES = {"string": str, "integer": int, "number": float, "boolean": bool, "array": list, "object": dict}


def trl_environment(env_id: str, *, first_seed: int = 0, **env_kwargs: Any) -> type:
    """A class for `GRPOTrainer(environment_factory=...)` that plays `env_id` (see the module docstring).

    Args:
        env_id: a registered id; `rlgym/Remote-v0` with `url=` trains on a served env.
        first_seed: the first task seed an instance uses when the example gives none; each instance
            counts on from its own start (`first_seed + 100_000 * k` for the k-th instance) so that
            concurrent rollouts play different tasks.
        env_kwargs: as for `rlgym_llm.make` (`max_turns`, `split`, `url`, ...).
    """
    probe = registry.make(env_id, **env_kwargs)
    try:
        _, info = probe.reset(seed=first_seed)
    finally:
        probe.close()
    tools = [t["function"] for t in info.get("tools", []) if isinstance(t, dict) and "function" in t]
    instances = itertools.count()

    def __init__(self: Any) -> None:
        self.env = registry.make(env_id, **env_kwargs)
        self.seeds = itertools.count(first_seed + 100_000 * next(instances))
        self.done, self.total, self.calls, self.seed = True, 0.0, 0, None

    def reset(self: Any, **example: Any) -> str:
        seed = example.get("seed")
        self.seed = int(seed) if seed is not None else next(self.seeds)
        messages, _ = self.env.reset(seed=self.seed)
        self.done, self.total, self.calls = False, 0.0, 0
        return "\n\n".join(str(m.get("content") or "") for m in messages)

    def get_reward(self: Any) -> float:
        outcome = getattr(self.env.unwrapped, "outcome", None)
        if callable(outcome):
            return float(outcome()["reward"])
        return self.total

    def _step(self: Any, name: str, arguments: dict[str, Any]) -> str:
        if self.done:
            return "Error: the episode has ended; no more tool calls are taken."
        self.calls += 1
        call = {"id": f"call_{self.calls}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}  # fmt: skip
        messages, reward, terminated, truncated, _ = self.env.step({"role": "assistant", "content": "", "tool_calls": [call]})  # fmt: skip
        self.total += float(reward)
        self.done = bool(terminated or truncated)
        return "\n".join(str(m.get("content") or "") for m in messages)

    namespace: dict[str, Any] = {
        "__init__": __init__,
        "reset": reset,
        "get_reward": get_reward,
        "_step": _step,
        # Not public: TRL takes every public function of the class for a tool.
        "_close": lambda self: self.env.close(),
        "__del__": lambda self: self.env.close(),
        "__doc__": f"{env_id} for TRL's GRPOTrainer (rlgym_llm.serve.trl.trl_environment).",
    }
    for spec in tools:
        namespace[spec["name"]] = _tool_method(spec)
    name = "".join(ch for ch in env_id.split("/")[-1].split("-")[0] if ch.isalnum()) + "Env"
    return type(name, (), namespace)


def seed_dataset(n_tasks: int, first_seed: int = 0) -> Any:
    """A `datasets.Dataset` of `n_tasks` rows, each an empty prompt and a task `seed`, for
    `GRPOTrainer(train_dataset=...)`: TRL repeats a row `num_generations` times and hands it to
    `reset`, so a group's rollouts play one task (without a dataset each rollout plays its own, and
    GRPO would compare samples of different tasks)."""
    from datasets import Dataset

    if n_tasks < 1:
        raise ValueError(f"n_tasks must be >= 1, got {n_tasks}")
    seeds = list(range(first_seed, first_seed + n_tasks))
    return Dataset.from_dict({"prompt": [[{"role": "user", "content": ""}]] * n_tasks, "seed": seeds})


def _tool_method(spec: dict[str, Any]) -> Any:
    """A method with the tool's name, signature and Google-style docstring (what TRL and transformers'
    `get_json_schema` read), which sends the call to the env."""
    name = spec["name"]
    params = spec.get("parameters") or {}
    props: dict[str, Any] = params.get("properties") or {}
    required = set(params.get("required") or [])

    def method(self: Any, **arguments: Any) -> str:
        return self._step(name, arguments)

    signature = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    arg_docs = []
    for arg, schema in sorted(props.items(), key=lambda kv: kv[0] not in required):  # required ones first
        kinds = [schema, *schema.get("anyOf", [])]
        kind = next((JSON_TYPES[k["type"]] for k in kinds if k.get("type") in JSON_TYPES), str)
        default = inspect.Parameter.empty if arg in required else None
        annotations[arg] = kind if arg in required else kind | None
        signature.append(inspect.Parameter(arg, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotations[arg]))  # fmt: skip
        arg_docs.append(f"    {arg}: {str(schema.get('description') or arg).strip()}")
    annotations["return"] = str
    method.__name__ = method.__qualname__ = name
    method.__signature__ = inspect.Signature(signature, return_annotation=str)  # type: ignore[attr-defined]
    method.__annotations__ = annotations
    description = str(spec.get("description") or name).strip()
    args_block = "\n\nArgs:\n" + "\n".join(arg_docs) if arg_docs else ""
    method.__doc__ = f"{description}{args_block}\n\nReturns:\n    What the env answered."
    return method

"""`check_env`: does an env keep the rlgym-llm contract? Every shipped env passes it in CI.

    report = rlgym_llm.check_env("rlgym/Math-v0")      # raises EnvCheckError listing every failure
    print(report.format())

The checks, each a small named function (failures read `"<check>: <what went wrong>"`):

- `gymnasium`: Gymnasium's own `env_checker.check_env` on `env.unwrapped`.
- `api`: an `rlgym_llm.Env` (or chat spaces); `reset` returns messages inside the observation space
  and an `info` with `task_id` and `tools`; `reward_range` is sane.
- `determinism`: the same seed gives the same task and opening, twice on one env and (given an id)
  across two envs; different seeds give different tasks (a warning if ten seeds give one task).
- `secrets`: no opening contains the task's ground truth (`Task.opening_secrets()`).
- `fuzz`: hundreds of hostile actions (garbage text, wrong types, bad tool calls, huge inputs) and
  `action_space.sample()`. `step` never raises; observations stay in the space and leak no secret;
  rewards are finite and inside `reward_range`; `terminated`/`truncated` are bools; `info` streams to
  JSON; `info["signals"]` has the standard layout; an episode that ends carries `info["outcome"]`.

Decisions the checks encode:
- `terminated` and `truncated` may both be True (Gymnasium allows it: a task can end on the turn a
  limit hits). Either one requires `info["outcome"]` with a finite reward inside `reward_range`.
- Stepping an episode that has ended, without a reset, is undefined: the fuzz always resets.
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
from gymnasium.utils.env_checker import check_env as gym_check_env

from rlgym_llm.core.env import Env
from rlgym_llm.core.errors import EnvCheckError, UnknownEnvError
from rlgym_llm.core.fuzz import hostile_actions
from rlgym_llm.core.registry import make
from rlgym_llm.core.spaces import ActionSpace, ChatSpace
from rlgym_llm.core.types import signal_problems

logger = logging.getLogger(__name__)

_N_SEEDS = 10  # seeds compared by the determinism and secrets checks
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one named check.

    Args:
        name: the check's name, e.g. `"fuzz"`.
        summary: what was checked, e.g. `"300 actions over 41 episodes"`.
        failures: contract violations; any one fails the env.
        warnings: things worth a look that do not fail the env.
    """

    name: str
    summary: str
    failures: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.failures


@dataclass(frozen=True)
class CheckReport:
    """What `check_env` checked, check by check."""

    env_id: str
    checks: tuple[CheckResult, ...]
    seconds: float

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def failures(self) -> list[str]:
        """Every failure, prefixed with its check's name."""
        return [f"{c.name}: {f}" for c in self.checks for f in c.failures]

    @property
    def warnings(self) -> list[str]:
        return [f"{c.name}: {w}" for c in self.checks for w in c.warnings]

    def raise_for_failures(self) -> None:
        """Raise `EnvCheckError` listing every failure, if there is any."""
        if self.failures:
            raise EnvCheckError(self.env_id, self.failures)

    def format(self) -> str:
        """A plain-text report: one line per check, its failures and warnings indented below."""
        verdict = "passed" if self.ok else f"FAILED ({len(self.failures)} failure(s))"
        n = len(self.checks)
        lines = [f"{self.env_id}: {n} check{'s' * (n != 1)} {verdict} in {self.seconds:.1f}s"]
        for c in self.checks:
            lines.append(f"  {'ok' if c.ok else 'FAIL':<5}{c.name:<12} {c.summary}")
            lines += [f"       - {f}" for f in c.failures]
            lines += [f"       ! {w}" for w in c.warnings]
        return "\n".join(lines)


def check_env(env: gymnasium.Env | str, *, n_fuzz: int = 300, seed: int = 0) -> CheckReport:
    """Check that an env keeps the rlgym-llm contract (see the module docstring for the checks).

    Args:
        env: an env (wrapped or not) or a registered id; an id is also made twice to compare instances.
        n_fuzz: how many actions the fuzz check sends.
        seed: the first seed used; checks use `seed, seed + 1, ...`.

    Returns:
        The report of what was checked, warnings included.

    Raises:
        EnvCheckError: one or more checks failed; the message lists every failure.
        UnknownEnvError: `env` is an id that is not registered.
    """
    report = run_checks(env, n_fuzz=n_fuzz, seed=seed)
    report.raise_for_failures()
    return report


def run_checks(env: gymnasium.Env | str, *, n_fuzz: int = 300, seed: int = 0) -> CheckReport:
    """Like `check_env`, but return the report even when checks fail (for the CLI)."""
    start = time.perf_counter()
    fresh: Callable[[], gymnasium.Env] | None = None
    if isinstance(env, str):
        env_id = env
        try:
            instance = make(env_id)
        except UnknownEnvError:
            raise
        except Exception as e:  # an env that cannot be built fails its check; report it as data
            failure = f"rlgym_llm.make({env_id!r}) raised {_describe(e)}"
            return CheckReport(env_id, (CheckResult("make", "build the env", (failure,)),), time.perf_counter() - start)
        fresh = lambda: make(env_id)  # noqa: E731
    else:
        instance = env
        env_id = instance.spec.id if instance.spec is not None else type(instance.unwrapped).__name__

    ctx = _Context(instance, fresh, n_fuzz, seed)
    checks = [_guarded(_check_gymnasium, ctx), _guarded(_check_api, ctx)]
    if ctx.chat_env:
        checks += [_guarded(check, ctx) for check in (_check_determinism, _check_secrets, _check_fuzz)]
    else:
        skipped = "skipped: not a chat env"
        checks += [CheckResult(name, skipped) for name in ("determinism", "secrets", "fuzz")]
    if fresh is not None:
        instance.close()
    report = CheckReport(env_id, tuple(checks), time.perf_counter() - start)
    logger.info("check_env(%s): %s", env_id, "passed" if report.ok else f"{len(report.failures)} failure(s)")
    return report


# --- helpers ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Context:
    env: gymnasium.Env
    fresh: Callable[[], gymnasium.Env] | None
    n_fuzz: int
    seed: int

    @property
    def chat_env(self) -> bool:
        u = self.env.unwrapped
        return isinstance(getattr(u, "observation_space", None), ChatSpace)

    @property
    def reward_range(self) -> tuple[float, float]:
        lo, hi = getattr(self.env.unwrapped, "reward_range", (-math.inf, math.inf))
        return float(lo), float(hi)


class _Problems:
    """Failures of one check; each kind is reported once, with a count (a broken env fails alike 300 times)."""

    def __init__(self) -> None:
        self._first: dict[str, str] = {}
        self._count: dict[str, int] = {}

    def add(self, message: str, kind: str | None = None) -> None:
        kind = kind or message
        self._first.setdefault(kind, message)
        self._count[kind] = self._count.get(kind, 0) + 1

    def __bool__(self) -> bool:
        return bool(self._first)

    def listed(self) -> tuple[str, ...]:
        return tuple(
            m if self._count[k] == 1 else f"{m} (and {self._count[k] - 1} more like it)" for k, m in self._first.items()
        )


def _describe(e: BaseException) -> str:
    """`TypeError at env.py:42: message`, short enough for a one-line report."""
    return type(e).__name__ + _where(e)


def _where(e: BaseException) -> str:
    """` at env.py:42: message`: the innermost frame and the message's first line."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if not f.filename.startswith("<")]  # skip <frozen ...>
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    text = _ANSI.sub("", str(e)).strip().splitlines()
    return where + (f": {_short(text[0])}" if text else "")


def _short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _guarded(check: Callable[[_Context], CheckResult], ctx: _Context) -> CheckResult:
    """Run a check; an env that raises where the contract says it must not fails the check, by name.

    Warnings raised meanwhile (e.g. by Gymnasium's passive checker on a wrapped env) become the
    check's warnings instead of scrolling past.
    """
    name = check.__name__.removeprefix("_check_")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = check(ctx)
        except Exception as e:
            result = CheckResult(name, "stopped early", (f"the env raised {_describe(e)}",))
    seen = dict.fromkeys(_short(_ANSI.sub("", str(w.message)).removeprefix("WARN: ").strip(), 200) for w in caught)
    extra = tuple(w for w in seen if w not in result.warnings)
    return replace(result, warnings=result.warnings + extra) if extra else result


def _json_problem(value: Any) -> str | None:
    """Why `value` cannot be written as strict JSON (None if it can)."""

    def refuse(o: Any) -> Any:
        raise TypeError(f"a {type(o).__module__}.{type(o).__qualname__}")

    try:
        json.dumps(value, default=refuse, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as e:
        return str(e) if "Out of range" not in str(e) else "a NaN or infinite float"
    return None


def _space_problem(space: gymnasium.Space, obs: Any) -> str | None:
    """Why `obs` is not in `space` (None if it is), precise enough to fix."""
    if space.contains(obs):
        return None
    if not isinstance(obs, list):
        return f"it is a {type(obs).__name__}, not a list of messages"
    if isinstance(space, ChatSpace):
        if len(obs) > space.max_messages:
            return f"it has {len(obs)} messages, more than max_messages={space.max_messages}"
        for i, m in enumerate(obs):
            if not isinstance(m, Mapping):
                return f"message {i} is a {type(m).__name__}, not a dict"
            if m.get("role") not in space.roles:
                return f"message {i} has role {m.get('role')!r}; the space allows {space.roles}"
            if not isinstance(m.get("content"), str):
                return f"message {i} has content of type {type(m.get('content')).__name__}, not str"
    return "ChatSpace.contains() rejects it (unknown keys, or a non-string name/tool_call_id)"


def _strings(value: Any) -> Iterator[str]:
    """Every string inside a message (content, names, tool-call arguments)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


def _secrets(env: gymnasium.Env, method: str = "secrets") -> list[str]:
    task = getattr(env.unwrapped, "task", None)
    if task is None or not callable(getattr(task, method, None)):
        return []
    found = getattr(task, method)()
    if not isinstance(found, list) or not all(isinstance(s, str) for s in found):
        raise TypeError(f"Task.{method}() must return a list of strings, got {found!r}")
    return [s for s in found if s]


def _leak(messages: Any, secrets: list[str]) -> str | None:
    for text in _strings(messages):
        for secret in secrets:
            if secret in text:
                return secret
    return None


# --- the checks ---------------------------------------------------------------------------------


def _check_gymnasium(ctx: _Context) -> CheckResult:
    summary = "Gymnasium's env_checker on env.unwrapped"
    try:
        gym_check_env(ctx.env.unwrapped, skip_render_check=True)
    except Exception as e:  # Gymnasium's checker asserts; report it as one failure and go on
        return CheckResult("gymnasium", summary, (f"gymnasium.utils.env_checker.check_env failed: {_describe(e)}",))
    return CheckResult("gymnasium", summary)


def _check_api(ctx: _Context) -> CheckResult:
    problems, notes = _Problems(), []
    u = ctx.env.unwrapped
    if not ctx.chat_env:
        problems.add(
            f"{type(u).__name__} is not an rlgym_llm.Env and its observation space is "
            f"{u.observation_space!r}, not a ChatSpace: subclass rlgym_llm.Env"
        )
        return CheckResult("api", "env type and spaces", problems.listed())
    if not isinstance(u, Env):
        notes.append(f"{type(u).__name__} does not subclass rlgym_llm.Env; checked through its spaces")
    if not isinstance(u.action_space, ActionSpace):
        problems.add(f"action_space is {u.action_space!r}, not an rlgym_llm.ActionSpace")
    rr = getattr(u, "reward_range", None)
    if not (
        isinstance(rr, (tuple, list))
        and len(rr) == 2
        and all(isinstance(x, (int, float)) and not math.isnan(x) for x in rr)
        and rr[0] <= rr[1]
    ):
        problems.add(f"reward_range must be a (low, high) pair of numbers with low <= high, got {rr!r}")

    result = ctx.env.reset(seed=ctx.seed)
    if not (isinstance(result, tuple) and len(result) == 2):
        problems.add(f"reset() must return (messages, info), got {type(result).__name__}")
        return CheckResult("api", "reset() and spaces", problems.listed(), tuple(notes))
    obs, info = result
    if why := _space_problem(u.observation_space, obs):
        problems.add(f"the opening is not in the observation space: {why}")
    if not isinstance(info, Mapping):
        problems.add(f"reset() info must be a dict, got {type(info).__name__}")
        info = {}
    task_id = info.get("task_id")
    if not isinstance(task_id, str) or not task_id:
        problems.add(f'reset() info["task_id"] must be a non-empty string, got {task_id!r}')
    elif (task := getattr(u, "task", None)) is not None and task_id != task.id:
        problems.add(f'info["task_id"] is {task_id!r} but env.task.id is {task.id!r}')
    tools = info.get("tools")
    if not isinstance(tools, list):
        problems.add(f'reset() info["tools"] must be a list of tool specs, got {type(tools).__name__}')
    else:
        names = [t.get("function", {}).get("name") if isinstance(t, Mapping) else None for t in tools]
        if any(not isinstance(n, str) for n in names):
            problems.add('every info["tools"] entry must look like {"type": "function", "function": {"name": ...}}')
        elif isinstance(u.action_space, ActionSpace) and tuple(names) != u.action_space.tool_names:
            problems.add(f'info["tools"] names {names} differ from action_space.tool_names {u.action_space.tool_names}')
    for what, value in (("opening", obs), ("reset() info", info)):
        if why := _json_problem(value):
            problems.add(f"the {what} is not JSON-serialisable: {why}")
    return CheckResult("api", "env type, spaces, reward_range, reset()", problems.listed(), tuple(notes))


def _opening(env: gymnasium.Env, seed: int) -> tuple[str, Any]:
    obs, info = env.reset(seed=seed)
    return str(info.get("task_id")), obs


def _check_determinism(ctx: _Context) -> CheckResult:
    problems, notes = _Problems(), []
    s = ctx.seed
    (id_a, obs_a), (id_b, obs_b) = _opening(ctx.env, s), _opening(ctx.env, s)
    if id_a != id_b:
        problems.add(f"reset(seed={s}) twice gave different tasks ({id_a!r}, then {id_b!r}): draw from self.np_random")
    elif obs_a != obs_b:
        problems.add(f"reset(seed={s}) twice gave task {id_a!r} with different opening messages")
    if ctx.fresh is not None:
        other = ctx.fresh()
        try:
            id_c, obs_c = _opening(other, s)
        finally:
            other.close()
        if (id_c, obs_c) != (id_a, obs_a):
            problems.add(f"two envs made the same way gave different openings for seed {s} ({id_a!r} vs {id_c!r})")
    ids = {_opening(ctx.env, s + k)[0] for k in range(1, _N_SEEDS + 1)}
    if len(ids) == 1:
        notes.append(f"{_N_SEEDS} different seeds all gave task {ids.pop()!r}; does sample_task use self.np_random?")
    instances = "one env" if ctx.fresh is None else "one env and two instances"
    summary = f"same seed twice on {instances}; {len(ids)} distinct tasks from {_N_SEEDS} seeds"
    return CheckResult("determinism", summary, problems.listed(), tuple(notes))


def _check_secrets(ctx: _Context) -> CheckResult:
    problems, with_secrets = _Problems(), 0
    for s in range(ctx.seed, ctx.seed + _N_SEEDS):
        task_id, obs = _opening(ctx.env, s)
        secrets = _secrets(ctx.env, "opening_secrets")
        with_secrets += bool(secrets)
        if secret := _leak(obs, secrets):
            problems.add(f"the opening of task {task_id!r} (seed {s}) contains its ground truth {_short(secret, 40)!r}")
    summary = f"{_N_SEEDS} openings, {with_secrets} with secrets to look for"
    return CheckResult("secrets", summary, problems.listed())


# --- fuzzing ------------------------------------------------------------------------------------


def _check_fuzz(ctx: _Context) -> CheckResult:
    env, problems = ctx.env, _Problems()
    rr = ctx.reward_range
    episodes, sent, ended = 1, 0, {"terminated": 0, "truncated": 0}
    _, info = env.reset(seed=ctx.seed)
    secrets = _secrets(env)
    actions = hostile_actions(env.action_space, info.get("tools") or [], ctx.seed)
    for i in range(ctx.n_fuzz):
        label, action = next(actions)
        at, sent = f"action {i} ({label})", sent + 1
        try:
            result = env.step(action)
        except Exception as e:
            problems.add(f"step raised {type(e).__name__} on {at}{_where(e)}", kind=f"raise {_describe(e)[:80]}")
            done = True  # the env's state is unknown now: start a new episode
        else:
            done = _check_step(action, result, at, secrets, rr, env.observation_space, problems)
            ended["terminated"] += done and bool(result[2])
            ended["truncated"] += done and bool(result[3])
        if done and i + 1 < ctx.n_fuzz:
            try:
                env.reset(seed=ctx.seed + episodes)
                secrets = _secrets(env)
            except Exception as e:
                problems.add(f"reset raised {_describe(e)} after {at}; the fuzz stopped there")
                break
            episodes += 1
    summary = (
        f"{sent} hostile actions over {episodes} episode(s): "
        f"{ended['terminated']} terminated, {ended['truncated']} truncated"
    )
    return CheckResult("fuzz", summary, problems.listed())


def _check_step(
    action: Any,
    result: Any,
    at: str,
    secrets: list[str],
    rr: tuple[float, float],
    space: gymnasium.Space,
    problems: _Problems,
) -> bool:
    """Check one `step` result; returns whether the episode ended (or cannot go on)."""
    if not (isinstance(result, tuple) and len(result) == 5):
        problems.add(
            f"step returned {type(result).__name__}, not (messages, reward, terminated, truncated, info), on {at}",
            kind="shape",
        )
        return True
    obs, reward, terminated, truncated, info = result
    if why := _space_problem(space, obs):
        problems.add(f"the observation after {at} is not in the observation space: {why}", kind=f"space {why[:30]}")
    said = action if isinstance(action, str) else repr(action)
    # Text the action itself carried (an echoed call id, a quoted guess) is not a leak.
    if secret := _leak(obs, [s for s in secrets if s not in said]):
        problems.add(f"the observation after {at} leaks the ground truth {_short(secret, 40)!r}", kind="leak")
    if why := _json_problem(obs):
        problems.add(f"the observation after {at} is not JSON-serialisable: {why}", kind="obs json")
    if isinstance(reward, bool) or not isinstance(reward, (int, float, np.integer, np.floating)):
        problems.add(f"reward after {at} is a {type(reward).__name__}, not a float", kind="reward type")
    elif not math.isfinite(reward):
        problems.add(f"reward after {at} is {reward}, not finite", kind="reward finite")
    elif not rr[0] <= reward <= rr[1]:
        problems.add(f"reward {reward} after {at} is outside reward_range {rr}", kind="reward range")
    for flag, value in (("terminated", terminated), ("truncated", truncated)):
        if not isinstance(value, (bool, np.bool_)):
            problems.add(f"{flag} after {at} is a {type(value).__name__}, not a bool", kind=f"{flag} type")
    if not isinstance(info, Mapping):
        problems.add(f"info after {at} is a {type(info).__name__}, not a dict", kind="info type")
        return bool(terminated or truncated)
    for p in signal_problems(info.get("signals")):
        problems.add(f"{p} (after {at})", kind=f"signals {p[:40]}")
    if why := _json_problem(info):
        problems.add(f"info after {at} is not JSON-serialisable: {why}", kind="info json")
    done = bool(terminated or truncated)
    if done:
        for p in _outcome_problems(info.get("outcome"), rr):
            problems.add(f"{p} (episode ended on {at})", kind=f"outcome {p[:40]}")
    return done


def _outcome_problems(outcome: Any, rr: tuple[float, float]) -> list[str]:
    if not isinstance(outcome, Mapping):
        return ['the episode ended without info["outcome"] (a dict with "reward" and "components")']
    problems = []
    reward = outcome.get("reward")
    if isinstance(reward, bool) or not isinstance(reward, (int, float)) or not math.isfinite(reward):
        problems.append(f'info["outcome"]["reward"] must be a finite float, got {reward!r}')
    elif not rr[0] <= reward <= rr[1]:
        problems.append(f'info["outcome"]["reward"] {reward} is outside reward_range {rr}')
    comps = outcome.get("components")
    if not isinstance(comps, Mapping) or not all(
        isinstance(k, str) and isinstance(v, (int, float)) and math.isfinite(v) for k, v in comps.items()
    ):
        problems.append(f'info["outcome"]["components"] must map names to finite floats, got {comps!r}')
    return problems

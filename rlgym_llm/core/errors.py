"""The project's error tree: small, and every message says what to do next.

API misuse raises at once. Model mistakes (malformed tool calls, bad arguments) are not errors:
envs turn them into error observations, and the rollout manager records infrastructure failures
as data on the trajectory.
"""

from __future__ import annotations

from collections.abc import Iterable


class RlgymError(Exception):
    """Base class of every error raised by rlgym-llm."""


class UnknownEnvError(RlgymError, KeyError):
    """`make()` or `spec()` was given an id that is not registered."""

    def __init__(self, env_id: str, known: Iterable[str]):
        import difflib

        known = sorted(known)
        close = difflib.get_close_matches(env_id, known, n=3)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        super().__init__(
            f"No environment registered as {env_id!r}.{hint} "
            f"Run `rlgym envs` (or `rlgym_llm.list_envs()`) to see the {len(known)} registered ids; "
            "a third-party package registers its envs through the `rlgym_llm.envs` entry-point group."
        )
        self.env_id = env_id

    def __str__(self) -> str:  # KeyError would otherwise print the message quoted
        return str(self.args[0])


class RegistrationError(RlgymError, ValueError):
    """`register()` was called with a bad id or entry point."""


EXTRA_OF: dict[str, str] = {
    "torch": "train",
    "transformers": "train",
    "tokenizers": "train",
    "safetensors": "train",
    "peft": "train",
    "matplotlib": "train",
    "aiohttp": "openai",
    "ray": "ray",
    "docker": "docker",
    "tensorboard": "tb",
    "wandb": "wandb",
    "pyarrow": "data",
    "datasets": "data",
    "bm25s": "search",
    "PIL": "gui",
    "gguf": "smollm2",
    "openenv": "serve",
    "fastapi": "serve",
    "uvicorn": "serve",
    "websockets": "serve",
}
"""The extra of pyproject.toml that installs each optional top-level module."""


class MissingDependencyError(RlgymError, ImportError):
    """An optional extra is needed for this feature but is not installed.

    `MissingDependencyError.of(error, feature)` builds it from the `ImportError` that says which module
    failed (`error.name`), so the message names that module, not the one the feature is known for.
    """

    def __init__(self, package: str, extra: str | None, feature: str, detail: str | None = None):
        fix = f"pip install 'rlgym-llm[{extra}]'" if extra else f"install the package that provides `{package}`"
        if detail is None:
            text = f"{feature} needs `{package}`, which is not installed. Install it with `{fix}`."
        else:  # installed, but its import fails (too old a version, a broken dependency)
            text = f"{feature} needs `{package}`, which cannot be imported ({detail}). Reinstall it with `{fix}`."
        super().__init__(text, name=package)

    @classmethod
    def of(
        cls, error: ImportError, feature: str, extra: str | None = None, default: str | None = None
    ) -> MissingDependencyError:
        """The error for a failed import: the module is `error.name`'s top-level package (`default`
        when the error names none), the extra `extra`, else the one `EXTRA_OF` gives for it."""
        package = (error.name or "").partition(".")[0] or default or "an optional package"
        detail = None if isinstance(error, ModuleNotFoundError) else str(error)
        return cls(package, extra or EXTRA_OF.get(package), feature, detail)


class EnvCheckError(RlgymError, AssertionError):
    """`check_env()` found one or more contract violations; all are listed."""

    def __init__(self, env_id: str, failures: list[str]):
        self.env_id = env_id
        self.failures = list(failures)
        lines = "\n".join(f"  - {f}" for f in self.failures)
        super().__init__(f"{env_id} failed {len(self.failures)} env check(s):\n{lines}")


class ConfigError(RlgymError, ValueError):
    """A config failed validation; every problem is listed with its fix."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"invalid config ({len(self.problems)} problem(s)):\n{lines}")


class ResumeConflictError(ConfigError):
    """`rlgym train resume=RUN` with overrides its saved config forbids; the message is one line."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        ValueError.__init__(self, "; ".join(self.problems))


class DataFileError(ConfigError):
    """A user's data file (JSONL tasks, corpus, QA) cannot be used; each problem names the file and line."""

    def __init__(self, problems: str | list[str]):
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        if len(self.problems) == 1:
            ValueError.__init__(self, self.problems[0])
        else:
            lines = "\n".join(f"  - {p}" for p in self.problems)
            ValueError.__init__(self, f"{len(self.problems)} problem(s) in data files:\n{lines}")


class MalformedActionError(RlgymError, ValueError):
    """An action could not be read as an assistant turn.

    Raised by `AssistantTurn.coerce`; `Env.step` catches it and answers with an error observation.
    """

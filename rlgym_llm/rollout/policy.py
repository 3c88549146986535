"""The policy contract: token ids in, token ids and their logprobs out.

Every backend (local transformers, an OpenAI-compatible server such as vLLM, scripted fakes)
implements `Policy.generate`. Keeping the exchange at the token level means the trainer sees exactly
the ids the engine sampled, with the engine's logprobs, and nothing is re-tokenized. A backend the
trainer can update is a `TrainablePolicy`: it also takes the trainer's weights and can be shut down.
"""

from __future__ import annotations

import abc
import dataclasses
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from rlgym_llm.core.types import Message


@dataclass(frozen=True)
class SamplingParams:
    """How to sample one completion.

    Args:
        max_tokens: the most tokens to generate.
        temperature: 0 means greedy.
        top_p: nucleus sampling mass (1.0: off).
        top_k: keep the k most likely tokens (0 or -1: off).
        stop_token_ids: extra ids that end the completion (the tokenizer's EOS always does).
        seed: per-request seed for reproducible sampling, where the backend supports it.
    """

    max_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    stop_token_ids: tuple[int, ...] = ()
    seed: int | None = None

    def __post_init__(self) -> None:
        problems = []
        if self.max_tokens < 1:
            problems.append(f"max_tokens must be >= 1, got {self.max_tokens}")
        if self.temperature < 0:
            problems.append(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            problems.append(f"top_p must be in (0, 1], got {self.top_p}")
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


@dataclass(frozen=True)
class Completion:
    """One sampled completion.

    Args:
        token_ids: the generated ids, the stop token included when generation stopped on one.
        logprobs: log pi(token | context) of each generated id under the model's raw distribution
            (before temperature, top-p or top-k), as the trainer recomputes it.
        text: the decoded text (special tokens skipped).
        finish_reason: "stop" (EOS or a stop id) or "length" (max_tokens or context full).
    """

    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    text: str
    finish_reason: str
    metadata: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.token_ids) != len(self.logprobs):
            raise ValueError(f"{len(self.token_ids)} token ids but {len(self.logprobs)} logprobs")


@runtime_checkable
class Policy(Protocol):
    """Anything that turns a prompt of token ids into a `Completion`."""

    async def generate(self, prompt_token_ids: Sequence[int], sampling: SamplingParams) -> Completion:
        """Sample one completion of `prompt_token_ids`."""
        ...


@runtime_checkable
class TrainablePolicy(Policy, Protocol):
    """A policy whose weights follow the trainer's model: the engine `rlgym train` samples from.

    Backends: `TransformersPolicy` (in-process; shares or copies the weights) and `VLLMPolicy`
    (a server it starts; adapter load or restart).
    """

    def sync_weights(self, model: Any) -> Any:
        """Sample with `model`'s current weights from the next request on (between rollouts).
        `TransformersPolicy` also takes a state dict: the snapshot an engine sampling ahead loads."""
        ...

    async def close(self) -> None:
        """Release what the policy holds: connections, and any engine process it started. Idempotent."""
        ...


class SeededPolicy:
    """Give every generate call its own sampling seed, `base + n` for the n-th call.

    Backends then sample reproducibly whatever batches they form, and the counter `calls` is the
    whole sampling state a checkpoint needs.
    """

    def __init__(self, inner: Policy, base: int):
        self.inner, self.base, self.calls = inner, base, 0

    async def generate(self, prompt_token_ids: Sequence[int], sampling: SamplingParams) -> Completion:
        seed, self.calls = self.base + self.calls, self.calls + 1
        return await self.inner.generate(prompt_token_ids, dataclasses.replace(sampling, seed=seed))


def episode_seed(base: int, task_seed: int | None, sample: int, call: int) -> int:
    """A sampling seed in [0, 2**31) that depends only on its arguments (a hash: the same in every
    process, unlike Python's `hash`)."""
    key = f"{base}:{task_seed}:{sample}:{call}".encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little") % 2**31


@dataclass
class Episode:
    """What a policy bound to one episode may see (see `EpisodePolicy`).

    Args:
        env: the episode's env, after its reset (a scripted expert may read its task).
        seed: the task's seed.
        messages: every message the env has sent so far, the opening first; the rollout manager
            appends each step's messages before the next `generate`.
        sample: the episode's index in its group (0 .. group_size - 1).
    """

    env: Any
    seed: int
    messages: list[Message]
    sample: int = 0


class EpisodePolicy(abc.ABC):
    """A policy that plays each episode with the env in view: scripted experts, e.g. the oracle
    teacher of the SFT warm-up (`train.sft.OraclePolicy`).

    `RolloutManager` accepts one wherever it takes a `Policy`: after each env reset it calls
    `start` and samples that episode's turns from the returned policy, so the expert's turns are
    rendered, parsed, stepped and recorded exactly as a model's are.
    """

    @abc.abstractmethod
    def start(self, episode: Episode) -> Policy:
        """The policy of one episode (called after the env's reset)."""


class EpisodeSeededPolicy(EpisodePolicy):
    """Give every generate call a sampling seed keyed by its episode: (task seed, sample index in the
    group, call number in the episode), hashed with `base` (`episode_seed`).

    Unlike `SeededPolicy`'s call counter, the seeds do not depend on how many episodes run or in
    which order their calls arrive: a step's tasks split over several processes (`trainer.nproc`)
    sample what one process samples, and the sampling state a checkpoint needs is empty. A task
    seed rolled out twice (a refill never repeats one) gets the same seeds again.
    """

    def __init__(self, inner: Policy, base: int):
        self.inner, self.base = inner, base

    def start(self, episode: Episode) -> Policy:
        return _EpisodeSeeds(self.inner, self.base, episode.seed, episode.sample)


class _EpisodeSeeds:
    """One episode's calls of `EpisodeSeededPolicy`."""

    def __init__(self, inner: Policy, base: int, task_seed: int, sample: int):
        self.inner, self.base, self.task_seed, self.sample, self.calls = inner, base, task_seed, sample, 0

    async def generate(self, prompt_token_ids: Sequence[int], sampling: SamplingParams) -> Completion:
        seed = episode_seed(self.base, self.task_seed, self.sample, self.calls)
        self.calls += 1
        return await self.inner.generate(prompt_token_ids, dataclasses.replace(sampling, seed=seed))

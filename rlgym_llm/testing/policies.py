"""Scripted policies: real token ids from a real tokenizer, with the text chosen by a script.

They exercise the whole rollout path (rendering, token bookkeeping, parsing, env steps) without a
model, and make failure modes reproducible (delays, exceptions, hangs).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from rlgym_llm.rollout.policy import Completion, SamplingParams


class ScriptedPolicy:
    """Answer each prompt with `respond(prompt_text)`, tokenized and closed with EOS.

    Args:
        tokenizer: a Hugging Face tokenizer.
        respond: maps the decoded prompt to the completion text.
        delay_s: simulated generation latency per call.
        logprob: the logprob reported for every generated token.
    """

    def __init__(self, tokenizer: Any, respond: Callable[[str], str], delay_s: float = 0.0, logprob: float = -1.0):
        self.tokenizer, self.respond = tokenizer, respond
        self.delay_s, self.logprob = delay_s, logprob
        self.calls = 0

    async def generate(self, prompt_token_ids: Sequence[int], sampling: SamplingParams) -> Completion:
        self.calls += 1
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        text = self.respond(self.tokenizer.decode(list(prompt_token_ids), skip_special_tokens=False))
        ids = [*self.tokenizer.encode(text, add_special_tokens=False), self.tokenizer.eos_token_id]
        finish = "stop"
        if len(ids) > sampling.max_tokens:
            ids, finish = ids[: sampling.max_tokens], "length"
        return Completion(
            token_ids=tuple(ids),
            logprobs=(self.logprob,) * len(ids),
            text=self.tokenizer.decode(ids, skip_special_tokens=True),
            finish_reason=finish,
        )


class FaultyPolicy:
    """Wrap a policy and fail chosen calls: `faults[i]` is raised (or, if "hang", sleeps forever) on call i."""

    def __init__(self, inner: Any, faults: dict[int, BaseException | str]):
        self.inner, self.faults = inner, faults
        self.calls = 0

    async def generate(self, prompt_token_ids: Sequence[int], sampling: SamplingParams) -> Completion:
        i, self.calls = self.calls, self.calls + 1
        fault = self.faults.get(i)
        if fault == "hang":
            await asyncio.sleep(3600)
        elif isinstance(fault, BaseException):
            raise fault
        return await self.inner.generate(prompt_token_ids, sampling)

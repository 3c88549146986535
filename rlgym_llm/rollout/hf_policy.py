"""A local transformers policy: batched sampling with exact per-token logprobs.

Concurrent `generate` calls (one per episode in the rollout manager) are gathered into batches and
run in a worker thread, so env steps keep running on the event loop while the model computes.
Logprobs are `log_softmax` of the model's raw logits at each sampled position (not of the processed
scores after temperature / top-p), which is what the trainer recomputes by teacher forcing.
The model runs on its device (and in the compute dtype of `rlgym_llm.rollout.device`); the token
draws are made on CPU from float32 probabilities with seeded generators, so a seed gives the same
sample on every device whenever the logits agree.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rlgym_llm.core.errors import MissingDependencyError
from rlgym_llm.core.memory import trim_heap
from rlgym_llm.rollout.errors import ContextOverflowError
from rlgym_llm.rollout.kv_cache import (
    PrefixStore,
    batch_cache,
    cache_kwarg,
    cache_of,
    last_logits_kwargs,
    row_layers,
    weights_version,
)
from rlgym_llm.rollout.policy import Completion, SamplingParams

if TYPE_CHECKING:
    from rlgym_llm.rollout.device import Compute

logger = logging.getLogger(__name__)


@dataclass
class _Request:
    prompt: list[int]
    sampling: SamplingParams
    future: asyncio.Future


def _torch():
    try:
        import torch
    except ImportError as e:
        raise MissingDependencyError.of(e, "the transformers policy", default="torch") from e
    return torch


class TransformersPolicy:
    """Sample from a Hugging Face causal LM held in this process (a `TrainablePolicy`).

    Args:
        model: a `PreTrainedModel` (put in eval mode; the trainer may share it and update it in place).
        tokenizer: its tokenizer (for EOS/pad ids and decoding).
        max_batch_size: the most requests run together.
        batch_wait_s: how long the batcher waits for more requests before running a batch.
        max_context: the context window (default: the model's `max_position_embeddings`).
        compute: device and compute dtype (default: float32 where the model's weights are).
        prefix_tokens: the most tokens of earlier turns' KV kept for the next turn of an episode
            (`kv_cache.PrefixStore`; for SmolLM2 46 KB each). None: 256 per row of a batch; 0: none.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        max_batch_size: int = 32,
        batch_wait_s: float = 0.002,
        max_context: int | None = None,
        compute: Compute | None = None,
        prefix_tokens: int | None = None,
    ):
        from rlgym_llm.rollout.device import Compute

        self.model = model
        self.compute = compute or Compute.of(model)
        self.tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        self.batch_wait_s = batch_wait_s
        self.max_context = max_context or int(getattr(model.config, "max_position_embeddings", 2048))
        self.eos_ids = {tokenizer.eos_token_id} - {None}
        gen_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        if gen_eos is not None:
            self.eos_ids |= set(gen_eos if isinstance(gen_eos, list) else [gen_eos])
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else next(iter(self.eos_ids))
        self._pending: list[_Request] = []
        self._worker: asyncio.Task | None = None
        self._lock = threading.Lock()  # one forward pass at a time (the trainer may share the model)
        self._calls = 0
        self.prefix_tokens = 256 * max_batch_size if prefix_tokens is None else prefix_tokens
        self.prefixes = PrefixStore(self.prefix_tokens) if self.prefix_tokens > 0 else None

    @classmethod
    def from_pretrained(cls, path: str, **kwargs: Any) -> TransformersPolicy:
        """Load model and tokenizer from a folder (fp32, eval mode)."""
        _torch()
        from transformers import AutoModelForCausalLM, AutoTokenizer

        model = AutoModelForCausalLM.from_pretrained(path, dtype="float32")
        model.eval()
        return cls(model, AutoTokenizer.from_pretrained(path), **kwargs)

    # --- TrainablePolicy: weights and teardown --------------------------------------------------

    def sync_weights(self, model: Any) -> None:
        """Sample with `model`'s weights: shared with the trainer (the same object), the update is
        already live and only eval mode is restored; another model's weights, or a state dict (a
        snapshot of the trainer's, as `trainer.off_policy_steps` hands over), are copied in."""
        if isinstance(model, Mapping):
            self.model.load_state_dict(model)
        elif model is not self.model:
            self.model.load_state_dict(model.state_dict())
        self.model.eval()
        self.release_cache()  # stale: also caught by the weights' version, this frees it at once

    def detached(self) -> TransformersPolicy:
        """The same engine over a copy of the weights, in this process: a thread of the caller samples
        with it (sharing the GIL) while the trainer updates the original. For a child process with its
        own torch threads, see `rlgym_llm.rollout.hf_process.detached`."""
        import copy

        own = copy.deepcopy(self.model).eval()
        own.requires_grad_(False)
        return TransformersPolicy(
            own,
            self.tokenizer,
            self.max_batch_size,
            self.batch_wait_s,
            self.max_context,
            self.compute,
            self.prefix_tokens,
        )

    async def close(self) -> None:
        """Nothing to release: the model lives in this process (the batching task ends by itself)."""

    # --- async API used by the rollout manager -------------------------------------------------

    async def generate(self, prompt_token_ids: Sequence[int], sampling: SamplingParams) -> Completion:
        """Queue one request; it runs in the next batch of concurrent requests."""
        loop = asyncio.get_running_loop()
        request = _Request(list(prompt_token_ids), sampling, loop.create_future())
        self._pending.append(request)
        if self._worker is None or self._worker.done():
            self._worker = loop.create_task(self._drain())
        return await request.future

    async def _drain(self) -> None:
        while self._pending:
            await asyncio.sleep(self.batch_wait_s)  # let concurrent episodes add their requests
            batch, self._pending = self._pending[: self.max_batch_size], self._pending[self.max_batch_size :]
            groups: dict[SamplingParams, list[_Request]] = {}
            for r in batch:
                groups.setdefault(_batch_key(r.sampling), []).append(r)
            for reqs in groups.values():
                try:
                    outs = await asyncio.to_thread(
                        self.generate_batch, [r.prompt for r in reqs], [r.sampling for r in reqs]
                    )
                except Exception as e:  # delivered to each caller, who classifies it
                    for r in reqs:
                        if not r.future.done():
                            r.future.set_exception(e)
                    continue
                for r, out in zip(reqs, outs):
                    if not r.future.done():
                        r.future.set_result(out)

    # --- sync API ---------------------------------------------------------------------------------

    def generate_batch(self, prompts: Sequence[Sequence[int]], samplings: Sequence[SamplingParams]) -> list[Completion]:
        """Sample one completion per prompt. Requests in one batch share temperature/top-p/top-k.

        Raises:
            ContextOverflowError: a prompt leaves no room to generate.
        """
        torch = _torch()
        sp = samplings[0]
        for p in prompts:
            if len(p) >= self.max_context:
                raise ContextOverflowError(f"prompt of {len(p)} tokens fills the {self.max_context}-token context")
        budget = min(max(s.max_tokens for s in samplings), self.max_context - max(len(p) for p in prompts))
        limits = [min(s.max_tokens, budget) for s in samplings]
        generators = []
        for s in samplings:
            self._calls += 1
            g = torch.Generator().manual_seed(s.seed if s.seed is not None else 0x5EED + self._calls)
            generators.append(g)
        stops = [self.eos_ids | set(s.stop_token_ids) for s in samplings]

        dev = self.compute.device
        store = self.prefixes
        with self._lock, torch.no_grad(), self.compute.autocast():
            kv_name = cache_kwarg(self.model)
            last = last_logits_kwargs(self.model)  # the prefill's logits at the last position only
            found = None
            if store is not None:
                store.check(weights_version(self.model))
                found = [store.take(p) for p in prompts]
            if found is not None and any(f is not None for f in found):
                # earlier turns' KV: the prefill runs only each prompt's new tokens
                ids, mask, positions, cached = self._resume_inputs(prompts, found)
                found = None  # the rows' kept KV is in `cached` now: freed before the prefill extends it
                kv = {kv_name: cached}
                out = self.model(
                    input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, **kv, **last
                )
            else:
                ids, mask = (x.to(dev) for x in self._left_pad(prompts))
                positions = (mask.cumsum(-1) - 1).clamp(min=0)
                out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, **last)
            past, logits = cache_of(out), out.logits[:, -1, :]
            n = len(prompts)
            tokens: list[list[int]] = [[] for _ in range(n)]
            logps: list[list[float]] = [[] for _ in range(n)]
            finish = ["length"] * n
            active = [True] * n
            rows = list(range(n))  # the request of each row of the batch; finished rows leave it
            for step in range(max(limits)):
                logits = logits.float().cpu()  # (rows, vocab): draws on CPU, seeded the same on every device
                raw_logp = torch.log_softmax(logits, dim=-1)
                nxt = self._sample(logits, sp, [generators[i] for i in rows])  # (rows,)
                for r, i in enumerate(rows):
                    if not active[i]:  # kept in the batch (a cache without row selection): no more draws
                        continue
                    t = int(nxt[r])
                    tokens[i].append(t)
                    logps[i].append(float(raw_logp[r, t]))
                    if t in stops[i]:
                        active[i], finish[i] = False, "stop"
                    elif len(tokens[i]) >= limits[i]:
                        active[i] = False
                if not any(active) or step == max(limits) - 1:
                    break
                keep = [r for r, i in enumerate(rows) if active[i]]
                if len(keep) < len(rows) and hasattr(past, "batch_select_indices"):
                    if store is not None:
                        for r, i in enumerate(rows):
                            if not active[i]:
                                self._keep_prefix(store, past, mask, r, prompts[i], tokens[i])
                    # a finished row stops costing compute: the rest decode as a smaller batch (each
                    # row's draws use its own generator, so which rows share a step changes no sample)
                    index = torch.tensor(keep, device=dev)
                    past.batch_select_indices(index)
                    mask, positions = mask[index], positions[index]
                    rows = [rows[r] for r in keep]
                feed = torch.tensor([[tokens[i][-1] if active[i] else self.pad_id] for i in rows], device=dev)
                mask = torch.cat([mask, torch.ones(len(rows), 1, dtype=mask.dtype, device=dev)], dim=1)
                positions = positions[:, -1:] + 1
                kv = {kv_name: past}
                out = self.model(input_ids=feed, attention_mask=mask, position_ids=positions, use_cache=True, **kv)
                past, logits = cache_of(out), out.logits[:, -1, :]
            if store is not None and hasattr(past, "batch_select_indices"):
                for r, i in enumerate(rows):
                    self._keep_prefix(store, past, mask, r, prompts[i], tokens[i])
            out = past = logits = None  # the batch's KV cache, freed before the trim (and the dict that passed it)
            kv = {}
        if dev.type == "cpu":
            # each decoding step's KV cache is a new, longer tensor: the freed ones stay in the C heap,
            # resident, until trimmed (core/memory.py); without this a call left hundreds of MB there
            trim_heap()
        return [
            Completion(
                token_ids=tuple(tokens[i]),
                logprobs=tuple(logps[i]),
                text=self.tokenizer.decode(tokens[i], skip_special_tokens=True),
                finish_reason=finish[i],
            )
            for i in range(n)
        ]

    def release_cache(self) -> None:
        """Drop the kept KV of earlier turns (the loop calls it before an update: an episode that
        ended leaves its last turn's entry behind, and the update needs the memory). A batch running
        in another thread (sampling ahead) keeps it: dropped only when no batch holds the model."""
        if self.prefixes is not None and self._lock.acquire(blocking=False):
            try:
                self.prefixes.clear()
            finally:
                self._lock.release()

    def _keep_prefix(self, store: PrefixStore, past: Any, mask: Any, row: int, prompt: Any, tokens: list[int]) -> None:
        """Keep row `row`'s KV for the episode's next turn: the prompt and every sampled token but the
        last (which was never fed back), the positions where `mask` is 1."""
        key = [*prompt, *tokens[:-1]]
        keep = mask[row].bool()
        if int(keep.sum()) != len(key):
            return  # a position the mask does not account for: keep nothing rather than a wrong KV
        layers = row_layers(past, row, keep)
        if layers is not None:
            store.put(key, layers)

    def _resume_inputs(self, prompts: Sequence[Sequence[int]], found: Sequence[Any]):
        """Prefill inputs for prompts whose first tokens have kept KV (`found[i]`: (tokens, layers) or
        None): row i is [padding][kept KV][padding][its new tokens], the KV right-aligned in the
        cache and the new tokens in the input, both masked and positioned as one left-padded prompt."""
        torch = _torch()
        dev = self.compute.device
        cached = [f[0] if f is not None else 0 for f in found]
        new = [list(p[c:]) for p, c in zip(prompts, cached)]
        width_c, width_n = max(cached), max(len(x) for x in new)
        n = len(prompts)
        ids = torch.full((n, width_n), self.pad_id, dtype=torch.long)
        mask = torch.zeros((n, width_c + width_n), dtype=torch.long)
        positions = torch.zeros((n, width_n), dtype=torch.long)
        for i, (c, x) in enumerate(zip(cached, new)):
            mask[i, width_c - c : width_c] = 1
            ids[i, width_n - len(x) :] = torch.tensor(x, dtype=torch.long)
            mask[i, width_c + width_n - len(x) :] = 1
            positions[i, width_n - len(x) :] = torch.arange(c, c + len(x))
        cache = batch_cache([f[1] if f is not None else None for f in found], cached)
        return ids.to(dev), mask.to(dev), positions.to(dev), cache

    def score(self, prompt_token_ids: Sequence[int], completion_token_ids: Sequence[int]) -> list[float]:
        """Teacher-forced logprobs of `completion_token_ids` given `prompt_token_ids` (no sampling)."""
        torch = _torch()
        ids = torch.tensor([list(prompt_token_ids) + list(completion_token_ids)], device=self.compute.device)
        with self._lock, torch.no_grad(), self.compute.autocast():
            logits = self.model(input_ids=ids).logits[0]
        logits = logits.float().cpu()
        logp = torch.log_softmax(logits[len(prompt_token_ids) - 1 : -1], dim=-1)
        target = torch.tensor(list(completion_token_ids))
        return logp.gather(1, target[:, None])[:, 0].tolist()

    def _left_pad(self, prompts: Sequence[Sequence[int]]):
        torch = _torch()
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, width - len(p) :] = torch.tensor(list(p), dtype=torch.long)
            mask[i, width - len(p) :] = 1
        return ids, mask

    @staticmethod
    def _sample(logits, sp: SamplingParams, generators):
        torch = _torch()
        if sp.greedy:
            return logits.argmax(-1)
        logits = logits / sp.temperature
        if sp.top_k and sp.top_k > 0:
            kth = torch.topk(logits, min(sp.top_k, logits.shape[-1]), dim=-1).values[:, -1:]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        probs = torch.softmax(logits, dim=-1)
        if sp.top_p < 1.0:
            sorted_p, order = probs.sort(dim=-1, descending=True)
            keep = sorted_p.cumsum(-1) - sorted_p < sp.top_p  # always keeps the top token
            sorted_p = sorted_p * keep
            probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)
        return torch.stack([torch.multinomial(probs[i], 1, generator=g)[0] for i, g in enumerate(generators)])


def _batch_key(sp: SamplingParams) -> SamplingParams:
    """Requests that may share a batch: same distribution, any length / seed / stop ids."""
    return SamplingParams(temperature=sp.temperature, top_p=sp.top_p, top_k=sp.top_k)

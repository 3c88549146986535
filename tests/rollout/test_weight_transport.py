"""In-place weight sync without a server: the shared-memory transport, the worker module's reader,
the weights a model sends, and how `VLLMPolicy` picks a sync path (the server side is proven in
test_weight_sync.py)."""

from __future__ import annotations

import ast
import copy
import json
import os
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from rlgym_llm.config import load_config  # noqa: E402
from rlgym_llm.core.errors import ConfigError  # noqa: E402
from rlgym_llm.recipes.train import warm_start  # noqa: E402
from rlgym_llm.rollout import vllm_worker  # noqa: E402
from rlgym_llm.rollout.vllm_policy import VLLMPolicy  # noqa: E402
from rlgym_llm.rollout.weight_transport import (  # noqa: E402
    SharedMemoryTransport,
    WeightTransport,
    folder_weights,
    full_weights,
)


@pytest.fixture
def transport(tmp_path):
    shm = SharedMemoryTransport(tmp_path)
    yield shm
    shm.close()


def test_shared_memory_round_trip_keeps_names_dtypes_shapes_and_bits(transport):
    gen = torch.Generator().manual_seed(0)
    weights = [
        ("a.weight", torch.randn(3, 5, generator=gen)),
        ("b.weight", torch.randn(7, generator=gen).to(torch.bfloat16)),
        ("c.transposed", torch.randn(4, 6, generator=gen).t()),  # not contiguous
        ("d.index", torch.arange(5, dtype=torch.int64)),
    ]
    assert isinstance(transport, WeightTransport)
    handle = json.loads(json.dumps(transport.send(weights, {"e.weight": "a.weight"})))  # the RPC sends JSON
    assert handle["transport"] == "shm" and handle["tied"] == {"e.weight": "a.weight"}
    assert all(entry["offset"] % vllm_worker.ALIGN == 0 for entry in handle["tensors"])
    received = list(vllm_worker.receive(handle))
    assert [name for name, _ in received] == [name for name, _ in weights]
    for (_, sent), (_, got) in zip(weights, received):
        assert got.dtype == sent.dtype and got.shape == sent.shape and torch.equal(got, sent)


def test_the_trainer_tensors_move_into_the_file_and_later_syncs_copy_nothing(transport, tiny_model_dir, tmp_path):
    model = transformers.AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype="float32")
    weights, tied = full_weights(model)
    handle = json.loads(json.dumps(transport.send(weights, tied)))
    assert transport.copied == len(weights)
    received = dict(vllm_worker.receive(handle))
    embed = model.model.embed_tokens.weight
    assert model.lm_head.weight is embed  # still tied: the Parameter kept its identity

    # an optimizer step writes the shared bytes in place (the worker's mapping sees it at once);
    # the next sync copies nothing
    before = embed.detach().clone()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ids = torch.tensor([[1, 2, 3, 4]])
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    state = model.state_dict()
    assert not torch.equal(embed, before)
    assert all(torch.equal(tensor, state[name]) for name, tensor in received.items())
    handle = json.loads(json.dumps(transport.send(*full_weights(model))))
    assert transport.copied == 0
    assert all(torch.equal(tensor, state[name]) for name, tensor in vllm_worker.receive(handle))

    # each tensor has a storage of its own: checkpoints and copies see untied, complete tensors
    model.save_pretrained(tmp_path / "saved")
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "saved", dtype="float32")
    assert all(torch.equal(a, b) for a, b in zip(reloaded.state_dict().values(), model.state_dict().values()))
    clone = copy.deepcopy(model)
    assert clone.model.embed_tokens.weight.data_ptr() != embed.data_ptr()

    # a tensor replaced since (here: moved off the file) is copied again, then adopted again
    model.model.norm.weight.data = model.model.norm.weight.data.clone()
    transport.send(*full_weights(model))
    assert transport.copied == 1
    plain = SharedMemoryTransport(transport.directory, adopt=False)
    try:
        fresh = transformers.AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype="float32")
        before = fresh.model.norm.weight.data_ptr()
        plain.send(*full_weights(fresh))
        plain.send(*full_weights(fresh))
        assert plain.copied == len(weights) and fresh.model.norm.weight.data_ptr() == before
    finally:
        plain.close()


def test_the_file_is_reused_while_the_weights_fit_and_removed_on_close(transport):
    small, large = [("w", torch.ones(10))], [("w", torch.ones(1000))]
    first = transport.send(small, {})
    assert transport.send(small, {})["path"] == first["path"]  # no new pages to fault in
    bigger = transport.send(large, {})
    assert bigger["path"] != first["path"] and not Path(first["path"]).exists()
    assert torch.equal(next(vllm_worker.receive(bigger))[1], torch.ones(1000))
    transport.close()
    assert not Path(bigger["path"]).exists()


def test_files_of_processes_that_are_gone_are_removed(transport, tmp_path):
    import subprocess

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    orphan = tmp_path / f"rlgym-weights-{gone.stdout.strip()}-abcd1234.bin"
    alive = tmp_path / f"rlgym-weights-{os.getpid()}-abcd1234.bin"
    orphan.write_bytes(b"x"), alive.write_bytes(b"x")
    transport.send([("w", torch.ones(2))], {})
    assert not orphan.exists() and alive.exists()


def test_bad_handles_and_dtypes_are_refused(transport):
    with pytest.raises(TypeError, match="complex64 cannot be sent"):
        transport.send([("z", torch.zeros(2, dtype=torch.complex64))], {})
    handle = transport.send([("w", torch.ones(4))], {})
    with pytest.raises(ValueError, match="no receiver for weight transport 'pigeon'"):
        vllm_worker.receive({**handle, "transport": "pigeon"})
    bad = dict(handle, tensors=[dict(handle["tensors"][0], offset=handle["size"])])
    with pytest.raises(ValueError, match="do not fit"):
        list(vllm_worker.receive(bad))
    with pytest.raises(ValueError, match="unknown dtype"):
        list(vllm_worker.receive(dict(handle, tensors=[dict(handle["tensors"][0], dtype="str")])))


def test_a_tied_model_sends_its_embedding_once_and_names_the_head_as_tied(tiny_model_dir):
    model = transformers.AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype="float32")
    assert model.lm_head.weight is model.model.embed_tokens.weight
    weights, tied = full_weights(model)
    names = [name for name, _ in weights]
    assert tied == {"lm_head.weight": "model.embed_tokens.weight"}
    assert "lm_head.weight" not in names and len(names) == len(set(names))
    assert set(names) | set(tied) == set(model.state_dict())
    # a saved folder holds the same tensors (a tied head is stored once there too)
    folder, _ = folder_weights(tiny_model_dir)
    assert sorted(name for name, _ in folder) == sorted(names)


def test_the_worker_module_imports_only_the_standard_library():
    # it runs inside the vLLM venv, which has none of rlgym_llm's dependencies
    tree = ast.parse(Path(vllm_worker.__file__).read_text())
    top = {alias.name.split(".")[0] for node in tree.body if isinstance(node, ast.Import) for alias in node.names} | {
        node.module.split(".")[0] for node in tree.body if isinstance(node, ast.ImportFrom) and node.module
    }
    assert top <= set(sys.stdlib_module_names) | {"__future__"}, top


def test_sync_modes_pick_the_path_and_the_server_flags(tiny_model_dir, tmp_path):
    python = sys.executable  # the command line only: no server starts here
    model = transformers.AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype="float32")
    auto = VLLMPolicy(tiny_model_dir, python=python, port=8000)
    cmd = " ".join(auto.server.command())
    assert f"--worker-extension-cls {vllm_worker.EXTENSION_CLS}" in cmd
    assert auto.server.env["VLLM_SERVER_DEV_MODE"] == "1"
    assert auto._mode(model) == "inplace" and auto._mode(tiny_model_dir) == "inplace"
    assert auto._inplace_load() == "reload"  # on CPU: vLLM's packed kernels stay (docs/vllm.md)
    on_gpu = VLLMPolicy(tiny_model_dir, python=python, port=8000, device="cuda")
    assert on_gpu._inplace_load() == "direct"
    assert VLLMPolicy(tiny_model_dir, python=python, port=8000, inplace_load="direct")._inplace_load() == "direct"
    restart = VLLMPolicy(tiny_model_dir, python=python, port=8000, sync="restart")
    assert "--worker-extension-cls" not in restart.server.command() and "VLLM_SERVER_DEV_MODE" not in restart.server.env
    assert restart._mode(model) == "restart"
    auto._inplace_failed = "the worker refused"  # auto gives up on in-place for good after one failure
    assert auto._mode(model) == "restart"

    peft = pytest.importorskip("peft")
    adapter = peft.get_peft_model(model, peft.LoraConfig(r=4, target_modules=["q_proj"]))
    lora = VLLMPolicy(tiny_model_dir, python=python, port=8000, max_lora_rank=4)
    assert lora._mode(adapter) == "lora"
    merged = VLLMPolicy(tiny_model_dir, python=python, port=8000, max_lora_rank=4, sync="inplace")
    assert merged._mode(adapter) == "inplace"  # the adapter merged into full weights
    adapter.save_pretrained(tmp_path / "adapter")
    with pytest.raises(ValueError, match="is a LoRA adapter"):
        auto._mode(tmp_path / "adapter")
    only_lora = VLLMPolicy(tiny_model_dir, python=python, port=8000, max_lora_rank=4, sync="lora")
    with pytest.raises(ValueError, match="syncs LoRA adapters only"):
        only_lora._mode(model)
    with pytest.raises(ValueError, match="choose one of auto, inplace, lora, restart"):
        VLLMPolicy(tiny_model_dir, sync="in-place")
    with pytest.raises(ValueError, match="needs a server with LoRA"):
        VLLMPolicy(tiny_model_dir, sync="lora")


def test_policy_sync_is_a_checked_setting(monkeypatch):
    monkeypatch.setenv("RLGYM_VLLM_PYTHON", sys.executable)  # policy=vllm checks that its venv exists
    assert load_config("train", ["policy=vllm"]).policy.sync == "auto"
    assert load_config("train", ["policy=vllm", "policy.sync=restart"]).policy.sync == "restart"
    with pytest.raises(ConfigError) as e:
        load_config("train", ["policy=vllm", "policy.sync=inplce"])
    assert e.value.problems == [
        "`policy.sync=inplce` is not one of auto, inplace, lora, restart (did you mean 'inplace'?)"
    ]
    with pytest.raises(ConfigError, match=r"set trainer\.lora\.enabled=true"):
        load_config("train", ["policy=vllm", "policy.sync=lora"])
    assert load_config("train", ["policy=vllm", "policy.sync=lora", "trainer.lora.enabled=true"]).policy.sync == "lora"
    with pytest.raises(ConfigError, match="applies to policy=vllm only"):
        load_config("train", ["policy=hf", "policy.sync=inplace"])
    assert load_config("train", ["policy=vllm"]).policy.inplace_load == "auto"
    assert load_config("train", ["policy=vllm", "policy.inplace_load=reload"]).policy.inplace_load == "reload"
    with pytest.raises(ConfigError) as e:
        load_config("train", ["policy=vllm", "policy.inplace_load=fast"])
    assert e.value.problems == ["`policy.inplace_load=fast` is not one of auto, direct, reload"]
    with pytest.raises(ConfigError, match=r"`policy\.inplace_load=reload` applies to policy=vllm only"):
        load_config("train", ["policy=hf", "policy.inplace_load=reload"])
    with pytest.raises(ValueError, match="inplace_load='fast': choose one of auto, direct, reload"):
        VLLMPolicy(Path(__file__), inplace_load="fast")


def test_rl_starts_from_the_warm_up_weights(tmp_path):
    base, out = tmp_path / "base", tmp_path / "run"
    init = tmp_path / "init"
    assert warm_start(load_config("train", ["sft.enabled=false"]), out, base) == base
    assert warm_start(load_config("train", ["sft.enabled=true"]), out, base) == out / "sft_model"
    # sft.init names a folder that does not hold a model yet: the warm-up trains and saves to out
    assert warm_start(load_config("train", [f"sft.init={init}"]), out, base) == out / "sft_model"
    init.mkdir()
    (init / "config.json").write_text("{}")
    assert warm_start(load_config("train", [f"sft.init={init}", "sft.enabled=false"]), out, base) == init

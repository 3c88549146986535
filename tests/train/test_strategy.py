"""The strategy object (`trainer.strategy`): which kind a config selects, what bad values say, and
what the one-process kinds do; the multi-process kinds (DDP, FSDP) run in `test_distributed.py`
and `test_fsdp.py`."""

import copy

import pytest

torch = pytest.importorskip("torch")

from batches import make_batch  # noqa: E402

from rlgym_llm.config import load_config  # noqa: E402
from rlgym_llm.core.errors import ConfigError  # noqa: E402
from rlgym_llm.train.config import TrainerConfig  # noqa: E402
from rlgym_llm.train.distributed import Distributed  # noqa: E402
from rlgym_llm.train.strategy import DDP, Single, decoder_layers, make_strategy  # noqa: E402
from rlgym_llm.train.trainer import OptimConfig, PolicyTrainer  # noqa: E402


@pytest.fixture
def base_model(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    return AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)


def test_auto_selects_what_nproc_selected_before_and_bad_values_say_the_choices():
    assert TrainerConfig().strategy_kind == "single"
    assert TrainerConfig(nproc=2).strategy_kind == "ddp"  # nproc alone selects DDP, as before
    assert TrainerConfig(nproc=2, strategy="fsdp").strategy_kind == "fsdp"
    assert load_config("train", ["trainer.strategy=fsdp", "trainer.nproc=2"]).trainer.strategy_kind == "fsdp"
    with pytest.raises(ConfigError, match="strategy") as e:
        TrainerConfig(strategy="zero3")
    assert "fsdp" in str(e.value)
    with pytest.raises(ConfigError, match="strategy=single with nproc=2"):
        TrainerConfig(strategy="single", nproc=2)
    with pytest.raises(ConfigError, match=r"trainer\.strategy='zero3' is not one of auto, single, ddp, fsdp"):
        make_strategy("zero3")
    two = Distributed(rank=0, world=2)
    assert type(make_strategy("auto", two)) is DDP and type(make_strategy("auto")) is Single
    with pytest.raises(ConfigError, match="2 were started"):
        make_strategy("single", two)


def test_the_cli_refuses_a_bad_strategy_before_starting_anything(capsys):
    from rlgym_llm.cli.main import main

    assert main(["train", "trainer.strategy=deepspeed", "out_dir=/tmp/never-written"]) == 2
    assert "deepspeed" in capsys.readouterr().err


def test_one_process_kinds_share_the_model_with_the_engine(base_model):
    for kind in ("single", "ddp"):  # ddp with one process wraps nothing
        strategy = make_strategy(kind)
        assert strategy.rollout_model(base_model) is base_model
        trainer = PolicyTrainer(base_model, strategy=strategy)
        assert trainer.weights() is base_model and trainer.strategy.passes(3) == 3
    with pytest.raises(ValueError, match="pass the ranks once"):
        PolicyTrainer(base_model, dist=Distributed(), strategy=Single())


def test_decoder_layers_are_found_with_and_without_lora(base_model):
    from peft import LoraConfig, get_peft_model

    assert len(decoder_layers(base_model)) == base_model.config.num_hidden_layers
    peft = get_peft_model(copy.deepcopy(base_model), LoraConfig(r=2, target_modules=["q_proj"]))
    assert [type(m).__name__ for m in decoder_layers(peft)] == ["Qwen2DecoderLayer"] * 4
    with pytest.raises(ConfigError, match="no decoder layers"):
        decoder_layers(torch.nn.Linear(2, 2))


def test_activation_checkpointing_gives_the_same_update(base_model):
    batch = make_batch(base_model, n=4)
    results = []
    for on in (False, True):
        model = copy.deepcopy(base_model)
        trainer = PolicyTrainer(model, optim=OptimConfig(lr=1e-3), micro_batch_size=2, strategy=Single(None, on))
        metrics = trainer.update(batch)
        assert getattr(model, "is_activation_checkpointing", model.is_gradient_checkpointing) == on
        results.append((metrics, model.state_dict()))
    (m0, s0), (m1, s1) = results
    assert m0["loss"] == pytest.approx(m1["loss"], abs=1e-7) and m0["grad_norm"] == pytest.approx(m1["grad_norm"])
    assert max((s0[k] - s1[k]).abs().max().item() for k in s0) < 1e-6

"""FSDP2 (`trainer.strategy=fsdp`) on the CPU with gloo: 2 sharded ranks give the updates of 1
process on the same global batch, sharded checkpoints resume exactly on another number of ranks
and export to a Hugging Face folder, and two torchrun "nodes" (c10d rendezvous on this machine)
train. The processes run `fsdp_worker.py`; all in the slow tier.

Tolerance (also in docs/distributed.md): the 2-rank run sums each gradient in another order (a
reduce-scatter of the ranks' partial sums) than one process does, a float32 rounding difference
that Adam's normalised step carries into the weights: per step the losses agree to 1e-6
(absolute; they are about 0.01-0.5, measured difference up to 6e-8), the grad norms to 1e-4
(relative), and the final weights to 1e-5 (absolute; 5 steps of lr 1e-4 move them by up to 5e-4,
measured difference about 5e-7). SmolLM2-135M (4 rows a step, its gradient norms 20-80 are
clipped to 1): losses to 1e-5, final weights to 1e-4 (measured 5e-6 and 3.4e-5); its test takes
about 2 minutes on 1 CPU core.
"""

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

WORKER = Path(__file__).resolve().parent / "fsdp_worker.py"
WEIGHTS = 1e-5  # max |weight difference| between 2 FSDP ranks and 1 process
LOSS_ABS = 1e-6
NORM_REL = 1e-4

pytestmark = pytest.mark.slow


def _env():
    root = Path(__file__).resolve().parents[2]
    paths = [str(root), str(root / "envs"), str(root / "agents"), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p), "OMP_NUM_THREADS": "1"}


def _worker(nproc: int, *args: str) -> None:
    launch = [sys.executable]
    if nproc > 1:
        launch += ["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}"]
    done = subprocess.run([*launch, str(WORKER), *args], env=_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]


def _load(path: Path) -> dict:
    return torch.load(path, weights_only=False)


def _max_diff(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max((a[k] - b[k]).abs().max().item() for k in a)


def _same_run(one: dict, two: dict, steps: int, loss_abs: float = LOSS_ABS, weights: float = WEIGHTS) -> float:
    assert len(one["metrics"]) == len(two["metrics"]) == steps
    for a, b in zip(one["metrics"], two["metrics"]):
        assert a["loss"] == pytest.approx(b["loss"], rel=0, abs=loss_abs)
        assert a["grad_norm"] == pytest.approx(b["grad_norm"], rel=NORM_REL)
        assert a["tokens"] == b["tokens"]
    diff = _max_diff(one["state"], two["state"])
    assert diff < weights
    return diff


@pytest.mark.parametrize("flags", [(), ("lora", "ac", "kl")], ids=["full", "lora-ac-kl"])
def test_fsdp_on_two_ranks_matches_one_process_for_5_steps(tmp_path, flags):
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir(), two.mkdir()
    _worker(1, "train", str(one), "single", "5", *flags)
    _worker(2, "train", str(two), "fsdp", "5", *flags)
    a, b = _load(one / "train.pt"), _load(two / "train.pt")
    diff = _same_run(a, b, 5)
    print(f"FSDP 2 ranks vs 1 process ({'+'.join(flags) or 'full'}): max weight difference {diff:.2e}")
    assert b["engine_equal"]  # the generation copy holds the gathered weights
    moved = _max_diff(a["state"], _initial_state(flags))
    assert moved > 10 * WEIGHTS  # the 5 steps did train, well beyond the tolerance


@pytest.mark.timeout(600)
def test_fsdp_on_two_ranks_matches_one_process_for_5_steps_of_smollm2(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir(), two.mkdir()
    _worker(1, "train", str(one), "single", "5", "smollm2")
    _worker(2, "train", str(two), "fsdp", "5", "smollm2")
    diff = _same_run(_load(one / "train.pt"), _load(two / "train.pt"), 5, loss_abs=1e-5, weights=1e-4)
    print(f"SmolLM2-135M, FSDP 2 ranks vs 1 process: max weight difference {diff:.2e}")


def _initial_state(flags) -> dict:
    sys.path.insert(0, str(WORKER.parent))
    from fsdp_worker import _model

    return _model("lora" in flags).state_dict()


def test_a_sharded_checkpoint_of_2_ranks_resumes_on_2_and_on_1_and_exports(tmp_path):
    _worker(2, "save", str(tmp_path), "fsdp")
    ref = _load(tmp_path / "save.pt")
    step = tmp_path / "ckpt" / "step_000002"
    assert (step / "dcp" / ".metadata").exists() and "model" not in _load(step / "trainer.pt")
    assert len(list((step / "dcp").glob("*.distcp"))) == 2  # each rank wrote its own shards
    _worker(2, "resume", str(tmp_path), "fsdp")
    same = _load(tmp_path / "resume_fsdp_2.pt")
    assert [m["loss"] for m in same["metrics"]] == [m["loss"] for m in ref["metrics"]]  # exact on 2 ranks
    assert _max_diff(same["state"], ref["state"]) == 0.0
    for kind in ("fsdp", "single"):  # 2 -> 1 rank, sharded or not
        _worker(1, "resume", str(tmp_path), kind)
        _same_run(ref, _load(tmp_path / f"resume_{kind}_1.pt"), 2)

    # export: the checkpoint's weights, whole, in a Hugging Face folder that transformers loads
    from transformers import AutoModelForCausalLM

    from rlgym_llm.recipes.export import load_weights
    from rlgym_llm.rollout.tiny_model import build_tiny_model

    model = load_weights(AutoModelForCausalLM.from_pretrained(build_tiny_model()), step)
    model.save_pretrained(tmp_path / "hf")
    again = AutoModelForCausalLM.from_pretrained(tmp_path / "hf").state_dict()
    assert _max_diff({k: again[k] for k in ref["state2"]}, ref["state2"]) == 0.0


@pytest.mark.parametrize("kind", ["fsdp", "single"])
def test_a_checkpoint_of_1_process_resumes_on_2_sharded_ranks(tmp_path, kind):
    # fsdp: a sharded (DCP) checkpoint of 1 rank; single: the whole-state trainer.pt format
    _worker(1, "save", str(tmp_path), kind)
    ref = _load(tmp_path / "save.pt")
    _worker(2, "resume", str(tmp_path), "fsdp")
    _same_run(ref, _load(tmp_path / "resume_fsdp_2.pt"), 2)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def test_two_torchrun_nodes_with_c10d_rendezvous_train_with_fsdp(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir(), two.mkdir()
    endpoint = f"localhost:{_free_port()}"
    node = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes=2",
        "--nproc-per-node=1",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={endpoint}",
        "--rdzv-id=fsdp-test",
        str(WORKER),
        "train",
        str(two),
        "fsdp",
        "2",
    ]
    # two torchrun agents, as on two machines: the first to reach the endpoint hosts the store
    nodes = [
        subprocess.Popen(node, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in "ab"
    ]
    outs = [p.communicate(timeout=600) for p in nodes]
    for p, (_, err) in zip(nodes, outs):
        assert p.returncode == 0, err[-4000:]
    _worker(1, "train", str(one), "single", "2")
    diff = _same_run(_load(one / "train.pt"), _load(two / "train.pt"), 2)
    print(f"2 torchrun nodes x 1 process (FSDP) vs 1 process: max weight difference {diff:.2e}")


@pytest.mark.parametrize("credit", ["turn_grpo", "igpo"])
def test_rlgym_train_with_fsdp_on_two_processes_trains_as_one_process(tmp_path, credit):
    # the whole run: rollouts from each rank's full copy, credit, sharded update, weight refresh, a
    # sharded checkpoint, and the final export from it; IGPO's turn rewards are scored by the policy
    # model (rank 0's full copy, refreshed after every update: step 2's credit reads step 1's weights)
    from test_distributed import CLI, _metrics, _same_records
    from transformers import AutoModelForCausalLM

    one, two = tmp_path / "one", tmp_path / "two"
    cli = [sys.executable, "-m", "rlgym_llm.cli.main", "train", *CLI, f"credit={credit}"]
    for out, more in ((one, ["trainer.sampling_seeds=episode"]), (two, ["trainer.nproc=2", "trainer.strategy=fsdp"])):
        done = subprocess.run([*cli, f"out_dir={out}", *more], env=_env(), capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-4000:]
    assert (two / "checkpoints" / "step_000002" / "dcp" / ".metadata").exists()
    a, b = _metrics(two), _metrics(one)
    # the grad norm is summed from the shards in another order: its own tolerance (module docstring)
    assert [r.pop("grad_norm") for r in a] == pytest.approx([r.pop("grad_norm") for r in b], rel=NORM_REL)
    if credit == "igpo":
        # IGPO's turn rewards are differences of answer probabilities, normalised per group: step 2's
        # credit turns the ~1e-7 weight difference after step 1 into ~1e-5 relative differences in
        # its advantages and loss (DDP on 2 processes does the same: loss 0.0243965 vs 0.0243990)
        for x, y in zip(a[1:], b[1:]):
            for k in ("loss", "adv_std", "entropy"):
                assert x.pop(k) == pytest.approx(y.pop(k), rel=1e-3), k
    _same_records(a, b)
    a, b = (AutoModelForCausalLM.from_pretrained(d / "final_model").state_dict() for d in (one, two))
    diff = _max_diff(a, b)
    print(f"rlgym train, fsdp on 2 processes vs 1 process: max weight difference {diff:.2e}")
    assert diff < WEIGHTS

"""Data-parallel training (`trainer.nproc`, torch.distributed with gloo on CPU): 2 processes with the
same global batch give the update of 1 process, the RL loop on 2 ranks matches 1 process step for
step and resumes across process counts, and the settings that cannot run on several processes are
refused with their fix. The 2-process runs start under torchrun (`tests/train/ddp_worker.py`, the
`rlgym train` CLI) and are in the slow tier."""

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from rlgym_llm.cli.main import main  # noqa: E402
from rlgym_llm.config import load_config  # noqa: E402
from rlgym_llm.core.errors import ConfigError  # noqa: E402
from rlgym_llm.rollout.policy import Episode, EpisodeSeededPolicy, SamplingParams, episode_seed  # noqa: E402
from rlgym_llm.train.config import TrainerConfig  # noqa: E402
from rlgym_llm.train.distributed import Distributed  # noqa: E402

WORKER = Path(__file__).resolve().parent / "ddp_worker.py"
TOLERANCE = 1e-5  # max |weight difference| between 1 and 2 processes
TIMING = ("time_", "cpu_", "tokens_per_s")


# ---- the fast tier: what needs no second process --------------------------------------------


def test_nproc_refuses_what_runs_in_one_process_only_with_the_fix():
    with pytest.raises(ConfigError) as e:
        TrainerConfig(nproc=2, off_policy_steps=1, tasks_per_step=1, sampling_seeds="calls")
    problems = "\n".join(e.value.problems)
    assert "trainer.off_policy_steps=0" in problems
    assert "trainer.tasks_per_step >= 2" in problems
    assert "trainer.sampling_seeds=episode" in problems
    with pytest.raises(ConfigError, match="nproc=0 must be >= 1"):
        TrainerConfig(nproc=0)
    assert TrainerConfig(nproc=2).episode_seeds and not TrainerConfig().episode_seeds
    assert TrainerConfig(sampling_seeds="episode").episode_seeds


def test_the_cli_refuses_an_invalid_nproc_config_before_starting_any_process(capsys):
    assert main(["train", "trainer.nproc=2", "trainer.off_policy_steps=1", "out_dir=/tmp/never-written"]) == 2
    assert "sampling ahead runs in one process only" in capsys.readouterr().err
    cfg = load_config("train", ["trainer.nproc=2", "out_dir=/tmp/never-written"])
    assert cfg.trainer.nproc == 2


def test_a_process_count_other_than_torchruns_is_refused(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with pytest.raises(ConfigError, match="torchrun --nproc_per_node 2"):
        Distributed.start(2)
    one = Distributed.start(1)
    assert one.main and not one.enabled and one.gather([1, 2]) == [1, 2] and one.broadcast("x") == "x"


def test_shards_are_contiguous_blocks_in_rank_order():
    for n in range(0, 9):
        for world in (1, 2, 3):
            blocks = [Distributed(rank=r, world=world).shard(n) for r in range(world)]
            assert [i for lo, hi in blocks for i in range(lo, hi)] == list(range(n))
            assert max(hi - lo for lo, hi in blocks) - min(hi - lo for lo, hi in blocks) <= 1


def test_episode_seeds_depend_on_the_episode_not_on_the_order_of_calls():
    class Recorder:
        def __init__(self):
            self.seeds = []

        async def generate(self, ids, sampling):
            self.seeds.append(sampling.seed)

    inner = Recorder()
    policy = EpisodeSeededPolicy(inner, base=7)
    a, b = policy.start(Episode(None, 3, [], sample=0)), policy.start(Episode(None, 3, [], sample=1))

    async def play(order):
        for p in order:
            await p.generate([1], SamplingParams())

    asyncio.run(play([a, b, a]))  # calls interleaved across the two episodes
    assert inner.seeds == [episode_seed(7, 3, 0, 0), episode_seed(7, 3, 1, 0), episode_seed(7, 3, 0, 1)]
    assert len(set(inner.seeds)) == 3 and all(0 <= s < 2**31 for s in inner.seeds)
    assert episode_seed(7, 3, 0, 0) == episode_seed(7, 3, 0, 0) != episode_seed(8, 3, 0, 0)


# ---- the slow tier: 2 processes under torchrun -----------------------------------------------


def _env():
    # the worker imports the project from this checkout, as the tests do
    root = Path(__file__).resolve().parents[2]
    paths = [str(root), str(root / "envs"), str(root / "agents"), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p), "PYTHONHASHSEED": "0"}


def _worker(nproc: int, *args: str) -> None:
    launch = [sys.executable]
    if nproc > 1:
        launch += ["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}"]
    done = subprocess.run([*launch, str(WORKER), *args], env=_env(), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]


def _max_diff(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max((a[k] - b[k]).abs().max().item() for k in a)


def _weights(out: Path, step: int) -> dict:
    return torch.load(out / "checkpoints" / f"step_{step:06d}" / "trainer.pt", weights_only=False)["model"]


def _metrics(out: Path) -> list[dict]:
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if not k.startswith(TIMING) and not k.endswith(TIMING)} for r in rows]


def _same_records(a: list[dict], b: list[dict]) -> None:
    """Equal records, floats to 1e-5 (the losses are sums over the ranks' shares)."""
    assert [r.keys() for r in a] == [r.keys() for r in b]
    for x, y in zip(a, b):
        for k in x:
            if isinstance(x[k], float):
                assert x[k] == pytest.approx(y[k], rel=1e-5, abs=1e-7), (k, x[k], y[k])
            else:
                assert x[k] == y[k], (k, x[k], y[k])


@pytest.mark.slow
def test_two_processes_give_the_update_of_one_on_the_same_batch(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir(), two.mkdir()
    _worker(1, "trainer", str(one))
    _worker(2, "trainer", str(two))
    a = torch.load(one / "trainer.pt", weights_only=False)
    b = torch.load(two / "trainer.pt", weights_only=False)
    # token-mean, seq-mean-token-mean, seq-mean-token-sum-norm split unevenly over the ranks, with
    # micro-batches; the last case gives rank 1 no row at all (it joins the averaging with nothing)
    for case in a:
        base = a[case]["grads"]
        scale = max(g.abs().max().item() for g in base.values())
        assert _max_diff(base, b[case]["grads"]) < 1e-6 * scale
        diff = _max_diff(a[case]["state"], b[case]["state"])
        print(f"case {case}: max weight difference 1 vs 2 processes {diff:.2e}")
        assert diff < TOLERANCE
        for k in ("loss", "pg_loss", "entropy", "grad_norm", "tokens", "clip_frac", "approx_kl"):
            assert a[case]["metrics"][k] == pytest.approx(b[case]["metrics"][k], rel=1e-5, abs=1e-7), k


@pytest.mark.slow
def test_the_loop_on_two_processes_matches_one_and_resumes_across_process_counts(tmp_path):
    one, two_one, one_two = tmp_path / "one", tmp_path / "two_then_one", tmp_path / "one_then_two"
    _worker(1, "loop", str(one), "4")
    records = _metrics(one)
    # the scripted engine answers right and wrong within groups: nonzero advantages, and one step
    # drops a tied group and refills it from new tasks (the ranks train on different numbers of
    # trajectories; the refill's single task leaves rank 1 with none in that draw)
    assert all(r["adv_std"] > 0 and not r["skipped_update"] for r in records)
    assert any(r["refill_groups"] > 0 for r in records)

    _worker(2, "loop", str(two_one), "2")  # 2 processes for steps 1-2 ...
    assert json.loads((two_one / "checkpoints" / "step_000002" / "state.json").read_text())["nproc"] == 2
    assert _max_diff(_weights(one, 2), _weights(two_one, 2)) < TOLERANCE
    _worker(1, "loop", str(two_one), "4")  # ... then 1 process for steps 3-4

    shutil.copytree(one, one_two)  # 1 process for steps 1-2 (the same run), then 2 processes
    for step in (3, 4):
        shutil.rmtree(one_two / "checkpoints" / f"step_{step:06d}")
    _worker(2, "loop", str(one_two), "4")

    for resumed in (two_one, one_two):
        _same_records(_metrics(resumed), records)
        diff = _max_diff(_weights(one, 4), _weights(resumed, 4))
        print(f"{resumed.name}: max weight difference after 4 steps {diff:.2e}")
        assert diff < TOLERANCE
    assert _max_diff(_weights(one, 2), _weights(one, 4)) > 1e-4  # steps 3-4 did train


CLI = [
    "sft.episodes=8",
    "sft.steps=3",  # rank 0 warms up, the other rank loads its weights
    "sft.idle_prob=0",
    "trainer.steps=2",
    "trainer.tasks_per_step=2",
    "trainer.group_size=3",
    "trainer.micro_batch_size=2",
    "trainer.eval_tasks=2",
    "trainer.loss.entropy_coef=0.01",
    "trainer.filter_zero_variance=false",
    "trainer.threads=1",
    "env.max_turns=2",
    "policy.max_context=256",
    "policy.sampling.max_tokens=10",
    "progress=false",
]


@pytest.mark.slow
def test_rlgym_train_nproc_2_starts_torchrun_and_trains_as_one_process(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    cli = [sys.executable, "-m", "rlgym_llm.cli.main", "train", *CLI]
    done = subprocess.run(
        [*cli, f"out_dir={one}", "trainer.sampling_seeds=episode"], env=_env(), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-4000:]
    done = subprocess.run([*cli, f"out_dir={two}", "trainer.nproc=2"], env=_env(), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.count("rlgym train:") == 1  # rank 0 alone prints the summary
    # ... and writes the logs: one TensorBoard event file, as one process does
    assert len(list((two / "tb").glob("events.*"))) == len(list((one / "tb").glob("events.*")))
    _same_records(_metrics(two), _metrics(one))
    diff = _max_diff(_weights(one, 2), _weights(two, 2))
    print(f"rlgym train: max weight difference 1 vs 2 processes {diff:.2e}")
    assert diff < TOLERANCE
    summary_one, summary_two = (json.loads((d / "summary.json").read_text()) for d in (one, two))
    assert summary_one["before"] == summary_two["before"] and summary_one["after"] == summary_two["after"]
    # resuming in 1 process changes the kind of sampling seeds (auto: calls there), which is refused;
    # the saved config alone (resume=RUN, no nproc) would resume on 2 processes
    again = subprocess.run(
        [*cli, f"resume={two}", "trainer.steps=3", "trainer.nproc=1"],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert again.returncode == 2 and "trainer.sampling_seeds=episode" in again.stderr


@pytest.mark.slow
@pytest.mark.vllm
@pytest.mark.timeout(1800)
def test_two_processes_share_one_vllm_server_and_train_as_one_process(vllm_python, tmp_path):
    # rank 0 (local rank 0) starts the server and syncs it in place; rank 1 sends its requests to it
    env = {**_env(), "RLGYM_VLLM_PYTHON": str(vllm_python)}
    one, two = tmp_path / "one", tmp_path / "two"
    cli = [sys.executable, "-m", "rlgym_llm.cli.main", "train", *CLI, "sft.enabled=false", "policy=vllm"]
    for out, more in ((one, "trainer.sampling_seeds=episode"), (two, "trainer.nproc=2")):
        done = subprocess.run([*cli, f"out_dir={out}", more], env=env, capture_output=True, text=True, timeout=1500)
        assert done.returncode == 0, done.stderr[-4000:]
    assert (two / "metrics.jsonl").exists()
    a, b = _metrics(one), _metrics(two)
    # the same tokens sampled (per-request seeds): the same rewards and trained tokens
    assert [(r["reward"], r["trained_on"], r["trajectories"]) for r in a] == [
        (r["reward"], r["trained_on"], r["trajectories"]) for r in b
    ]
    diff = _max_diff(_weights(one, 2), _weights(two, 2))
    print(f"policy=vllm: max weight difference 1 vs 2 processes {diff:.2e}")
    assert diff < TOLERANCE


def test_the_torchrun_command_fixes_the_run_folder_and_keeps_every_other_argument():
    import argparse

    from rlgym_llm.cli.train import torchrun_command

    args = argparse.Namespace(
        overrides=["trainer.nproc=2", "out_dir=runs/x", "env=math"], config_dir="cfgs", config_path=["mine"]
    )
    argv = torchrun_command(args, 2, "runs/2026-11-27_18-00-00")
    assert argv[1:5] == ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    assert argv[5:8] == ["-m", "rlgym_llm.cli.main", "train"]
    assert argv[8:] == [
        "--config-dir",
        "cfgs",
        "--config-path",
        "mine",
        "trainer.nproc=2",
        "env=math",
        "out_dir=runs/2026-11-27_18-00-00",
    ]

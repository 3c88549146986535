"""The distinct task is the unit of an evaluation: seeds that draw the same task merge into one task,
reports state distinct tasks next to episodes, and intervals resample distinct tasks."""

import hashlib
import json
import re
from pathlib import Path

import gymnasium
import numpy as np
import pytest

import rlgym_llm
from rlgym_llm.cli.train import held_out_scope
from rlgym_llm.core.types import Failure, FailureKind, Trajectory
from rlgym_llm.eval import metrics
from rlgym_llm.eval.report import render_markdown, write_report
from rlgym_llm.eval.runner import EvalResult, evaluate, summarize
from rlgym_llm.rollout.manager import RolloutConfig, RolloutManager
from rlgym_llm.testing.policies import ScriptedPolicy
from rlgym_llm.testing.toy import CounterEnv

ROOT = Path(__file__).resolve().parents[2]
COUNTER = "test/TaskUnitCounter-v0"


def _traj(seed, reward, key=None, task_id=None, split="test"):
    t = Trajectory(env_id="x/Y-v0", seed=seed, task_id=f"task-{seed}" if task_id is None else task_id)
    t.outcome = {"reward": reward}
    if key is not None:
        t.metadata["task_key"] = key
    if split:
        t.metadata["split"] = split
    return t


def _sixty_four(tasks):
    """16 seeds x 4 samples; seed s draws task s % `tasks`, and task j succeeds on j of every 4 samples."""
    return [
        _traj(s, float((i + s) % 4 < s % tasks), key=f"content-{s % tasks}", task_id=f"task-{s % tasks}")
        for s in range(100, 116)
        for i in range(4)
    ]


def _loop_interval(values, reps=2000, seed=0, confidence=0.95):
    """The reference: a percentile bootstrap over the units' scores, one replicate per loop pass."""
    rows = np.random.default_rng(seed).integers(0, len(values), size=(reps, len(values)))
    boot = []
    for row in rows:
        total = 0.0
        for i in row:
            total += values[i]
        boot.append(total / len(row))
    alpha = 1 - confidence
    low, high = np.percentile(boot, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return sum(values) / len(values), low, high


def test_64_episodes_of_5_distinct_tasks_are_5_units(tmp_path):
    result = summarize(_sixty_four(5), samples=4, ks=[1, 2, 4], reps=2000, seed=0)
    assert (result.num_tasks, result.episodes, result.num_seeds, result.split) == (5, 64, 16, "test")
    # task j is drawn by the seeds s with s % 5 == j, in order; its samples are theirs, pooled
    by_content = {t.key: t for t in result.tasks}
    for j in range(5):
        task = by_content[f"content-{j}/task-{j}"]
        assert task.seeds == [s for s in range(100, 116) if s % 5 == j]
        assert len(task.successes) == 4 * len(task.seeds) and task.success_rate == pytest.approx(j / 4)
    # each distinct task counts once: the mean of the 5 task rates, not of the 64 episodes
    point, low, high = _loop_interval([j / 4 for j in range(5)])  # the tasks in the order seeds 100-104 drew them
    assert (result.success.point, result.success.low, result.success.high) == pytest.approx((point, low, high))
    episodes = [float(s) for t in result.tasks for s in t.successes]
    assert point == 0.5 and np.mean(episodes) == 30 / 64  # each task weighs once, whatever its seeds
    # pass@1 is the success rate, with the same interval
    p1 = result.pass_at_k_ci[1]
    assert (p1.point, p1.low, p1.high) == pytest.approx((point, low, high))
    # the interval of 5 units is far wider than one that took the 64 episodes as independent
    naive = metrics.unit_interval_estimate(episodes)
    assert result.success.high - result.success.low > 1.5 * (naive.high - naive.low)

    text = result.summary()
    assert "5 distinct tasks (test split), 64 episodes (16 seeds x 4 samples; seeds that drew the same task" in text
    assert "bootstrap over the 5 distinct tasks" in text and "only 5 distinct tasks" in text
    files = write_report(result, tmp_path / "report", plots=False)
    data = json.loads(files["json"].read_text())
    assert (data["num_tasks"], data["episodes"], data["num_seeds"], len(data["tasks"])) == (5, 64, 16, 5)
    assert data["tasks"][0]["seeds"] == [100, 105, 110, 115]
    assert EvalResult.from_dict(data).to_dict() == data
    md = files["markdown"].read_text()
    assert "**5 distinct tasks (test split), 64 episodes**" in md and "CIs over the 5 distinct tasks" in md
    assert "| 100, 105, 110, 115 | task-0 | 0/16 |" in md


def test_the_control_64_distinct_tasks_are_64_units():
    # the same 64 outcomes, each episode its own task (one sample per seed)
    outcomes = [float((i + s) % 4 < s % 5) for s in range(100, 116) for i in range(4)]
    trajs = [_traj(1000 + k, r, key=f"content-{k}", task_id=f"task-{k}") for k, r in enumerate(outcomes)]
    result = summarize(trajs, samples=1, ks=[1], reps=2000, seed=0)
    assert (result.num_tasks, result.episodes, result.num_seeds) == (64, 64, 64)
    point, low, high = _loop_interval(outcomes)
    assert (result.success.point, result.success.low, result.success.high) == pytest.approx((point, low, high))
    assert "64 distinct tasks (test split), 64 episodes (64 seeds x 1 sample)" in result.summary()
    assert "only" not in result.summary() and "seeds that drew the same task" not in result.summary()
    # keyed by content, the very same outcomes are 5 units
    assert summarize(_sixty_four(5), samples=4, reps=200).num_tasks == 5


def test_seeds_that_draw_the_same_task_merge_and_pool_their_samples():
    # seeds 1 and 3 drew one task; seed 3's second sample failed before its reset recorded anything
    lost = _traj(3, 0.0, task_id="", split="")
    lost.failures.append(Failure(FailureKind.ENV, "EnvError", "reset failed"))
    a, b = {"key": "a", "task_id": "task-a"}, {"key": "b", "task_id": "task-b"}
    trajs = [_traj(1, 1.0, **a), _traj(1, 0.0, **a), _traj(2, 1.0, **b), _traj(2, 1.0, **b), _traj(3, 1.0, **a), lost]
    result = summarize(trajs, samples=2, ks=[1, 2, 4, 8], reps=200)
    assert [(t.key, t.seeds, t.successes) for t in result.tasks] == [
        ("a/task-a", [1, 3], [True, False, True, False]),
        ("b/task-b", [2], [True, True]),
    ]
    assert result.tasks[0].failures == ["env: EnvError"]
    # pass@k averages the distinct tasks: a has n=4, c=2, b n=2, c=2; k=4 needs 4 samples of every task
    assert result.pass_at_k == pytest.approx({1: (0.5 + 1.0) / 2, 2: (1 - 1 / 6 + 1.0) / 2})
    assert result.success.point == pytest.approx(0.75)  # the tasks' rates 0.5 and 1.0, not 4 of 6 episodes


def test_one_prompt_without_a_task_key_is_still_told_apart_by_the_task_id():
    # GuessNumberEnv's tasks share their prompt (the content key) and differ by the hidden number in their id
    shared = hashlib.sha256(b"I am thinking of a number").hexdigest()[:16]
    trajs = [_traj(1, 1.0, shared, "guess-101"), _traj(2, 0.0, shared, "guess-202"), _traj(3, 1.0, shared, "guess-101")]
    assert [t.seeds for t in summarize(trajs, 1, reps=50).tasks] == [[1, 3], [2]]


def test_without_a_content_key_the_task_id_and_then_the_seed_decide():
    by_id = [_traj(1, 1.0, task_id="same"), _traj(2, 0.0, task_id="same"), _traj(3, 1.0, task_id="other")]
    assert [t.seeds for t in summarize(by_id, 1, reps=50).tasks] == [[1, 2], [3]]
    by_seed = [_traj(s, 1.0, task_id="") for s in (1, 2, 3)]
    assert summarize(by_seed, 1, reps=50).num_tasks == 3


def test_a_result_saved_before_the_merge_reads_back_with_one_seed_per_task():
    data = summarize([_traj(1, 1.0, "a", "task-a"), _traj(2, 0.0, "b", "task-b")], 1, reps=50).to_dict()
    for t in data["tasks"]:
        del t["seeds"], t["key"]
    for k in ("num_seeds", "split", "pass_at_k_ci"):
        del data[k]
    data["samples_per_task"] = data.pop("samples_per_seed")
    old = EvalResult.from_dict(data)
    assert [t.seeds for t in old.tasks] == [[1], [2]] and old.num_seeds == 2
    assert "2 distinct tasks, 2 episodes" in render_markdown(old, plots=False)


def test_plots_are_titled_with_distinct_tasks_and_episodes(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from rlgym_llm.eval import plots

    titles = []
    real = plots._pyplot

    def recording():
        plt = real()
        monkeypatch.setattr(plt.Figure, "suptitle", lambda self, t, **kw: titles.append(t), raising=True)
        return plt

    monkeypatch.setattr(plots, "_pyplot", recording)
    result = summarize(_sixty_four(5), samples=4, ks=[1, 2], reps=200)
    plots.plot_scores(result, tmp_path / "scores.png")
    assert titles == ["x/Y-v0: 5 distinct tasks (test split), 64 episodes"]


@pytest.fixture(scope="module")
def counter():
    rlgym_llm.register(COUNTER, CounterEnv, max_turns=2)
    yield
    gymnasium.registry.pop(COUNTER, None)


def _counter_player(tokenizer):
    """Adds the target and submits; submits at once on target 3, which fails."""

    def respond(prompt: str) -> str:
        target = int(re.findall(r"to exactly (\d+)", prompt)[0])
        done = "counter = " in prompt.rsplit("<|im_start|>user", 1)[-1]
        if done or target == 3:
            return '<tool_call>{"name": "submit", "arguments": {}}</tool_call>'
        return '<tool_call>{"name": "add", "arguments": {"amount": ' + str(target) + "}}</tool_call>"

    return ScriptedPolicy(tokenizer, respond)


def _targets(seeds):
    env = CounterEnv(max_target=3)
    out = {}
    for s in seeds:
        env.reset(seed=s)
        out[s] = env.task.meta["target"]
    return out, env


ROLLOUT = RolloutConfig(max_turns=2, max_context=512, token_check="off", env_in_thread=False, retry_backoff_s=0.0)


def test_evaluate_merges_the_seeds_of_a_real_env_by_content(counter, tiny_tokenizer):
    from rlgym_agents.tool_calling import ToolCallingAgent

    seeds = range(500, 510)
    targets, env = _targets(seeds)
    result = evaluate(
        COUNTER,
        ToolCallingAgent(tiny_tokenizer),
        _counter_player(tiny_tokenizer),
        seeds=seeds,
        samples=2,
        env_kwargs={"max_target": 3},
        rollout=ROLLOUT,
        ks=[1, 2],
        reps=200,
    )
    distinct = list(dict.fromkeys(targets.values()))  # in the order of the first seed that drew each
    assert result.num_tasks == len(distinct) < 10 and (result.num_seeds, result.episodes) == (10, 20)
    assert result.split == env.split  # what the env's reset said
    for task, target in zip(result.tasks, distinct):
        assert task.seeds == [s for s in seeds if targets[s] == target]
        env.reset(options={"target": target})
        content = hashlib.sha256(env.task.content_key().encode()).hexdigest()[:16]
        assert task.key == f"{content}/{env.task.id}"
        assert task.successes == [target != 3] * len(task.successes)
    assert result.success.point == pytest.approx(np.mean([t != 3 for t in distinct]))
    assert f"{len(distinct)} distinct tasks ({env.split} split), 20 episodes (10 seeds x 2 samples" in result.summary()


def test_the_held_out_measure_of_training_counts_distinct_tasks(counter, tiny_tokenizer):
    from rlgym_agents.tool_calling import ToolCallingAgent
    from rlgym_llm.train.loop import evaluate as held_out

    seeds = list(range(500, 510))
    targets, _ = _targets(seeds)
    config = RolloutConfig(**{**ROLLOUT.__dict__, "group_size": 1})
    agent = ToolCallingAgent(tiny_tokenizer)
    manager = RolloutManager(COUNTER, agent, _counter_player(tiny_tokenizer), config, env_kwargs={"max_target": 3})
    with manager:
        measure = held_out(manager, seeds)
    assert measure["tasks"] == len(set(targets.values())) and measure["episodes"] == 10
    assert measure["success"] == pytest.approx(np.mean([targets[s] != 3 for s in seeds]))
    assert held_out_scope([measure, None], 10) == f"{measure['tasks']} distinct tasks, 10 episodes"
    assert held_out_scope([None, {"success": 0.5}], 96) == "96 episodes"  # a measure that predates the count
    assert held_out_scope([{"tasks": 1}], 1) == "1 distinct task, 1 episode"


@pytest.fixture()
def bench(tmp_path, monkeypatch, load_benchmark):
    """benchmarks/learning's env_gain and counter_gain, writing into tmp_path."""
    modules = {}
    for name in ("env_gain", "counter_gain"):
        module = load_benchmark(name)
        monkeypatch.setattr(module, "RESULTS", tmp_path / "results")
        modules[name] = module
    monkeypatch.setattr(modules["env_gain"], "RUNS", tmp_path / "no_runs")
    monkeypatch.setattr(modules["counter_gain"], "ROOT", tmp_path)
    return modules


def test_learning_results_state_distinct_tasks_and_episodes(bench):
    from run import heldout_size

    summary = {
        "before": {"success": 0.5, "failed": 2.0, "tasks": 5, "episodes": 94},
        "after": {"success": 0.7, "failed": 0.0, "tasks": 5, "episodes": 96},
    }
    size = heldout_size(summary)
    assert size == {"heldout_tasks": 5, "heldout_episodes": 96}
    assert heldout_size({"before": {"success": 0.5}, "after": {"success": 0.7}})["heldout_tasks"] is None
    run = {"seed": 0, "before": 0.5, "after": 0.7, "curve": [], "train_success": [0.4], "updates": 1, "steps": 1}
    runs = [{**run, "wall_s": 1.0, **size}, {**run, "seed": 1, "wall_s": 1.0}]
    text = bench["env_gain"].write("search", runs, "cmd", steps=1).read_text()
    assert "Held-out measure: 5 distinct tasks, 96 episodes per run (1 of 2 runs predate the count)" in text

    cg = bench["counter_gain"]
    sft = {"loss_first": 1.0, "loss_last": 0.5, "success_after": 0.4, "held_out_tasks": 5, "held_out_episodes": 96}
    (cg.folder(cg.QUICK) / "sft").mkdir(parents=True)
    (cg.folder(cg.QUICK) / "sft" / "sft_summary.json").write_text(json.dumps(sft))
    row = {"method": "grpo", "seed": 0, "before": 0.4, "after": 0.6, "gain": 0.2, "passed": True, "wall_s": 1.0}
    row |= {"turns_first3": 2.0, "turns_last3": 2.0, "updates_first3": 1, "updates": 2, **size}
    text = cg.write(cg.QUICK, [row], "cmd").read_text()
    assert "held-out success 0.400 on 5 distinct tasks (96 episodes)" in text
    assert "5 distinct tasks, 96 episodes per run" in text
    # a warm-up summary written before the count held the episodes in `held_out_tasks`
    assert cg._sft_scope({"held_out_tasks": 96}) == "96 episodes (distinct tasks not recorded)"

"""The credit-assignment diagnostic suite (benchmarks/credit): each task isolates its property, the policy
trains through the library's credit and loss code, and the report's statistics say what they claim."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from rlgym_llm.credit import METHODS, compute_advantages, step_group_sizes
from rlgym_llm.credit.trajectories import anchor_keys


@pytest.fixture()
def suite(load_benchmark):
    tasks = load_benchmark("tasks", folder="credit")
    agent = load_benchmark("agent", folder="credit")
    suite = load_benchmark("suite", "credit_suite", folder="credit")
    return tasks, agent, suite


def all_settings(tasks):
    return [(name, k) for name, cls in tasks.TASKS.items() for k in cls.knobs]


def oracle_act(task, tasks):
    """A policy that reads the observation: the cue's right action, the farm never; info: ask each bit in
    turn, then copy what was revealed."""
    inv = {start: name for name, (start, _) in task.f.blocks.items()}

    def block_of(fid):
        start = max(s for s in inv if s <= fid)
        return inv[start], fid - start

    asked = {"n": 0}

    def act(features, n):
        blocks = dict(block_of(f) for f in features)
        if task.name == "info":
            if "astate" in blocks:
                status = blocks["astate"] % 3
                return max(status - 1, 0)
            q = asked["n"] % task.knob
            asked["n"] += 1
            return q
        if "cue" not in blocks:  # a noise turn: any action
            return 0
        return tasks.rule(blocks["cue"], task.n_actions - (task.name == "subgoals"))

    return act


def test_splits_are_disjoint_by_content_and_big_enough(suite):
    tasks, _, _ = suite
    for name, k in all_settings(tasks):
        task = tasks.make_task(name, k)
        train, test = task.pool("train"), task.pool("test")
        assert not set(train) & set(test), (name, k)
        assert len(set(train)) == len(train) and len(set(test)) == len(test)
        assert len(train) >= 150 and len(test) >= 50, (name, k, len(train), len(test))
        assert all(tasks.content_split(task.split_key(c), name) == "test" for c in test)
        # the test pool's cues are uniform over the actions they call for (no skew for a blind policy)
        if name not in ("info",):
            cues = [c[0] for c in test] if name in ("control", "delay") else [c[-1] for c in test]
            counts = np.bincount(cues, minlength=tasks.N_CUES)
            assert counts.min() == counts.max(), (name, k, counts)
    with pytest.raises(ValueError, match="split"):
        tasks.make_task("control", 2).pool("val")


def test_an_observing_policy_solves_every_task(suite):
    # the information to succeed is in the observations (control: a task nobody can solve isolates nothing)
    tasks, _, _ = suite
    rng = np.random.default_rng(0)
    for name, k in all_settings(tasks):
        task = tasks.make_task(name, k)
        for content in task.pool("test")[:20]:
            ep = task.play(content, oracle_act(task, tasks), rng)
            assert ep.reward == 1.0, (name, k, content)


def blind_policies(n_max, rng):
    """Policies that ignore the observation: fixed distributions over the actions (uniform, each single
    action, uniform over all but the last, and random ones)."""
    dists = [np.ones(n_max)] + [np.eye(n_max)[a] for a in range(n_max)]
    dists += [np.r_[np.ones(n_max - 1), 0.0]] + [rng.dirichlet(np.ones(n_max)) for _ in range(3)]
    for q in dists:

        def act(features, n, q=q):
            p = q[:n] / q[:n].sum() if q[:n].sum() > 0 else np.ones(n) / n
            return int(rng.choice(n, p=p))

        yield act


@pytest.mark.slow
def test_a_blind_policy_scores_at_chance(suite):
    tasks, _, _ = suite
    rng = np.random.default_rng(1)
    episodes = 1500
    for name, k in all_settings(tasks):
        task = tasks.make_task(name, k)
        chance = task.blind_success()
        pool = task.pool("test")
        best = 0.0
        for act in blind_policies(task.n_actions, rng):
            wins = np.mean([task.play(pool[int(rng.integers(len(pool)))], act, rng).reward for _ in range(episodes)])
            best = max(best, wins)
            sigma = np.sqrt(max(chance * (1 - chance), 1e-3) / episodes)
            assert wins <= chance + 4 * sigma, (name, k, wins, chance)
        # the chance level is attained by the best of them (the formula is the blind optimum, not a loose bound)
        assert best >= chance - 4 * np.sqrt(max(chance * (1 - chance), 1e-3) / episodes), (name, k, best, chance)


def traj_group(agent, task, episodes, group="g"):
    return [agent.to_trajectory(ep, group, i, task.n_features, task.n_actions) for i, ep in enumerate(episodes)]


def test_control_gives_every_outcome_method_grpos_advantage(suite):
    # one decisive turn and the reward right after it: the outcome is all the signal there is
    tasks, agent, _ = suite
    task = tasks.make_task("control", 4)
    rng = np.random.default_rng(2)
    uniform = lambda f, n: int(rng.integers(n))  # noqa: E731
    eps = [task.play(task.pool("train")[0], uniform, rng) for _ in range(16)]
    assert 0 < np.mean([e.reward for e in eps]) < 1
    trajs = traj_group(agent, task, eps)
    for method in ("dra", "gated", "turn_grpo", "gigpo", "rloo", "drgrpo"):
        res = compute_advantages(trajs, method)
        signs = np.sign([a[0] for a in res.turn_advantages])
        assert (signs == np.sign([e.reward - np.mean([x.reward for x in eps]) for e in eps])).all(), method


def test_delay_noise_turns_do_not_change_the_reward(suite):
    tasks, _, _ = suite
    task = tasks.make_task("delay", 4)
    content = task.pool("train")[3]
    right = tasks.rule(content[0], task.A)
    rng = np.random.default_rng(3)
    for noise_action in range(task.A):

        def act(features, n, noise_action=noise_action, calls=[0]):  # noqa: B006 (a fresh list per action)
            calls[0] += 1
            return right if calls[0] == 1 else noise_action

        ep = task.play(content, act, rng)
        assert len(ep.steps) == 5 and ep.reward == 1.0
        assert [s.reward for s in ep.steps[:-1]] == [0.0] * 4  # the reward comes k turns after the decision


def fit_estimator(agent, task, rng, episodes=320):
    from rlgym_llm.train.credit_models import ProgressEstimator

    uniform = lambda f, n: int(rng.integers(n))  # noqa: E731
    pool = task.pool("train")
    eps = [task.play(pool[int(rng.integers(len(pool)))], uniform, rng) for _ in range(episodes)]
    trajs = traj_group(agent, task, eps)
    est = ProgressEstimator(agent.turn_features, hidden=64, seed=0)
    est.fit(trajs, epochs=200)
    return eps, est.contributions(trajs)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "knob"), [("distractors", 3), ("progress", 4), ("delay", 4)])
def test_spa_estimator_can_attribute_the_steps_that_matter(suite, name, knob):
    # SPA's information: a step's cue and action; the library's estimator fitted on enough exploration
    # credits the right action on a deciding step, and not on a distractor (or a noise turn)
    tasks, agent, _ = suite
    task = tasks.make_task(name, knob)
    eps, contribs = fit_estimator(agent, task, np.random.default_rng(4))
    decisive = {True: [], False: []}
    distract = {True: [], False: []}
    for ep, c in zip(eps, contribs):
        for t, (s, ct) in enumerate(zip(ep.steps, c)):
            action = s.decisions[0].action
            if name == "delay":  # turn 0 decides; a noise turn's "right" is an arbitrary action (0)
                (decisive if t == 0 else distract)[
                    action == tasks.rule(ep.content[0], task.n_actions) if t == 0 else action == 0
                ].append(ct)
                continue
            cues = ep.content[2:] if name == "distractors" else ep.content[1:]
            pos = ep.content[1] if name == "distractors" else None
            right = action == tasks.rule(cues[t], task.n_actions)
            (decisive if pos is None or t == pos else distract)[right].append(ct)
    gap = np.mean(decisive[True]) - np.mean(decisive[False])
    assert gap > 0.05, gap
    if name != "progress":
        assert abs(np.mean(distract[True]) - np.mean(distract[False])) < gap / 2


def test_subgoals_farming_pays_dra_and_not_gra(suite):
    tasks, agent, _ = suite
    task = tasks.make_task("subgoals", 3)
    content = task.pool("train")[0]
    cues = content[1:]
    rng = np.random.default_rng(5)
    farm = task.play(content, lambda f, n: task.A, rng)  # a valid call every turn, no progress
    assert [s.tool_ok for s in farm.steps] == [True] * 6 and farm.reward == 0.0
    assert {s.level for s in farm.steps} == {0}
    level = {"n": 0}

    def solve(features, n):
        a = tasks.rule(cues[level["n"]], task.A)
        level["n"] += 1
        return a

    quick = task.play(content, solve, rng)
    assert quick.reward == 1.0 and len(quick.steps) == 3 and quick.steps[-1].level == 3
    wrong = task.play(content, lambda f, n: (tasks.rule(cues[0], task.A) + 1) % task.A, rng)
    assert not any(s.tool_ok for s in wrong.steps)  # a wrong advance is an invalid call
    trajs = traj_group(agent, task, [farm, quick])
    dra = compute_advantages(trajs, "dra").turn_advantages
    gated = compute_advantages(trajs, "gated").turn_advantages
    assert dra[0][0] > dra[1][0]  # D-RA: 5 valid calls without progress beat the success
    assert gated[1][0] > gated[0][0]  # G-RA: the gate (level >= 2) stays shut for the farm


def test_recurring_states_form_step_groups(suite):
    tasks, agent, _ = suite
    task = tasks.make_task("recurring", 4)
    rng = np.random.default_rng(6)
    uniform = lambda f, n: int(rng.integers(n))  # noqa: E731
    eps = [task.play(task.pool("train")[0], uniform, rng) for _ in range(8)]
    trajs = traj_group(agent, task, eps)
    sizes = step_group_sizes([anchor_keys(t) for t in trajs])
    assert max(sizes) > 8  # the bottom rung recurs within and across the group's episodes
    res = compute_advantages(trajs, "gigpo")
    assert res.stats.step_group_sizes and res.stats.n_singleton_step_groups < sum(sizes.values())


def test_info_probe_rises_with_an_informative_question(suite):
    # IGPO's information: the policy's own probability of the secret rises when a question reveals a bit
    tasks, agent, _ = suite
    task = tasks.make_task("info", 3)
    policy = agent.Policy(task.n_features, task.n_actions, np.random.default_rng(7))
    with np_weights(policy) as w:
        for j in range(3):  # the answer head copies a known bit
            w[task.answer_features(j, 1)[1], 0] = 4.0
            w[task.answer_features(j, 2)[1], 1] = 4.0
    secret_content = task.pool("train")[5]
    informative = iter([0, 1, 2])
    useless = iter([3, 4, 5])
    rng = np.random.default_rng(8)

    def asker(order):
        return lambda f, n: next(order) if n == 6 else policy.act(f, n)

    good = task.play(secret_content, asker(informative), rng, policy.answer_prob)
    bad = task.play(secret_content, asker(useless), rng, policy.answer_prob)
    p_good = [s.probe for s in good.steps]
    p_bad = [s.probe for s in bad.steps]
    assert p_good[0] == pytest.approx(1 / 8) and all(b > a for a, b in itertools.pairwise(p_good))
    assert p_bad == pytest.approx([1 / 8] * 4)
    trajs = traj_group(agent, task, [good, bad])
    res = compute_advantages(trajs, "igpo", answer_probs=[p_good, p_bad])
    assert res.turn_advantages[0][0] > res.turn_advantages[1][0]


class np_weights:
    """Edit a Policy's weights in place (then refresh its sampling table)."""

    def __init__(self, policy):
        self.policy = policy

    def __enter__(self):
        import torch

        self._ctx = torch.no_grad()
        self._ctx.__enter__()
        return self.policy.weight

    def __exit__(self, *exc):
        self._ctx.__exit__(*exc)
        self.policy.refresh()


def test_one_update_moves_the_policy_toward_positive_advantage(suite):
    tasks, agent, _ = suite
    task = tasks.make_task("control", 4)
    runner = agent.Runner(task, "grpo", 0, agent.Budget())
    trajs = runner.batch(0)
    before = {t.task_id: runner.policy.probs(t.metadata["episode"].steps[0].decisions[0].features, 4) for t in trajs}
    assert runner.update(trajs)
    moved = []
    for t in trajs:
        d = t.metadata["episode"].steps[0].decisions[0]
        after = runner.policy.probs(d.features, 4)
        moved.append(np.sign(after[d.action] - before[t.task_id][d.action]) * np.sign(t.reward - 0.5))
    assert np.mean(np.array(moved) > 0) > 0.7


@pytest.mark.slow
def test_runs_are_deterministic_and_finite_with_ragged_turns(suite):
    tasks, agent, _ = suite
    for name in ("subgoals", "info"):  # episodes of different lengths; turns of several decisions
        task = tasks.make_task(name, 3)
        budget = agent.Budget(steps=4, eval_every=2, eval_episodes=16, explore_tasks=2)
        a = agent.Runner(task, "spa", 3, budget).run()
        b = agent.Runner(task, "spa", 3, budget).run()
        assert a.test_success == b.test_success and a.train_success == b.train_success
        r = agent.Runner(task, "igpo", 3, budget)
        r.run()
        assert np.isfinite(r.policy.weight.detach().numpy()).all()


def rows_for(suite_mod, task, diffs, grpo=0.5, same=False):
    rows = {}
    for method, d in [("grpo", 0.0), *diffs.items()]:
        seeds = {}
        for s, x in enumerate(d if isinstance(d, list) else [d] * 20):
            final = grpo + x
            curve = [0.1, final] if not (same and method != "grpo") else [0.1, grpo]
            seeds[str(s)] = {
                "final": final,
                "steps_to": 10.0 - 5 * x,
                "test_curve": curve,
                "train_curve": curve,
            }
        rows[f"{task}|1|{method}"] = {"method": method, "seeds": seeds}
    for m in METHODS:
        rows.setdefault(f"{task}|1|{m}", {**rows[f"{task}|1|grpo"], "method": m})
    return rows


def test_verdicts_correct_for_multiplicity_and_say_same_runs(suite):
    _, _, s = suite
    z = np.random.default_rng(9).standard_normal(20)
    z = (z - z.mean()) / z.std(ddof=1)  # mean 0, sd 1 exactly
    rows = rows_for(
        s,
        "info",
        {
            "igpo": list(0.3 + 0.05 * z),  # a large, clear gain
            "spa": list(-0.3 + 0.05 * z),
            # a small gain, t interval +0.03 -/+ 2.09 x 0.05 / sqrt(20): above 0 alone at 95 %, not after
            # Bonferroni over the family (t quantile ~4.1)
            "rloo": list(0.03 + 0.05 * z),
        },
    )
    vs, m_family = s.verdicts(rows, ["info"], {"info": [1]})
    assert m_family == (len(METHODS) - 1) * 1 * 2
    by = {v["method"]: v for v in vs}
    assert by["igpo"]["final"]["verdict"] == "helps" and by["igpo"]["steps_to"]["verdict"] == "helps"
    assert by["spa"]["final"]["verdict"] == "hurts" and by["spa"]["steps_to"]["verdict"] == "hurts"
    from rlgym_llm.eval import paired_seed_comparison

    x = [r["final"] for r in rows["info|1|rloo"]["seeds"].values()]
    y = [r["final"] for r in rows["info|1|grpo"]["seeds"].values()]
    alone = paired_seed_comparison(x, y)
    assert alone.t_low > 0 and by["rloo"]["final"]["verdict"] == "no difference"
    assert by["gated"]["final"]["verdict"] == "same runs as GRPO"
    few = {k: {**v, "seeds": dict(list(v["seeds"].items())[:3])} for k, v in rows.items()}
    assert s.verdicts(few, ["info"], {"info": [1]})[0][0]["final"]["verdict"].endswith("too few for a verdict")


def test_the_docs_table_is_the_published_results(suite):
    # docs/credit.md's "which method when" is generated from the verdicts of the published full run
    _, _, s = suite
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    data = json.loads((root / "benchmarks" / "results" / "credit_diagnostics.json").read_text())
    assert len(data["seeds"]) >= 20 and data["family_size"] == 2 * 7 * (len(METHODS) - 1)
    assert {v["task"] for v in data["verdicts"]} == set(s.TASKS)
    assert s.which_method_table(data["verdicts"]) in (root / "docs" / "credit.md").read_text()


@pytest.mark.slow
def test_the_smoke_suite_writes_a_report(suite, tmp_path):
    _, _, s = suite
    assert s.main(["--smoke", "--out", str(tmp_path / "out"), "--runs", str(tmp_path / "runs")]) == 0
    md = (tmp_path / "out" / "credit_diagnostics_smoke.md").read_text()
    data = json.loads((tmp_path / "out" / "credit_diagnostics_smoke.json").read_text())
    assert (tmp_path / "out" / "credit_diagnostics_smoke.png").stat().st_size > 10_000
    for name in s.TASKS:
        assert f"### {name}:" in md
    assert {v["method"] for v in data["verdicts"]} == set(METHODS) - {"grpo"}
    assert all("too few" in v["final"]["verdict"] for v in data["verdicts"])  # 2 seeds: no verdict
    assert "## Agreement with the LLM testbeds" in md and data["seeds"] == [0, 1]
    # resumable: a second call finds every run on disk
    runs = sorted((tmp_path / "runs").rglob("*.json"))
    assert len(runs) == len(s.TASKS) * 2
    before = [p.stat().st_mtime_ns for p in runs]
    assert s.main(["--smoke", "--out", str(tmp_path / "out"), "--runs", str(tmp_path / "runs")]) == 0
    assert [p.stat().st_mtime_ns for p in runs] == before

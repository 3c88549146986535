"""IGPO answer scoring and the SPA progress estimator (trainer-side models of the credit methods)."""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from rlgym_llm.core.types import AssistantTurn, Trajectory, Turn  # noqa: E402
from rlgym_llm.credit import compute_advantages, progress_estimator_loss  # noqa: E402
from rlgym_llm.credit.info_gain import answer_probes, build_answer_probe  # noqa: E402
from rlgym_llm.train.credit_models import (  # noqa: E402
    HiddenStateFeatures,
    ProgressEstimator,
    SignalFeatures,
    answer_template_ids,
    contribution_loss,
    igpo_answer_probs,
    score_answer_probes,
)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """These tensors are small: one thread is as fast alone and far faster on a busy shared machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny(tiny_model_dir, tiny_tokenizer):
    model = transformers.AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    return model, tiny_tokenizer


def text_trajectory(tok, prompt, turns, *, group="g", outcome=1.0, failed=False, signals=None):
    """A trajectory whose tokens are real text: each turn is (observation before it, completion)."""
    from rlgym_llm.core.types import Failure, FailureKind

    enc = lambda s: tuple(tok.encode(s, add_special_tokens=False))  # noqa: E731
    return Trajectory(
        env_id="test/Env-v0",
        seed=0,
        task_id="t",
        group_id=group,
        prompt_token_ids=enc(prompt),
        turns=[
            Turn(
                index=t,
                action=AssistantTurn(content=comp),
                observation=[],
                reward=0.0,
                terminated=t == len(turns) - 1,
                truncated=False,
                signals=(signals or [{}] * len(turns))[t],
                obs_token_ids=enc(obs),
                completion_token_ids=enc(comp),
                completion_logprobs=tuple(-1.0 for _ in enc(comp)),
            )
            for t, (obs, comp) in enumerate(turns)
        ],
        outcome={"reward": outcome},
        failures=[Failure(FailureKind.ENGINE, "Timeout", "slow")] if failed else [],
    )


def loop_answer_prob(model, probe):
    """One probe at a time, no padding: exp of the mean log-prob of the answer tokens."""
    ids = torch.tensor([probe.input_ids])
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=ids).logits[0].double(), -1)
    total = sum(logp[k - 1, probe.input_ids[k]].item() for k in range(probe.answer_start, probe.answer_end))
    return math.exp(total / (probe.answer_end - probe.answer_start))


def search_batch(tok):
    user = "<|im_start|>user\nWhere was the company founded?<|im_end|>\n<|im_start|>assistant\n"
    gen = "<|im_end|>\n<|im_start|>tool\n{}<|im_end|>\n<|im_start|>assistant\n"
    call = '<tool_call>{"name": "search", "arguments": {"query": "company founded"}}</tool_call>'
    return [
        text_trajectory(tok, user, [("", call), (gen.format("the city of 42"), "the answer is 42")]),
        text_trajectory(tok, user, [("", "answer 7")], outcome=0.0),
        text_trajectory(tok, user, [("", call), (gen.format("error"), call), (gen.format("found 42 books"), "42")]),
        text_trajectory(tok, user, [("", call)], failed=True),
        text_trajectory(tok, user + "hello " * 30, [("", "more text than the others"), (gen.format("x"), "y")]),
    ]


@pytest.mark.parametrize("method", ["prefix_cache", "padded"])
def test_batched_scoring_equals_unbatched_loop(tiny, method):
    model, tok = tiny
    trajs = search_batch(tok)
    tmpl = answer_template_ids(tok, "42 apples")
    probs = igpo_answer_probs(model, trajs, [tmpl] * len(trajs), method=method, micro_batch_size=3)
    assert [len(p) for p in probs] == [2, 1, 3, 0, 2]  # one per turn; none for the failed trajectory
    for traj, got in zip(trajs, probs):
        if traj.failed:
            continue
        probes = answer_probes(
            traj,
            tmpl.answer_ids,
            template_prefix_ids=tmpl.template_prefix_ids,
            template_suffix_ids=tmpl.template_suffix_ids,
        )
        want = [loop_answer_prob(model, p) for p in probes]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
        assert np.all((got > 0) & (got <= 1))
    # micro-batch size does not change the numbers
    again = igpo_answer_probs(model, trajs, [tmpl] * len(trajs), method="padded", micro_batch_size=1)
    for a, b in zip(probs, again):
        np.testing.assert_allclose(a, b, rtol=1e-5)
    # and the result feeds compute_advantages as is
    result = compute_advantages(trajs, "igpo", answer_probs=probs)
    assert result.stats.n_failed == 1 and len(result.turn_advantages[2]) == 3


def test_prefix_cache_scoring_raises_no_cache_deprecation_warning(tiny):
    """The KV cache goes in under the keyword this transformers takes (rollout/kv_cache.py)."""
    import warnings

    model, tok = tiny
    trajs = search_batch(tok)
    tmpl = answer_template_ids(tok, "42 apples")
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=r".*(past_key_values|cache_params).*")
        cached = igpo_answer_probs(model, trajs, [tmpl] * len(trajs), method="prefix_cache")
    padded = igpo_answer_probs(model, trajs, [tmpl] * len(trajs), method="padded")
    for a, b in zip(cached, padded):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def test_scoring_restores_training_mode_and_needs_no_grad(tiny):
    model, tok = tiny
    model.train()
    traj = search_batch(tok)[0]
    probes = answer_probes(traj, answer_template_ids(tok, "42").answer_ids)
    p = score_answer_probes(model, probes)
    assert model.training and p.shape == (2,)
    assert all(param.grad is None for param in model.parameters())
    model.eval()


def test_rejects_empty_answer_and_empty_context(tiny, tiny_tokenizer):
    with pytest.raises(ValueError, match="no tokens"):
        answer_template_ids(tiny_tokenizer, "")
    with pytest.raises(ValueError, match="before the answer"):
        score_answer_probes(tiny[0], [build_answer_probe([], [5, 6])])
    with pytest.raises(ValueError, match="method"):
        igpo_answer_probs(tiny[0], [], [], method="beam")


# --- SPA progress estimator ----------------------------------------------------------------------


def synthetic_trajectories(n, seed, weights=(0.6, -0.3, 0.2)):
    """Outcome = sum over turns of a known linear function of the turn's signals (plus nothing else)."""
    rng = np.random.default_rng(seed)
    out, truth = [], []
    for i in range(n):
        t_len = int(rng.integers(1, 6))
        feats = rng.normal(size=(t_len, len(weights)))
        contrib = feats @ np.array(weights)
        signals = [{"reward_components": {f"x{k}": float(v) for k, v in enumerate(row)}} for row in feats]
        traj = Trajectory(
            env_id="test/Env-v0",
            seed=0,
            task_id=str(i),
            group_id=str(i // 4),
            prompt_token_ids=(1,),
            turns=[
                Turn(t, AssistantTurn(), [], 0.0, t == t_len - 1, False, signals[t], (), (2, 3), (-1.0, -1.0))
                for t in range(t_len)
            ],
            outcome={"reward": float(contrib.sum())},
        )
        out.append(traj)
        truth.append(contrib)
    return out, truth


def test_progress_estimator_recovers_known_contributions():
    train, _ = synthetic_trajectories(200, seed=0)
    test, truth = synthetic_trajectories(50, seed=1)
    est = ProgressEstimator(SignalFeatures(("x0", "x1", "x2"), position=False), hidden=32, lr=2e-2)
    losses = est.fit(train, epochs=100)
    assert losses[-1] < 0.01 * losses[0]  # the sum-to-outcome loss falls by two orders of magnitude
    got = est.contributions(test)
    err = np.concatenate(got) - np.concatenate(truth)
    scale = np.concatenate(truth).std()
    assert np.sqrt(np.mean(err**2)) < 0.1 * scale  # per-turn contributions, not just their sums
    # the torch loss agrees with the credit module's numpy reference
    preds = [torch.from_numpy(c) for c in got]
    seg = torch.cat([torch.full((len(c),), i) for i, c in enumerate(got)])
    outs = torch.tensor([t.reward for t in test], dtype=torch.float64)
    assert contribution_loss(torch.cat(preds), seg, outs).item() == pytest.approx(
        progress_estimator_loss(got, outs.numpy()), rel=1e-9
    )
    result = compute_advantages(test, "spa", contributions=got)
    assert [len(a) for a in result.turn_advantages] == [len(t.turns) for t in test]


def test_progress_estimator_minibatches_state_and_failures():
    train, _ = synthetic_trajectories(64, seed=2)
    est = ProgressEstimator(SignalFeatures(("x0", "x1", "x2")), hidden=0, lr=5e-2, seed=3)
    with pytest.raises(RuntimeError, match="before fit"):
        est.contributions(train)
    losses = est.fit(train, epochs=60, batch_size=16)
    assert losses[-1] < 0.05 * losses[0]
    twin = ProgressEstimator(SignalFeatures(("x0", "x1", "x2")), hidden=0)
    twin.load_state_dict(est.state_dict())
    for a, b in zip(twin.contributions(train), est.contributions(train)):
        np.testing.assert_array_equal(a, b)
    # a feature constant in the first fit keeps unit scale: later batches where it varies stay finite
    fresh = ProgressEstimator(SignalFeatures(("x0", "flag")), hidden=0)
    fresh.fit(train[:8], epochs=2)  # "flag" is absent, i.e. 0, on every turn here
    flagged = [
        Trajectory(
            t.env_id,
            t.seed,
            t.task_id,
            turns=[Turn(u.index, u.action, [], 0.0, u.terminated, False, {**u.signals, "flag": 1.0}) for u in t.turns],
        )
        for t in train[:4]
    ]
    assert all(np.all(np.abs(c) < 1e3) for c in fresh.contributions(flagged))
    failed, _ = synthetic_trajectories(1, seed=4)
    failed[0].failures.append(train[0].failures[0] if train[0].failures else _failure())
    assert np.all(est.contributions(failed)[0] == 0.0)


def _failure():
    from rlgym_llm.core.types import Failure, FailureKind

    return Failure(FailureKind.ENV, "RuntimeError", "boom")


def test_hidden_state_features_are_causal_and_per_turn(tiny):
    model, tok = tiny
    trajs = search_batch(tok)
    live = [t for t in trajs if not t.failed]
    feats = HiddenStateFeatures(model, micro_batch_size=2)(live)
    hidden = model.config.hidden_size
    assert [f.shape for f in feats] == [(len(t.turns), hidden) for t in live]
    # turn 0's feature of trajectory 0 only sees tokens up to the end of turn 0: cutting the later turns
    # off leaves it unchanged (padding and batching do not leak either)
    cut = text_trajectory(tok, "", [])
    cut.prompt_token_ids = live[0].prompt_token_ids
    cut.turns = live[0].turns[:1]
    alone = HiddenStateFeatures(model, micro_batch_size=1)([cut])[0]
    np.testing.assert_allclose(alone[0], feats[0][0], rtol=1e-4, atol=1e-5)
    mean = HiddenStateFeatures(model, pool="mean")(live[:1])[0]
    assert not np.allclose(mean, feats[0])
    est = ProgressEstimator(HiddenStateFeatures(model), hidden=16)
    losses = est.fit(live, epochs=50)
    assert losses[-1] < losses[0]


# --- SPA's protocol: fit on warm-up explorations, then freeze --------------------------------------


def _head_params(contrib):
    return [p.detach().clone() for p in contrib.estimator.head.parameters()]


def test_offline_estimator_fits_once_on_explorations_then_is_frozen():
    from rlgym_llm.train.credit_inputs import Contributions

    explored, _ = synthetic_trajectories(120, seed=5)
    calls = []

    def explore():
        calls.append(1)
        return explored

    est = ProgressEstimator(SignalFeatures(("x0", "x1", "x2"), position=False), hidden=0, lr=5e-2)
    contrib = Contributions(est, epochs=150, explore=explore)
    batch, truth = synthetic_trajectories(16, seed=6)
    first = contrib(batch)
    assert calls == [1] and contrib.fitted
    assert contrib.fit_losses[-1] < 0.05 * contrib.fit_losses[0]
    frozen = _head_params(contrib)
    later, _ = synthetic_trajectories(16, seed=7)
    contrib(later)
    contrib(later)
    assert calls == [1]  # no second exploration, no refit: the head is unchanged
    for a, b in zip(frozen, _head_params(contrib)):
        assert torch.equal(a, b)
    # fitted on explorations it never scored, it recovers the per-turn contributions of a new batch
    err = np.concatenate(first) - np.concatenate(truth)
    assert np.sqrt(np.mean(err**2)) < 0.1 * np.concatenate(truth).std()
    # a resumed run loads the fitted head and does not explore again
    twin = Contributions(
        ProgressEstimator(SignalFeatures(("x0", "x1", "x2"), position=False), hidden=0), explore=explore
    )
    twin.load_state_dict(contrib.state_dict())
    for a, b in zip(twin(later), contrib(later)):
        np.testing.assert_array_equal(a, b)
    assert calls == [1]


def test_online_estimator_refits_on_every_batch():
    from rlgym_llm.train.credit_inputs import Contributions

    contrib = Contributions(ProgressEstimator(SignalFeatures(("x0", "x1", "x2")), hidden=0), online=True, epochs=5)
    contrib(synthetic_trajectories(16, seed=8)[0])
    before = _head_params(contrib)
    contrib(synthetic_trajectories(16, seed=9)[0])
    assert any(not torch.equal(a, b) for a, b in zip(before, _head_params(contrib)))


def test_spa_defaults_read_a_frozen_copy_of_the_policy_and_keep_privileged_signals_out(tiny):
    from rlgym_llm.core.errors import ConfigError
    from rlgym_llm.credit import resolve_params
    from rlgym_llm.train.credit_inputs import CreditAssigner

    model, tok = tiny
    p = resolve_params("spa", {})
    assert (p.estimator, p.features, p.signals, p.privileged) == ("offline", "hidden", ("tool_ok",), False)
    with pytest.raises(ConfigError, match="privileged"):
        resolve_params("spa", {"features": "signals", "signals": ["tool_ok", "progress"]})
    assert resolve_params("spa", {"signals": ["progress"], "privileged": True}).signals == ("progress",)

    trajs = [t for t in search_batch(tok) if not t.failed]
    explored = []
    credit = CreditAssigner.build(
        "spa",
        {"explore_tasks": 3, "epochs": 20},
        model=model,
        tokenizer=tok,
        explore=lambda n: explored.append(n) or trajs,
    )
    contrib = credit.inputs["contributions"]
    frozen = contrib.estimator.featurizer.model
    assert frozen is not model and not any(q.requires_grad for q in frozen.parameters())
    result = credit(trajs)
    assert explored == [3] and [len(a) for a in result.turn_advantages] == [len(t.turns) for t in trajs]
    before = contrib.estimator.featurizer(trajs[:1])[0]
    with torch.no_grad():  # the policy trains on: the estimator's features do not move
        for q in model.parameters():
            q.add_(0.01)
    try:
        np.testing.assert_array_equal(contrib.estimator.featurizer(trajs[:1])[0], before)
    finally:
        with torch.no_grad():
            for q in model.parameters():
                q.sub_(0.01)

"""Oracle demonstrations for the SFT warm-up, played through the rollout manager: the oracle as it is,
and the noisy teacher (idle turns)."""

import pytest

pytest.importorskip("torch")

import rlgym_llm
from rlgym_llm.testing.toy import CounterPlayer
from rlgym_llm.train.sft import IDLE_TEXT, oracle_trajectories

ENV = "test/SftCounter"


@pytest.fixture(scope="module")
def agent(tiny_tokenizer):
    from rlgym_agents.tool_calling import ToolCallingAgent

    for turns in (4, 12):
        if f"{ENV}{turns}-v0" not in rlgym_llm.list_envs():
            rlgym_llm.register(f"{ENV}{turns}-v0", "rlgym_llm.testing.toy:CounterEnv", max_turns=turns)
    return ToolCallingAgent(tiny_tokenizer)


def _oracle(env):
    return CounterPlayer().act


def _play(agent, tokenizer, seed, max_turns, idle_prob):
    def make_env():
        return rlgym_llm.make(f"{ENV}{max_turns}-v0", max_target=5)

    return oracle_trajectories(make_env, agent, tokenizer, _oracle, [seed], max_turns, idle_prob, False)[0]


def _idle(turn):
    return not turn.action.tool_calls


def test_the_oracle_alone_never_idles_and_always_wins(agent, tiny_tokenizer):
    for seed in range(20):
        traj = _play(agent, tiny_tokenizer, seed, 4, 0.0)
        assert traj.reward == 1.0
        assert not any(_idle(t) for t in traj.turns)


def test_idle_turns_are_text_only_and_the_oracle_resumes_after_them(agent, tiny_tokenizer):
    # With a generous turn limit the noisy teacher still wins: idle turns only delay it, and the
    # oracle (not called on idle turns) sees their observations with its next call.
    idle_turns = 0
    for seed in range(40):
        traj = _play(agent, tiny_tokenizer, seed, 12, 0.5)
        idle = [t for t in traj.turns if _idle(t)]
        idle_turns += len(idle)
        for turn in idle:  # the idle text is what the model is trained to write, EOS-terminated
            assert turn.action.content == IDLE_TEXT
            assert tiny_tokenizer.decode(turn.completion_token_ids[:-1]) == IDLE_TEXT
        if traj.turns[-1].terminated:  # submitted within the limit: the oracle's moves were right
            assert traj.reward == 1.0
    assert 30 < idle_turns < 150  # about one per real turn at p = 0.5


def test_idle_draws_are_a_function_of_the_seed(agent, tiny_tokenizer):
    a = _play(agent, tiny_tokenizer, 7, 4, 0.5)
    b = _play(agent, tiny_tokenizer, 7, 4, 0.5)
    assert [_idle(t) for t in a.turns] == [_idle(t) for t in b.turns]
    assert a.token_ids == b.token_ids


def test_a_noisy_teacher_under_a_turn_limit_fails_and_successful_only_filters(agent, tiny_tokenizer):
    def make_env():
        return rlgym_llm.make(f"{ENV}4-v0", max_target=5)

    kept_all = oracle_trajectories(make_env, agent, tiny_tokenizer, _oracle, range(64), 4, 0.5, successful_only=False)
    wins = oracle_trajectories(make_env, agent, tiny_tokenizer, _oracle, range(64), 4, 0.5)
    assert len(kept_all) == 64
    rate = sum(t.reward > 0 for t in kept_all) / 64
    assert 0.3 < rate < 0.9  # the teacher runs out of turns on a good share of episodes
    assert len(wins) == sum(t.reward > 0 for t in kept_all)
    assert all(t.reward == 1.0 for t in wins)


def test_the_main_jobs_demonstrations_do_not_drift():
    """Golden: the oracle's demonstrations of the main job (configs/train.yaml, Math-v0) for seeds 0-15,
    token ids, loss masks and rewards, as the SFT loop wrote them before it ran through the rollout
    manager. If Math's text or the chat template changed on purpose, update the hash."""
    import hashlib
    import json

    from rlgym_llm.config import load_config
    from rlgym_llm.recipes import parts

    cfg = load_config("train")
    _, tokenizer = parts.load_model(parts.model_dir(cfg.policy))
    demos = oracle_trajectories(
        parts.env_factory(cfg.env, cfg.sandbox),
        parts.build_agent(cfg.agent, tokenizer),
        tokenizer,
        parts.oracle_factory(cfg.env.oracle),
        range(16),
        cfg.env.max_turns,
        idle_prob=cfg.sft.idle_prob,
        successful_only=cfg.sft.successful_only,
    )
    rows = [(t.seed, t.token_ids, t.loss_mask, t.reward) for t in demos]
    digest = hashlib.sha256(json.dumps(rows).encode()).hexdigest()
    assert digest == "c8e965990d02bf53d01fb433ce4fad815c747ea06b266d39d2c5a67ebb5414d4"


def test_a_failing_oracle_is_recorded_and_left_out(agent, tiny_tokenizer):
    def make_env():
        return rlgym_llm.make(f"{ENV}4-v0", max_target=5)

    def flaky(env):
        player = CounterPlayer()

        def act(messages):
            if env.unwrapped.task.meta["target"] == 5:  # the oracle breaks on these tasks
                raise RuntimeError("oracle bug")
            return player.act(messages)

        return act

    everything = oracle_trajectories(make_env, agent, tiny_tokenizer, _oracle, range(12), 4)
    unbroken = [t.seed for t in everything if "exactly 5 " not in t.opening[-1]["content"]]
    demos = oracle_trajectories(make_env, agent, tiny_tokenizer, flaky, range(12), 4)
    assert 0 < len(unbroken) < 12 and [t.seed for t in demos] == unbroken
    assert all(t.reward == 1.0 for t in demos)


@pytest.mark.parametrize("schedule", ["constant", "cosine"])
def test_the_sft_learning_rate_schedule(schedule, tiny_model_dir, monkeypatch):
    import math

    import torch
    from batches import make_trajectories
    from transformers import AutoModelForCausalLM

    from rlgym_llm.train.sft import sft

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    seen = []
    step = torch.optim.AdamW.step
    monkeypatch.setattr(
        torch.optim.AdamW,
        "step",
        lambda self, *a, **k: (seen.append(self.param_groups[0]["lr"]), step(self, *a, **k))[1],
    )
    losses = sft(
        model, make_trajectories(model, n=4, seed=4), pad_id=0, steps=4, batch_size=4, lr=1e-3, lr_schedule=schedule
    )
    assert len(losses) == 4
    if schedule == "constant":
        assert seen == [1e-3] * 4
    else:  # from lr down toward 0: (1 + cos(pi i / n)) / 2 at step i
        assert seen == pytest.approx([1e-3 * (1 + math.cos(math.pi * i / 4)) / 2 for i in range(4)])
        assert seen[0] == 1e-3 and seen[-1] < 0.2e-3


def test_an_unknown_sft_schedule_is_a_config_error():
    from rlgym_llm.config import load_config
    from rlgym_llm.core.errors import ConfigError

    with pytest.raises(ConfigError, match="lr_schedule"):
        load_config("train", ["sft.lr_schedule=linear"])


@pytest.mark.parametrize("micro", [1, 3])
def test_sft_micro_batches_take_the_whole_batchs_step(micro, tiny_model_dir, monkeypatch):
    """Micro-batches accumulate into the step of the whole batch: the same token-mean loss and the
    same gradient at each step (up to float summation order), at a micro-batch's activation memory.
    Trajectories of different lengths, so a mean per micro-batch would differ."""
    import torch
    from batches import make_trajectories
    from transformers import AutoModelForCausalLM

    from rlgym_llm.train.sft import sft

    trajs = make_trajectories(AutoModelForCausalLM.from_pretrained(tiny_model_dir), n=4, seed=4)
    assert len({int(sum(t.loss_mask)) for t in trajs}) > 1  # unequal token counts per trajectory
    grads: list[list[torch.Tensor]] = []
    step = torch.optim.AdamW.step

    def recording(self, *a, **k):  # the gradient each optimizer step takes
        grads.append([p.grad.detach().clone() for g in self.param_groups for p in g["params"]])
        return step(self, *a, **k)

    monkeypatch.setattr(torch.optim.AdamW, "step", recording)
    losses = []
    for m in (None, micro):
        model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
        losses.append(sft(model, trajs, pad_id=0, steps=2, batch_size=4, lr=1e-3, micro_batch_size=m))
    assert losses[1] == pytest.approx(losses[0], rel=1e-5)
    whole, parts = grads[:2], grads[2:]
    for w, p in zip(whole, parts, strict=True):
        assert all(torch.allclose(a, b, rtol=1e-4, atol=1e-7) for a, b in zip(w, p, strict=True))
    assert any(float(g.abs().max()) > 1e-3 for g in whole[0])  # a real gradient, not zeros


def test_an_sft_micro_batch_below_one_is_a_config_error():
    from rlgym_llm.config import load_config
    from rlgym_llm.core.errors import ConfigError

    with pytest.raises(ConfigError, match="micro_batch_size must be >= 1"):
        load_config("train", ["sft.micro_batch_size=0"])
    assert load_config("train", ["sft.micro_batch_size=2"]).sft.micro_batch_size == 2

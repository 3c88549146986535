"""Oracle demonstrations for the SFT warm-up: the oracle as it is, and the noisy teacher (idle turns)."""

import pytest

pytest.importorskip("torch")

import rlgym_llm
from rlgym_llm.testing.toy import CounterPlayer
from rlgym_llm.train.sft import IDLE_TEXT, oracle_trajectories, oracle_trajectory

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
    env = rlgym_llm.make(f"{ENV}{max_turns}-v0", max_target=5)
    try:
        return oracle_trajectory(env, agent, tokenizer, _oracle, seed, max_turns, idle_prob)
    finally:
        env.close()


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

"""`rlgym/Search-v0`'s content splits: each split's worlds share no question, entity, fact or answer with
another's, a memoriser of the train worlds gains nothing on test, each split of both tiers holds 200+
questions, and a QA set is split by its `split` column or by the hash of its questions."""

import json

import pytest

import rlgym_llm
from rlgym_agents.search import SearchOracle
from rlgym_envs.search.env import MIN_SPLIT_QUESTIONS, SearchEnv, split_worlds
from rlgym_llm.core.errors import ConfigError, DataFileError
from rlgym_llm.core.splits import SPLITS, split_of
from rlgym_llm.testing.splits import assert_disjoint, split_pools

# configs/env/search.yaml's learnable tier, and the registered default
TIER = {"world_people": 4, "max_hops": 1, "snippet_chars": 40}
DEFAULT: dict = {}


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("search-cache")


@pytest.fixture(scope="module")
def tier_pools(cache):
    return split_pools("rlgym/Search-v0", seeds=range(3000), cache_dir=cache, **TIER)


def _name_words(split, people, max_hops):
    """Every word of every entity name in the split's worlds (pages other than the distractors)."""
    worlds = split_worlds(0, people, max_hops, None, split)
    titles = {d.title for w in worlds for d in w.documents if not d.id.startswith("misc-")}
    return {word.lower() for title in titles for word in title.split()}


@pytest.mark.parametrize("tier", [TIER, DEFAULT], ids=["learnable", "default"])
def test_splits_share_no_prompt_task_or_answer_and_each_holds_200_questions(tier, tier_pools, cache):
    pools = tier_pools if tier is TIER else split_pools("rlgym/Search-v0", seeds=range(2000), cache_dir=cache)
    assert_disjoint(pools)
    for a in SPLITS:
        assert pools[a].episodes >= 2000 and len(pools[a].keys) >= MIN_SPLIT_QUESTIONS, (a, len(pools[a].keys))
        for b in SPLITS:
            if a < b:
                assert not pools[a].answers & pools[b].answers, (a, b, sorted(pools[a].answers & pools[b].answers)[:5])


@pytest.mark.parametrize(("people", "max_hops"), [(4, 1), (40, 3)], ids=["learnable", "default"])
def test_the_worlds_of_different_splits_share_no_entity_name_word(people, max_hops):
    """Org and event names share suffixes ("Institute", "Festival"): every other word is the split's own."""
    shared_suffixes = {"institute", "works", "guild", "foundry", "collective", "company", "society", "laboratories"}
    shared_suffixes |= {"festival", "fair", "summit", "regatta", "congress", "games"}
    words = {s: _name_words(s, people, max_hops) - shared_suffixes for s in SPLITS}
    assert all(words.values())
    for a in SPLITS:
        for b in SPLITS:
            if a < b:
                assert not words[a] & words[b], (a, b, sorted(words[a] & words[b])[:5])


def _facts(env):
    """(subject, relation) -> object for every one-hop question of the env's split: its whole fact table."""
    unwrapped = env.unwrapped
    table = {}
    for index in range(len(unwrapped.questions)):
        env.reset(seed=0, options={"index": index})
        task = unwrapped.task
        if len(task.hidden["relations"]) == 1:
            table[(task.hidden["start"], task.hidden["relations"][0])] = task.answer
    return table


def _memoriser_success(env, facts, seeds):
    """Answer at once by chaining memorised facts from the question's entity (its most common answer
    when a fact is unknown); the share of episodes paid."""
    common = max(set(facts.values()), key=list(facts.values()).count)
    wins = 0
    for seed in seeds:
        env.reset(seed=seed)
        task = env.unwrapped.task
        subject = task.hidden["start"]
        for relation in task.hidden["relations"]:
            subject = facts.get((subject, relation), common)
        call = {"function": {"name": "answer", "arguments": {"text": subject}}}
        wins += env.step({"role": "assistant", "content": "", "tool_calls": [call]})[1]
    return wins / len(seeds)


def test_a_memoriser_of_every_train_fact_solves_train_and_gains_nothing_on_test(cache):
    train = rlgym_llm.make("rlgym/Search-v0", split="train", cache_dir=cache, **TIER)
    facts = _facts(train)
    assert len(facts) == len(train.unwrapped.questions) >= MIN_SPLIT_QUESTIONS  # one-hop: every question is a fact
    assert _memoriser_success(train, facts, range(300)) == 1.0  # control: it knows the train worlds
    for split in ("val", "test"):
        env = rlgym_llm.make("rlgym/Search-v0", split=split, cache_dir=cache, **TIER)
        held_out = _facts(env)
        assert not set(facts.values()) & set(held_out.values())  # no train answer is a held-out answer
        assert not {s for s, _ in facts} & {s for s, _ in held_out}  # nor a train entity a held-out one
        assert _memoriser_success(env, facts, range(300)) == 0.0


def test_same_seed_same_task_in_each_split_and_splits_differ(cache):
    for kwargs in (TIER, DEFAULT):
        tasks = {}
        for split in SPLITS:
            a, b = (rlgym_llm.make("rlgym/Search-v0", split=split, cache_dir=cache, **kwargs) for _ in range(2))
            for seed in range(20):
                (oa, ia), (ob, ib) = a.reset(seed=seed), b.reset(seed=seed)
                assert oa == ob and ia == ib and a.unwrapped.task == b.unwrapped.task and ia["split"] == split
            tasks[split] = [a.reset(seed=s)[0][-1]["content"] for s in range(20)]
        assert tasks["train"] != tasks["val"] != tasks["test"] != tasks["train"]


def test_an_invalid_split_is_a_config_error_at_make():
    with pytest.raises(ConfigError, match=r"split must be one of \['train', 'val', 'test'\], got 'dev'"):
        rlgym_llm.make("rlgym/Search-v0", split="dev")


def test_naming_a_question_of_another_split_raises_and_names_that_split(cache):
    envs = {s: rlgym_llm.make("rlgym/Search-v0", split=s, cache_dir=cache, **TIER) for s in SPLITS}
    question = envs["test"].unwrapped.questions[5]
    envs["test"].reset(seed=0, options={"question": question})
    assert envs["test"].unwrapped.task.prompt == question
    for split in ("train", "val"):
        with pytest.raises(ValueError, match=f"belongs to the 'test' split, not this env's '{split}' split"):
            envs[split].reset(seed=0, options={"question": question})
    with pytest.raises(ValueError, match="is not asked in any split"):
        envs["train"].reset(seed=0, options={"question": "Who founded Nowhere Works?"})
    with pytest.raises(ValueError, match=r"the 'val' split's questions"):
        envs["val"].reset(seed=0, options={"index": len(envs["val"].unwrapped.questions)})


@pytest.mark.parametrize(("kwargs", "episodes"), [(TIER, 40), (DEFAULT, 30)], ids=["learnable", "default"])
def test_the_oracle_solves_every_split(kwargs, episodes, cache):
    for split in SPLITS:
        env = rlgym_llm.make("rlgym/Search-v0", split=split, cache_dir=cache, **kwargs)
        agent, wins, worlds = SearchOracle(), 0, set()
        for seed in range(episodes):
            messages, _ = env.reset(seed=seed)
            agent.reset(env.unwrapped.task)
            worlds.add(env.unwrapped.task.meta["world"])
            while True:
                messages, reward, terminated, truncated, _ = env.step(agent.act(messages))
                if terminated or truncated:
                    break
            wins += reward
        assert wins / episodes >= 0.95, (split, wins)
        assert len(worlds) > (1 if kwargs is TIER else 0)  # the tier's episodes search several worlds


def _qa_set(tmp_path, rows):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"id": "d0", "title": "Almanac", "text": "Facts about many things."}) + "\n")
    qa = tmp_path / "qa.jsonl"
    qa.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return {"corpus_path": str(corpus), "qa_path": str(qa), "cache_dir": str(tmp_path / "cache")}


def test_a_qa_set_is_partitioned_by_the_hash_of_its_questions(tmp_path):
    rows = [{"question": f"What is item {i} called?", "answers": [f"Name{i}"]} for i in range(120)]
    paths = _qa_set(tmp_path, rows)
    envs = {s: SearchEnv(split=s, **paths) for s in SPLITS}
    pools = split_pools(lambda s: envs[s], seeds=range(400))
    assert_disjoint(pools)
    asked = {s: set(envs[s].questions) for s in SPLITS}
    assert set().union(*asked.values()) == {r["question"] for r in rows}  # every row is in exactly one split
    assert all(asked[s] == {q for q in asked[s] if split_of(q) == s} and asked[s] for s in SPLITS)
    with pytest.raises(ValueError, match=r"belongs to the '(val|test)' split, not this env's 'train' split"):
        envs["train"].reset(seed=0, options={"question": next(iter(asked["val"] | asked["test"]))})


def test_a_qa_sets_split_column_decides_and_is_checked(tmp_path):
    rows = [
        {"question": f"What is item {i} called?", "answers": [f"Name{i}"], "split": SPLITS[i % 3]} for i in range(9)
    ]
    envs = {s: SearchEnv(split=s, **_qa_set(tmp_path, rows)) for s in SPLITS}
    assert {s: len(envs[s].questions) for s in SPLITS} == dict.fromkeys(SPLITS, 3)
    assert set(envs["train"].questions) == {r["question"] for r in rows if r["split"] == "train"}
    with pytest.raises(ValueError, match="belongs to the 'test' split"):
        envs["val"].reset(seed=0, options={"question": rows[2]["question"]})
    with pytest.raises(DataFileError, match="2 of 3 rows have a split"):
        SearchEnv(**_qa_set(tmp_path, [*rows[:2], {"question": "Q?", "answers": ["Quill"]}]))
    with pytest.raises(DataFileError, match="in two splits"):
        SearchEnv(**_qa_set(tmp_path, [rows[0], {**rows[0], "split": "test"}]))
    with pytest.raises(DataFileError, match="split must be one of"):
        SearchEnv(**_qa_set(tmp_path, [{**rows[0], "split": "dev"}]))
    with pytest.raises(ConfigError, match="none of its 1 questions falls in split 'val'"):
        SearchEnv(split="val", **_qa_set(tmp_path, [rows[0]]))

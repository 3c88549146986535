"""`rlgym/Search-v0`: the env contract, tools, signals, grading, the BM25 caches and custom corpora."""

import json
import subprocess
import sys

import pytest
from gymnasium.utils.env_checker import check_env

import rlgym_llm
from rlgym_envs.search.corpus import Document
from rlgym_envs.search.env import SearchEnv
from rlgym_envs.search.index import BM25Index, get_index
from rlgym_llm.core.types import signal_problems


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("search-cache")


@pytest.fixture
def env(cache):
    return rlgym_llm.make("rlgym/Search-v0", cache_dir=cache)


def call(name, **arguments):
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c1", "function": {"name": name, "arguments": arguments}}],
    }


def test_registered_and_passes_gymnasiums_checker(env):
    assert "rlgym/Search-v0" in rlgym_llm.list_envs()
    check_env(env.unwrapped)


def test_passes_the_project_checker(cache):
    report = rlgym_llm.check_env(SearchEnv(cache_dir=cache))
    assert all(not c.failures for c in report.checks)


def test_same_seed_same_task_and_opening(cache):
    a, b = SearchEnv(cache_dir=cache), SearchEnv(cache_dir=cache)
    for seed in range(5):
        (oa, ia), (ob, ib) = a.reset(seed=seed), b.reset(seed=seed)
        assert oa == ob and ia == ib and a.task == b.task
    ids, hops = set(), set()
    for seed in range(30):
        ids.add(a.reset(seed=seed)[1]["task_id"])
        hops.add(a.task.meta["hops"])
    assert len(ids) > 20 and hops == {1, 2, 3}


def test_ground_truth_is_on_the_task_and_never_in_opening_or_answer_feedback(env):
    for seed in range(60):
        opening, _ = env.reset(seed=seed)
        task = env.unwrapped.task
        assert task.answer == task.hidden["answers"][0] and task.hidden["gold_docs"]
        assert task.secrets() == []  # search results legitimately contain the answer; see SearchTask
        feedback, reward, terminated, _, _ = env.step(call("answer", text="Nobody In Particular"))
        assert terminated and reward == 0.0
        for msg in opening + feedback:
            for answer in task.hidden["answers"]:
                assert answer.lower() not in msg["content"].lower()


def test_search_returns_bounded_ranked_results_with_snippets(env):
    env.reset(seed=0)
    start = env.unwrapped.task.hidden["start"]
    (msg,), _, _, _, info = env.step(call("search", query=start, k=4))
    lines = msg["content"].splitlines()
    assert msg["role"] == "tool" and msg["tool_call_id"] == "c1" and 1 <= len(lines) <= 4
    assert lines[0].startswith(f"1. [{env.unwrapped.task.hidden['gold_docs'][0]}] {start}:")
    assert info["signals"]["tool_ok"] is True and info["signals"]["gold_retrieved"] is True
    (msg,), *_ = env.step(call("search", query="zzzqqq xxyyzz"))
    assert msg["content"].startswith("No documents match")


@pytest.mark.parametrize(
    "action, needle",
    [
        (call("search", query="x", k=11), "invalid arguments for search"),
        (call("search", query=""), "invalid arguments for search"),
        (call("open", doc_id="nope-1"), "no document with id 'nope-1'"),
        (call("browse", url="x"), "unknown tool"),
    ],
)
def test_bad_calls_become_error_observations(env, action, needle):
    env.reset(seed=1)
    (msg,), reward, terminated, truncated, info = env.step(action)
    assert needle in msg["content"] and msg["content"].startswith("Error")
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert info["signals"]["tool_ok"] is False


def test_text_without_tool_call_gets_a_nudge(env):
    env.reset(seed=1)
    (msg,), _, terminated, _, info = env.step("I think it is Paris.")
    assert msg["role"] == "user" and "Use a tool" in msg["content"] and not terminated
    assert info["signals"]["tool_ok"] is None


def test_open_and_answer_grade_with_em_reward_and_f1_component(env):
    env.reset(seed=0, options={"hops": 1})
    task = env.unwrapped.task
    (msg,), *_ = env.step(call("open", doc_id=task.hidden["gold_docs"][0]))
    assert task.answer in msg["content"]  # the page states the answer
    partial = task.answer.split()[0] + " extra"
    _, reward, terminated, _, info = env.step(call("answer", text=partial))
    assert terminated and reward == 0.0 and info["outcome"]["reward"] == 0.0
    assert 0.0 < info["outcome"]["components"]["f1"] < 1.0
    env.reset(seed=0, options={"hops": 1})
    _, reward, _, _, info = env.step(call("answer", text=f"  the {task.answer.upper()}. "))
    assert reward == 1.0 and info["outcome"] == {"reward": 1.0, "components": {"em": 1.0, "f1": 1.0}}
    assert info["signals"]["reward_components"] == {"em": 1.0, "f1": 1.0}


def test_calls_after_answer_are_not_run(env):
    env.reset(seed=2)
    turn = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "a", "function": {"name": "answer", "arguments": {"text": "x"}}},
            {"id": "b", "function": {"name": "search", "arguments": {"query": "x"}}},
        ],
    }
    msgs, _, terminated, _, info = env.step(turn)
    assert terminated and [m["tool_call_id"] for m in msgs] == ["a", "b"] and "not run" in msgs[1]["content"]
    assert info["signals"]["tool_ok"] is False


def test_subgoals_track_gold_documents_hop_by_hop(env):
    env.reset(seed=0, options={"hops": 3})
    gold = env.unwrapped.task.hidden["gold_docs"]
    seen = []
    # (page, hops found so far, hops this turn found first): progress pays the new ones, once
    opens = [("misc-000", 0, 0), (gold[0], 1, 1), (gold[0], 1, 0), (gold[2], 2, 1), (gold[1], 3, 1)]
    for doc_id, found, new in opens:
        _, _, _, _, info = env.step(call("open", doc_id=doc_id))
        sig = info["signals"]
        assert signal_problems(sig) == []
        assert sig["subgoals"] == [found, 3] and sig["progress"] == pytest.approx(new / 3)
        assert sig["gold_retrieved"] is (new > 0)
        seen.append(sig["state_key"])
    assert seen[1] == seen[2] != seen[0]  # re-opening a page leaves the state unchanged


def test_turn_limit_truncates_with_an_outcome(env):
    env.reset(seed=0)
    for _ in range(10):
        _, _, terminated, truncated, info = env.step(call("search", query="river trade"))
    assert truncated and not terminated and info["truncated_by"] == "turn_limit"
    assert info["outcome"] == {"reward": 0.0, "components": {"em": 0.0, "f1": 0.0}}


def test_index_is_shared_in_process_and_cached_on_disk(tmp_path):
    docs = [Document(f"d{i}", f"Title {i}", f"word{i} shared text {i}") for i in range(20)]
    index = BM25Index(docs, cache_dir=tmp_path)
    assert index.source == "built" and (tmp_path / index.key / "params.index.json").exists()
    again = BM25Index(docs, cache_dir=tmp_path)
    assert again.source == "disk"
    assert [(d.id, round(s, 5)) for d, s in again.search("word7 text", 3)] == [
        (d.id, round(s, 5)) for d, s in index.search("word7 text", 3)
    ]
    assert again.search("word7", 3)[0][0].id == "d7"
    edited = [*docs[:-1], Document("d19", "Title 19", "changed")]
    assert BM25Index(edited, cache_dir=False).key != index.key  # the key hashes the content
    assert get_index(docs, tmp_path) is get_index(list(docs), tmp_path)


def test_envs_of_a_group_share_one_index(cache):
    assert SearchEnv(cache_dir=cache).index is SearchEnv(cache_dir=cache).index


def test_missing_bm25s_raises_a_helpful_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "bm25s", None)
    with pytest.raises(rlgym_llm.MissingDependencyError, match=r"rlgym-llm\[search\]"):
        BM25Index([Document("a", "A", "alpha")], cache_dir=False)


def test_importing_the_env_module_does_not_import_bm25s():
    code = "import rlgym_envs.search.env, sys; assert 'bm25s' not in sys.modules and 'scipy' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.filterwarnings("ignore:.*alternative render modes")
def test_custom_corpus_and_qa(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "\n".join(
            json.dumps(d)
            for d in [
                {"id": "k1", "title": "Komodo", "text": "The komodo dragon lives on Rinca."},
                {"id": "k2", "title": "Rinca", "text": "Rinca is an island of Indonesia."},
            ]
        )
    )
    qa = tmp_path / "qa.jsonl"
    qa.write_text(
        json.dumps({"question": "Where does the komodo dragon live?", "answers": ["Rinca"], "gold_docs": ["k1"]})
        + "\n"
        + json.dumps({"question": "Which country is Rinca in?", "answers": ["Indonesia"]})
    )
    env = SearchEnv(corpus_path=corpus, qa_path=qa, cache_dir=tmp_path / "cache")
    check_env(env)
    env.reset(seed=0, options={"index": 0})
    (msg,), _, _, _, info = env.step(call("search", query="komodo dragon", k=2))
    assert msg["content"].startswith("1. [k1] Komodo:") and info["signals"]["subgoals"] == [1, 1]
    env.reset(seed=0, options={"index": 1})
    _, reward, _, _, info = env.step(call("answer", text="indonesia"))
    assert reward == 1.0 and info["signals"]["subgoals"] is None and info["signals"]["progress"] is None
    with pytest.raises(ValueError, match="both corpus_path and qa_path"):
        SearchEnv(corpus_path=corpus)


def test_the_first_answer_is_final_a_second_answer_is_not_paid(env):
    """Issue 16.10: a wrong answer, then the right one on a later step (the attack), pays nothing."""
    env.reset(seed=0, options={"hops": 1})
    task = env.unwrapped.task
    _, reward, terminated, _, info = env.step(call("answer", text="surely wrong"))
    assert (reward, terminated, info["outcome"]["reward"]) == (0.0, True, 0.0)
    (msg,), reward, terminated, _, info = env.step(call("answer", text=task.answer))
    assert "not run" in msg["content"] and reward == 0.0 and terminated
    assert info["outcome"]["reward"] == 0.0 and env.unwrapped.submitted == "surely wrong"
    # control: the same right answer, given first, is paid
    env.reset(seed=0, options={"hops": 1})
    assert env.step(call("answer", text=task.answer))[1] == 1.0


def test_a_gold_answer_that_normalises_to_empty_is_refused_at_load(tmp_path):
    """Issue 16.10: gold "The" would be matched by any stop-word answer ("a", "the", ".")."""
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"id": "d1", "title": "T", "text": "The end."}) + "\n")
    qa = tmp_path / "qa.jsonl"
    qa.write_text(
        json.dumps({"question": "Fine?", "answers": ["end"]})
        + "\n"
        + json.dumps({"question": "Which article?", "answers": ["The"]})
        + "\n"
    )
    with pytest.raises(ValueError, match=r"qa.jsonl:2: .*\['The'\] normalise to the empty string"):
        SearchEnv(corpus_path=corpus, qa_path=qa, cache_dir=tmp_path / "cache")


def test_an_empty_reply_matches_no_answer():
    from rlgym_envs.search.corpus import exact_match

    assert exact_match("the", ["The"]) == 0.0 and exact_match(" . ", [""]) == 0.0
    assert exact_match("The Rinca.", ["rinca"]) == 1.0

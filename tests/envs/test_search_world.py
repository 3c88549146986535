"""The Search env's generated world, corpus loaders and answer scoring."""

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlgym_envs.search.corpus import Document, exact_match, load_corpus, load_qa, normalize_answer, token_f1
from rlgym_envs.search.world import RELATIONS, generate_world


def test_world_is_deterministic_per_seed_and_differs_across_seeds():
    a, b, c = generate_world(0), generate_world.__wrapped__(0), generate_world(1)
    assert a.documents == b.documents and a.questions == b.questions  # a fresh build, not the lru_cache hit
    assert {d.title for d in a.documents}.isdisjoint({d.title for d in c.documents if not d.id.startswith("misc")})


def test_questions_cover_one_to_three_hops_and_are_grounded():
    world = generate_world(0)
    text = {d.id: d.text for d in world.documents}
    assert {q.hops for q in world.questions} == {1, 2, 3}
    assert len({q.text for q in world.questions}) == len(world.questions)  # no question asked twice
    for q in world.questions:
        assert len(q.gold_docs) == q.hops
        assert re.search(rf"\b{re.escape(q.answer)}\b", text[q.gold_docs[-1]])  # the last page states the answer
        assert q.start in q.text and q.answer not in q.text
        assert all(r in RELATIONS for r in q.relations)


def test_entity_titles_are_unique_so_each_hop_has_one_page():
    for seed in range(3):
        titles = [d.title for d in generate_world(seed).documents]
        assert len(titles) == len(set(titles))


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**31), people=st.integers(4, 20))
def test_any_seed_and_size_generates_a_verified_world(seed, people):
    world = generate_world(seed, people=people, distractors=5)  # raises if a question fails verification
    assert world.questions and len({d.id for d in world.documents}) == len(world.documents)


def test_bad_world_sizes_are_refused():
    with pytest.raises(ValueError, match="people >= 4"):
        generate_world(0, people=2)


def test_normalisation_and_scores_match_squad_by_hand():
    assert normalize_answer("  The Keltara  Institute! ") == "keltara institute"
    assert exact_match("the keltara institute", ["Keltara Institute"]) == 1.0
    assert exact_match("Keltara", ["Keltara Institute"]) == 0.0
    assert token_f1("Keltara", ["Keltara Institute"]) == pytest.approx(2 / 3)  # p=1, r=1/2
    assert token_f1("Keltara Works", ["Dravenmoor", "Keltara Institute"]) == pytest.approx(0.5)
    assert token_f1("", ["x"]) == 0.0


@given(st.text(max_size=30), st.lists(st.text(max_size=30), min_size=1, max_size=3))
def test_scores_are_bounded_and_exact_match_implies_full_f1(pred, answers):
    em, f1 = exact_match(pred, answers), token_f1(pred, answers)
    assert 0.0 <= f1 <= 1.0 and em in (0.0, 1.0)
    if em:
        assert f1 == 1.0
    # A gold answer matches itself, unless it normalises to "" (load_qa refuses those; "" matches nothing).
    assert exact_match(answers[0], answers) == float(bool(normalize_answer(answers[0])))


def _write(path, rows):
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def test_loaders_read_valid_jsonl(tmp_path):
    corpus = _write(tmp_path / "c.jsonl", [{"id": "a", "title": "A", "text": "alpha"}, {"id": "b", "text": "beta"}])
    qa = _write(tmp_path / "q.jsonl", [{"question": "q?", "answers": ["alpha"], "gold_docs": ["a"]}])
    docs = load_corpus(corpus)
    assert docs == (Document("a", "A", "alpha"), Document("b", "", "beta"))
    (item,) = load_qa(qa, doc_ids=[d.id for d in docs])
    assert item.answers == ("alpha",) and item.gold_docs == ("a",)


def test_loaders_list_every_bad_line(tmp_path):
    bad = _write(tmp_path / "c.jsonl", [{"id": "a", "text": "x"}, "{not json", {"id": "", "text": "y"}, {"title": "t"}])
    with pytest.raises(ValueError, match="3 bad line") as e:
        load_corpus(bad)
    assert all(f"c.jsonl:{n}" in str(e.value) for n in (2, 3, 4))
    dupes = _write(tmp_path / "d.jsonl", [{"id": "a", "text": "x"}, {"id": "a", "text": "y"}])
    with pytest.raises(ValueError, match="duplicate document ids"):
        load_corpus(dupes)
    qa = _write(tmp_path / "q.jsonl", [{"question": "q?", "answers": ["x"], "gold_docs": ["zz"]}])
    with pytest.raises(ValueError, match="not in the corpus"):
        load_qa(qa, doc_ids=["a"])
    with pytest.raises(ValueError, match="bad line"):
        load_qa(_write(tmp_path / "e.jsonl", [{"question": "q?", "answers": []}]))

"""A seeded fictional world: entities with invented names, their relations, documents and multi-hop questions.

A model cannot have memorised this world, so answering its questions takes real retrieval. Every relation
is functional (one object per subject) and names are unique, so a chain of relations from a named entity
has exactly one answer by construction; `generate_world` also re-checks every question against the fact
table and against the rendered documents.

Content splits: `generate_world(seed, split="test")` builds its world from the test share of the name
space only. Every name word and every year belongs to exactly one split (a stable hash,
`rlgym_llm.core.splits.split_of`), so the worlds of different splits share no entity, no fact and no
answer: a policy that memorised every train fact knows nothing about a test world.

    world = generate_world(seed=0)
    q = world.questions[0]
    q.text    # "In which city is the organisation that employs Varo Keltin headquartered?"
    q.answer  # "Dravenmoor"
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from rlgym_envs.search.corpus import Document, normalize_answer
from rlgym_llm.core.splits import SPLITS, check_split, split_of

# Entity kinds and the functional relations between them: name -> (subject kind, object kind).
# Object kind "year" is a literal attribute, so it can only end a chain.
RELATIONS: dict[str, tuple[str, str]] = {
    "born_in": ("person", "city"),
    "works_at": ("person", "org"),
    "birth_year": ("person", "year"),
    "headquartered_in": ("org", "city"),
    "founded_by": ("org", "person"),
    "founded_year": ("org", "year"),
    "located_in": ("city", "country"),
    "capital": ("country", "city"),
    "held_in": ("event", "city"),
    "organised_by": ("event", "org"),
}

# How a relation reads as a noun phrase around a description `x` of its subject ...
_PHRASE = {
    "born_in": "the city where {x} was born",
    "works_at": "the organisation that employs {x}",
    "headquartered_in": "the city where {x} is headquartered",
    "founded_by": "the person who founded {x}",
    "located_in": "the country in which {x} lies",
    "capital": "the capital of {x}",
    "held_in": "the city that hosts {x}",
    "organised_by": "the organisation that organises {x}",
}
# ... and as the final question about `x`.
_QUESTION = {
    "born_in": "In which city was {x} born?",
    "works_at": "Which organisation employs {x}?",
    "birth_year": "In what year was {x} born?",
    "headquartered_in": "In which city is {x} headquartered?",
    "founded_by": "Who founded {x}?",
    "founded_year": "In what year was {x} founded?",
    "located_in": "In which country is {x}?",
    "capital": "What is the capital of {x}?",
    "held_in": "In which city is {x} held?",
    "organised_by": "Which organisation organises {x}?",
}

_ONSETS = ["b", "d", "k", "l", "m", "n", "r", "s", "t", "v", "z", "th", "dr", "kr", "br", "gr", "st", "qu"]
_VOWELS = ["a", "e", "i", "o", "u", "ae", "ei", "ou"]
_CODAS = ["", "", "", "n", "r", "l", "s", "th", "k", "x"]
_ORG_SUFFIXES = ["Institute", "Works", "Guild", "Foundry", "Collective", "Company", "Society", "Laboratories"]
_CITY_SUFFIXES = ["", "", "moor", "ford", "holm", "grad", "vale", "port"]
_COUNTRY_SUFFIXES = ["ia", "and", "istan", "ora"]
_EVENT_KINDS = ["Festival", "Fair", "Summit", "Regatta", "Congress", "Games"]
_OCCUPATIONS = ["cartographer", "engineer", "botanist", "archivist", "glassblower", "surveyor", "chemist", "weaver"]
_ORG_KINDS = ["a research institute", "a trading house", "a shipbuilder", "a publishing house", "a mining concern"]
_TOPICS = ["local cuisine", "river trade", "old maps", "winter customs", "folk music", "railway timetables"]


@dataclass(frozen=True)
class Question:
    """A multi-hop question over the world, with its ground truth.

    Args:
        id: stable id within the world, e.g. `"q0042"`.
        text: the question as the model sees it.
        answer: the unique answer (an entity name or a year).
        start: the name of the entity the question mentions.
        relations: the relation of each hop, in order (`"works_at"`, `"headquartered_in"`).
        gold_docs: per hop, the id of the document that states that hop's fact.
    """

    id: str
    text: str
    answer: str
    start: str
    relations: tuple[str, ...]
    gold_docs: tuple[str, ...]

    @property
    def hops(self) -> int:
        return len(self.relations)


@dataclass(frozen=True)
class World:
    """The generated world: documents (entity pages and distractors) and every valid question."""

    seed: int
    documents: tuple[Document, ...]
    questions: tuple[Question, ...]


def _name(rng: np.random.Generator, syllables: int) -> str:
    parts = []
    for _ in range(syllables):
        parts.append(_ONSETS[rng.integers(len(_ONSETS))] + _VOWELS[rng.integers(len(_VOWELS))])
    return ("".join(parts) + _CODAS[rng.integers(len(_CODAS))]).capitalize()


def in_split(kind: str, value: str, split: str | None) -> bool:
    """Whether a name word or a year (`kind` "name" or "year") belongs to `split` (`None`: every split)."""
    return split is None or split_of(f"search-{kind}:{value.lower()}") == split


class _Names:
    """Draws name words that are unique across the whole world, so no two entities share a name word, and
    that belong to the world's split, so no two splits share one."""

    def __init__(self, rng: np.random.Generator, split: str | None = None):
        self.rng = rng
        self.split = split
        self.words: set[str] = set()

    def word(self, syllables: int, suffix: str = "") -> str:
        while True:
            w = _name(self.rng, syllables) + suffix
            if w.lower() not in self.words and len(w) >= 4 and in_split("name", w, self.split):
                self.words.add(w.lower())
                return w

    def year(self, low: int, high: int) -> str:
        """A year in [low, high) of the world's split (years are answers too)."""
        while True:
            y = str(int(self.rng.integers(low, high)))
            if in_split("year", y, self.split):
                return y


def _pick(rng: np.random.Generator, items: list[str]) -> str:
    return items[int(rng.integers(len(items)))]


def _entities(
    rng: np.random.Generator, people: int, split: str | None = None
) -> tuple[dict[str, str], dict[tuple[str, str], str]]:
    """Draw entity names (name -> kind) and the fact table ((subject, relation) -> object), from `split`'s
    names and years."""
    names = _Names(rng, split)
    n_org, n_city, n_country, n_event = (
        max(3, people // 3),
        max(4, people // 3),
        max(2, people // 10),
        max(2, people // 4),
    )
    countries = [names.word(2, _pick(rng, _COUNTRY_SUFFIXES)) for _ in range(n_country)]
    cities = [names.word(int(rng.integers(2, 4)), _pick(rng, _CITY_SUFFIXES)) for _ in range(n_city)]
    orgs = [f"{names.word(2)} {_pick(rng, _ORG_SUFFIXES)}" for _ in range(n_org)]
    persons = [f"{names.word(2)} {names.word(2)}" for _ in range(people)]
    events = [f"{names.word(2)} {_pick(rng, _EVENT_KINDS)}" for _ in range(n_event)]
    # Suffixes such as "Institute" repeat across orgs, but the first word of each name is unique.
    kind = {**dict.fromkeys(countries, "country"), **dict.fromkeys(cities, "city"), **dict.fromkeys(orgs, "org")}
    kind |= {**dict.fromkeys(persons, "person"), **dict.fromkeys(events, "event")}

    facts: dict[tuple[str, str], str] = {}
    for i, city in enumerate(cities):
        # The first cities are the capitals, one per country, so every country has a capital in it.
        country = countries[i] if i < n_country else _pick(rng, countries)
        facts[(city, "located_in")] = country
        if i < n_country:
            facts[(country, "capital")] = city
    for org in orgs:
        facts[(org, "headquartered_in")] = _pick(rng, cities)
        facts[(org, "founded_year")] = names.year(1700, 1990)
    for person in persons:
        facts[(person, "born_in")] = _pick(rng, cities)
        facts[(person, "works_at")] = _pick(rng, orgs)
        facts[(person, "birth_year")] = names.year(1900, 2000)
    for org in orgs:
        facts[(org, "founded_by")] = _pick(rng, persons)
    for event in events:
        facts[(event, "held_in")] = _pick(rng, cities)
        facts[(event, "organised_by")] = _pick(rng, orgs)
    return kind, facts


def _indefinite(noun: str) -> str:
    return f"{'an' if noun[0] in 'aeiou' else 'a'} {noun}"


def _doc_id(kind: str, index: int) -> str:
    return f"{kind}-{index:03d}"


def _render(kind: dict[str, str], facts: dict[tuple[str, str], str], rng: np.random.Generator) -> list[Document]:
    """One page per entity stating its own facts (plus inverse mentions), in a few sentences."""

    def objects_of(relation: str, obj: str) -> list[str]:
        return sorted(s for (s, r), o in facts.items() if r == relation and o == obj)

    by_subject: dict[str, dict[str, str]] = {}
    for (s, r), o in facts.items():
        by_subject.setdefault(s, {})[r] = o
    docs, counters = [], dict.fromkeys(("person", "org", "city", "country", "event"), 0)
    for name, k in kind.items():
        f = by_subject[name]
        short = name.split()[-1] if k == "person" else name
        if k == "person":
            lines = [
                f"{name} is {_indefinite(_pick(rng, _OCCUPATIONS))}.",
                f"{short} was born in {f['born_in']} in {f['birth_year']}.",
                f"{short} works at {f['works_at']}.",
            ]
            lines += [f"{short} founded {org}." for org in objects_of("founded_by", name)]
        elif k == "org":
            lines = [
                f"{name} is {_pick(rng, _ORG_KINDS)}.",
                f"It was founded by {f['founded_by']} in {f['founded_year']}.",
                f"{name} is headquartered in {f['headquartered_in']}.",
            ]
            staff = objects_of("works_at", name)[:3]
            if staff:
                lines.append(f"Its staff include {', '.join(staff)}.")
        elif k == "city":
            lines = [f"{name} is a city located in {f['located_in']}."]
            lines += [f"{name} is the capital of {c}." for c in objects_of("capital", name)]
            lines += [f"{e} is held in {name} every year." for e in objects_of("held_in", name)[:2]]
        elif k == "country":
            lines = [
                f"{name} is a country whose capital is {f['capital']}.",
                f"Travellers praise its {_pick(rng, _TOPICS)}.",
            ]
        else:
            lines = [
                f"The {name} is an annual gathering held in {f['held_in']}.",
                f"The {name} is organised by {f['organised_by']}.",
            ]
        docs.append(Document(id=_doc_id(k, counters[k]), title=name, text=" ".join(lines)))
        counters[k] += 1
    return docs


def _distractors(names: list[str], rng: np.random.Generator, n: int) -> list[Document]:
    """Pages that mention entities without stating any relation, so they compete in retrieval only."""
    templates = [
        "This essay on {t} quotes a letter that mentions {a} and {b}. The letter says little about {t}.",
        "A collector of {t} once catalogued items that had belonged to {a}. A later catalogue adds {b}.",
        "Reviews of a recent book on {t} compare {a} with {b}, without saying what either has done.",
        "A radio programme about {t} invited listeners to write in about {a}; one letter concerned {b}.",
    ]
    docs = []
    for i in range(n):
        a, b = (names[int(j)] for j in rng.choice(len(names), size=2, replace=False))
        topic = _pick(rng, _TOPICS)
        text = _pick(rng, templates).format(t=topic, a=a, b=b)
        docs.append(Document(id=f"misc-{i:03d}", title=f"Notes on {topic} ({i})", text=text))
    return docs


def _questions(
    kind: dict[str, str], facts: dict[tuple[str, str], str], doc_of: dict[str, str], max_hops: int
) -> list[Question]:
    """Every chain of 1..max_hops relations from a named entity that never revisits an entity."""
    out: list[Question] = []

    def extend(start: str, path: list[str], chain: list[str]) -> None:
        subject = chain[-1]
        for rel, (s_kind, o_kind) in RELATIONS.items():
            if kind.get(subject) != s_kind:
                continue
            obj = facts[(subject, rel)]
            if obj in chain:
                continue
            rels = [*path, rel]
            out.append(_make_question(len(out), start, rels, [*chain, obj], doc_of))
            if o_kind != "year" and len(rels) < max_hops:
                extend(start, rels, [*chain, obj])

    for name in kind:
        extend(name, [], [name])
    return out


def _make_question(index: int, start: str, rels: list[str], chain: list[str], doc_of: dict[str, str]) -> Question:
    x = f"the {start}" if start.split()[-1] in _EVENT_KINDS else start
    for rel in rels[:-1]:
        x = _PHRASE[rel].format(x=x)
    text = _QUESTION[rels[-1]].format(x=x)
    return Question(
        id=f"q{index:05d}",
        text=text[0].upper() + text[1:],
        answer=chain[-1],
        start=start,
        relations=tuple(rels),
        gold_docs=tuple(doc_of[s] for s in chain[:-1]),
    )


def _verify(q: Question, kind: dict[str, str], facts: dict[tuple[str, str], str], text_of: dict[str, str]) -> bool:
    """Re-derive the answer from the facts and check each hop's object is written in its gold document."""
    subject = q.start
    for rel, doc in zip(q.relations, q.gold_docs):
        if RELATIONS[rel][0] != kind[subject] or (subject, rel) not in facts:
            return False
        subject = facts[(subject, rel)]
        if not _mentions(text_of[doc], subject):
            return False
    # The answer must not be given away by the question itself.
    return subject == q.answer and not _mentions(q.text, q.answer)


def _mentions(text: str, name: str) -> bool:
    """Whether `name` occurs in `text` as whole words, after answer normalisation."""
    return f" {normalize_answer(name)} " in f" {normalize_answer(text)} "


@functools.lru_cache(maxsize=64)
def generate_world(
    seed: int = 0, people: int = 40, distractors: int = 40, max_hops: int = 3, split: str | None = None
) -> World:
    """Generate the world for `seed` (cached: the G envs of a group share one).

    Args:
        seed: the world seed; the same seed always gives the same documents and questions.
        people: number of people; the numbers of organisations, cities, countries and events scale with it.
        distractors: number of pages that mention entities without stating relations.
        max_hops: the longest relation chain a question may ask about (1..3 is sensible).
        split: build the world from this content split's names and years only (`train`, `val` or `test`;
            see the module docstring); `None` draws from all of them.

    Raises:
        ValueError: a size is out of range.
        ConfigError: `split` is not a split.
    """
    if people < 4 or distractors < 0 or not 1 <= max_hops <= 4:
        raise ValueError(
            f"need people >= 4, distractors >= 0, 1 <= max_hops <= 4; got {people}, {distractors}, {max_hops}"
        )
    # a split's worlds get their own random stream, not the unsplit world's with other names
    rng = np.random.default_rng(seed if split is None else [seed, 1 + SPLITS.index(check_split(split))])
    kind, facts = _entities(rng, people, split)
    docs = _render(kind, facts, rng)
    docs += _distractors(list(kind), rng, distractors)
    doc_of = {d.title: d.id for d in docs if not d.id.startswith("misc-")}
    text_of = {d.id: d.text for d in docs}
    questions = _questions(kind, facts, doc_of, max_hops)
    bad = [q.id for q in questions if not _verify(q, kind, facts, text_of)]
    if bad:  # a bug in the generator, never a property of the seed
        raise AssertionError(f"world {seed}: {len(bad)} questions failed verification, e.g. {bad[:3]}")
    return World(seed=seed, documents=tuple(docs), questions=tuple(questions))

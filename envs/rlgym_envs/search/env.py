"""`rlgym/Search-v0`: answer multi-hop questions by searching and reading a document collection.

By default the collection is a seeded fictional world (`world.py`) whose questions a model cannot have
memorised; `corpus_path` and `qa_path` swap in a user's own JSONL corpus and QA set. Each content split
(`split=`) has its own worlds, built from names and years no other split uses (see `SearchEnv`).

Tools: `search(query, k)` returns ids, titles and snippets from a BM25 index (or, with `retriever="dense"` or
`"hybrid"`, a sentence-embedding index or both fused); `open(doc_id)` returns a full
document; `answer(text)` ends the episode (the first answer is final: a later step runs nothing and pays 0). The reward is the normalised exact match of the answer against any
gold answer (`em`, 0 or 1); token F1 is reported as the `f1` component but not rewarded, so that a partially
right name earns nothing and the reward stays strictly verifiable.

Signals per turn: `tool_ok`, `subgoals` = (hops found, hops) so far, where a hop is found once its gold
document has appeared in search results or been opened; `progress` = the hops this turn found first / hops,
and `gold_retrieved` (extra): whether this turn found a hop first. Progress is paid for new evidence only: a
turn that repeats a search or an open, or runs an equivalent one (other words, other case, a larger `k` that
lists no new gold document), adds no hop and reports `progress` 0 and `gold_retrieved` False, so summing
the turns' progress (a per-turn reward channel does) gives at most the share of hops found, however many
calls a policy makes. `subgoals` holds the running count.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import Field

from rlgym_envs.search.corpus import Document, QAItem, exact_match, load_corpus, load_qa, token_f1
from rlgym_envs.search.retrieval import RETRIEVERS, Retriever, get_retriever
from rlgym_envs.search.world import World, generate_world
from rlgym_llm import (
    AssistantTurn,
    Env,
    Messages,
    Step,
    StepSignals,
    Task,
    Tool,
    ToolResult,
)
from rlgym_llm.core.errors import ConfigError, DataFileError
from rlgym_llm.core.splits import SPLITS, split_of

MAX_K = 10
MIN_SPLIT_QUESTIONS = 200
"""The fewest distinct questions a generated split holds with `worlds=None` (enough to learn on and to
measure held-out success with)."""
MAX_WORLDS = 1000

SYSTEM_PROMPT = (
    "You answer questions by searching a document collection. Tools: search(query, k) lists matching "
    "documents with snippets; open(doc_id) shows a document in full; answer(text) submits your final answer "
    "and ends the episode. The collection describes a fictional world: rely only on what you read in it. "
    "Answer with just the name or year asked for."
)


def split_worlds(world_seed: int, people: int, max_hops: int, worlds: int | None, split: str) -> list[World]:
    """The generated worlds of `split`: `worlds` of them (seeds `world_seed`, `world_seed + 1`, ...), or with
    `worlds=None` the fewest that ask `MIN_SPLIT_QUESTIONS` distinct questions."""
    if worlds is not None:
        return [generate_world(world_seed + j, people, max_hops=max_hops, split=split) for j in range(worlds)]
    built: list[World] = []
    asked: set[str] = set()
    while len(asked) < MIN_SPLIT_QUESTIONS:
        if len(built) == MAX_WORLDS:
            raise ConfigError([f"{MAX_WORLDS} worlds of {people} people ask only {len(asked)} distinct questions"])
        world = generate_world(world_seed + len(built), people, max_hops=max_hops, split=split)
        built.append(world)
        asked.update(q.text for q in world.questions)
    return built


def _owners(rows: Sequence[QAItem], path: str | os.PathLike[str]) -> dict[str, str]:
    """Each question's split: the rows' `split` column when they have one, else the hash of the question.

    Raises:
        DataFileError: some rows have a split and others not, or a question is in two splits.
    """
    marked = sum(item.split is not None for item in rows)
    if 0 < marked < len(rows):
        raise DataFileError(f"{path}: {marked} of {len(rows)} rows have a split; give every row one, or none")
    owner: dict[str, str] = {}
    clashes = []
    for item in rows:
        split = item.split or split_of(item.question)
        if owner.setdefault(item.question, split) != split:
            clashes.append(item.question)
    if clashes:
        raise DataFileError(f"{path}: {len(clashes)} question(s) are in two splits, e.g. {clashes[0][:120]!r}")
    return owner


class Search(Tool):
    """Search the document collection. Returns the ids, titles and snippets of the best matches."""

    name: ClassVar[str] = "search"
    query: str = Field(min_length=1, max_length=500, description="keywords, e.g. a name and what you want to know")
    k: int = Field(default=3, ge=1, le=MAX_K, description=f"number of results, 1 to {MAX_K}")


class Open(Tool):
    """Open one document by its id (as listed by search) and read its full text."""

    name: ClassVar[str] = "open"
    doc_id: str = Field(min_length=1, max_length=200, description="a document id from search results")


class Answer(Tool):
    """Submit your final answer. This ends the episode."""

    name: ClassVar[str] = "answer"
    text: str = Field(max_length=500, description="the answer: just the name or year asked for")


@dataclass(frozen=True)
class SearchTask(Task):
    """A search task. `answer` is the main gold answer; `hidden` holds `answers`, `gold_docs` and, for
    generated worlds, the question's structure (`start`, `relations`) that oracle agents plan with.
    """

    def secrets(self) -> list[str]:
        """None: the answer is meant to be found, and search results legitimately contain it.

        The generic check (secrets never appear in any observation) cannot hold for retrieval tasks. What must
        hold instead, and is tested for this env, is that the opening and the feedback to an answer never
        contain a gold answer; `opening_secrets` lets `check_env` check the openings.
        """
        return []

    def opening_secrets(self) -> list[str]:
        """Every gold answer: a question must never contain its own answer."""
        return [str(a) for a in self.hidden.get("answers", [self.answer]) if str(a).strip()]


class SearchEnv(Env):
    """Multi-hop question answering over a searchable corpus. See the module docstring.

    Content splits (`split`): a generated split is a set of worlds built from that split's own names and
    years (`world.py`), so no entity, fact or answer of a test world occurs in a train or val world, and a
    policy that memorised the train worlds knows nothing about the test ones. Each split holds at least
    200 distinct questions: with `worlds=None` it takes as many worlds (seeds `world_seed`, `world_seed + 1`,
    ...) as that needs, and an episode searches the world its question comes from. A QA set's rows are
    split by their `split` column when they have one, else by a stable hash of the question
    (`rlgym_llm.core.splits.split_of`, as `partition` does). Two tasks are the same task when they ask the same question
    (`Task.key`).

    Args:
        world_seed: seed of the split's first generated world (ignored when `corpus_path` is given).
        world_people: size of each generated world (people; other entity counts scale with it).
        max_hops: the longest questions of the generated worlds, 1 to 3.
        worlds: the number of generated worlds per split; `None`: the fewest that hold
            `MIN_SPLIT_QUESTIONS` distinct questions (one 40-people world; 7 worlds of 4 people and 1 hop).
        corpus_path: a corpus of `{"id", "title", "text"}` rows (JSONL, Parquet or a Hugging Face
            `datasets` folder); needs `qa_path` too.
        qa_path: a QA set of `{"question", "answers", "gold_docs"?, "split"?}` rows, in any of those formats.
        fields, corpus_fields: the QA set's and the corpus's column for each field, e.g. `{"question": "q"}`.
        split: the content pool, `train` (default), `val` or `test` (see above).
        dataset_split: the split to read from `datasets` folders that hold several (default: the only one,
            else `train`); its rows are then split into `split`'s pool like any file's.
        cache_dir: where the indexes are cached (`None`: `~/.cache/rlgym_llm/search`; `False`: no disk cache).
        snippet_chars: the most characters of each search result's snippet.
        retriever: `"bm25"` (default), `"dense"` (all-MiniLM-L6-v2 embeddings; needs the `dense` extra) or
            `"hybrid"` (both, fused by reciprocal rank).
        max_tool_calls, max_observation_chars: the per-turn caps on tool calls run and on the
            characters returned (see `rlgym_llm.Env`).

    Reset options: `{"hops": n}` draws a question with n hops (generated worlds only); `{"index": i}` picks
    question i of the split's pool; `{"question": text}` picks that question (a `ValueError` names the
    split it belongs to when that is not this env's).
    """

    tools = (Search, Open, Answer)
    ignored_call = ToolResult("Error: not run, the episode ended with answer.", ok=False)

    def __init__(
        self,
        world_seed: int = 0,
        world_people: int = 40,
        max_hops: int = 3,
        worlds: int | None = None,
        corpus_path: str | os.PathLike[str] | None = None,
        qa_path: str | os.PathLike[str] | None = None,
        corpus_fields: Mapping[str, str] | None = None,
        fields: Mapping[str, str] | None = None,
        split: str = "train",
        dataset_split: str | None = None,
        cache_dir: str | os.PathLike[str] | bool | None = None,
        snippet_chars: int = 200,
        retriever: str = "bm25",
        max_tool_calls: int = 16,
        max_observation_chars: int = 32_000,
    ):
        super().__init__(max_tool_calls=max_tool_calls, max_observation_chars=max_observation_chars, split=split)
        if retriever not in RETRIEVERS:
            raise ValueError(f"retriever must be one of {RETRIEVERS}, got {retriever!r}")
        if (corpus_path is None) != (qa_path is None):
            raise ValueError("give both corpus_path and qa_path (a corpus and its questions), or neither")
        if worlds is not None and (isinstance(worlds, bool) or not isinstance(worlds, int) or worlds < 1):
            raise ConfigError([f"worlds must be an int >= 1 or None, got {worlds!r}"])
        self._owner: dict[str, str] = {}  # question -> its split, for a QA set's questions
        self._world_args: tuple[int, int, int, int | None] | None = None  # for generated worlds
        if corpus_path is not None and qa_path is not None:
            docs = load_corpus(corpus_path, corpus_fields, dataset_split)
            rows = load_qa(qa_path, doc_ids=[d.id for d in docs], fields=fields, dataset_split=dataset_split)
            self._owner = _owners(rows, qa_path)
            self._items = tuple(item for item in rows if self._owner[item.question] == split)
            if not self._items:
                raise DataFileError(f"{qa_path}: none of its {len(rows)} questions falls in split {split!r}")
            self._structure: tuple[Mapping[str, Any], ...] = ({},) * len(self._items)
            self._world_of: tuple[int, ...] = (0,) * len(self._items)
            self._corpora: list[tuple[Document, ...]] = [docs]
            self.source = f"corpus:{os.fspath(corpus_path)}"
            self._sources = [self.source]
        else:
            self._world_args = (world_seed, world_people, max_hops, worlds)
            built = split_worlds(world_seed, world_people, max_hops, worlds, split)
            questions = [(w, q) for w, world in enumerate(built) for q in world.questions]
            self._items = tuple(QAItem(q.text, (q.answer,), q.gold_docs) for _, q in questions)
            self._structure = tuple({"start": q.start, "relations": list(q.relations)} for _, q in questions)
            self._world_of = tuple(w for w, _ in questions)
            self._corpora = [world.documents for world in built]
            self.source = f"world:{world_seed}:{world_people}:{max_hops}:{split}"
            self._sources = [f"world:{world.seed}:{world_people}:{max_hops}:{split}" for world in built]
        self._retriever_kind, self._cache_dir = retriever, cache_dir
        self._retrievers: dict[int, Retriever] = {}
        self._use_world(0)
        self.snippet_chars = snippet_chars
        self._by_hops: dict[int, list[int]] = {}
        self._by_question: dict[str, int] = {}
        for i, item in enumerate(self._items):
            self._by_hops.setdefault(len(item.gold_docs), []).append(i)
            self._by_question.setdefault(item.question, i)
        self.found: set[int] = set()  # hops whose gold document has been seen
        self.seen: set[str] = set()  # every document id retrieved or opened
        self.submitted: str | None = None

    @property
    def questions(self) -> tuple[str, ...]:
        """The questions of this env's split, in `{"index": i}` order."""
        return tuple(item.question for item in self._items)

    def _use_world(self, world: int) -> None:
        """Search and open in `world`'s documents (its index is built on first use, then shared)."""
        if world not in self._retrievers:
            self._retrievers[world] = get_retriever(self._corpora[world], self._retriever_kind, self._cache_dir)
        self.index = self._retrievers[world]
        self.docs = {d.id: d for d in self._corpora[world]}

    def split_of_question(self, question: str) -> str | None:
        """The split whose pool asks `question` (`None`: no split of this env's data asks it)."""
        if question in self._by_question:
            return self.split
        if self._world_args is None:
            return self._owner.get(question)
        for other in SPLITS:
            if other != self.split:
                built = split_worlds(*self._world_args, other)
                if any(q.text == question for world in built for q in world.questions):
                    return other
        return None

    # --- Env hooks ---------------------------------------------------------------------------------

    def new_episode(self, task: Task) -> None:
        self._use_world(int(task.meta["world"]))
        self.found, self.seen, self.submitted = set(), set(), None

    def episode_over(self) -> bool:
        """The first answer is final: later calls are not run, and a second answer cannot be paid."""
        return self.submitted is not None

    def sample_task(self, options: Mapping[str, Any]) -> SearchTask:
        if "question" in options:
            question = str(options["question"])
            owner = self.split_of_question(question)
            if owner != self.split:
                where = f"belongs to the {owner!r} split" if owner else "is not asked in any split"
                raise ValueError(
                    f"options['question'] {question[:120]!r} {where}, not this env's {self.split!r} split"
                    + (f": make the env with split={owner!r}" if owner else "")
                )
            index = self._by_question[question]
        elif "index" in options:
            index = int(options["index"])
            if not 0 <= index < len(self._items):
                raise ValueError(
                    f"options['index'] must be in [0, {len(self._items)}) (the {self.split!r} split's questions), "
                    f"got {index}"
                )
        else:
            if "hops" in options:
                hops = int(options["hops"])
                if hops not in self._by_hops:
                    raise ValueError(f"options['hops'] must be one of {sorted(self._by_hops)}, got {hops}")
            else:  # uniform over hop counts first, so short questions do not crowd out long ones
                counts = sorted(self._by_hops)
                hops = counts[int(self.np_random.integers(len(counts)))]
            pool = self._by_hops[hops]
            index = pool[int(self.np_random.integers(len(pool)))]
        item, world = self._items[index], self._world_of[index]
        source = self._sources[world]
        digest = hashlib.sha256(f"{source}|{index}|{item.question}".encode()).hexdigest()[:12]
        return SearchTask(
            id=f"search-{digest}",
            prompt=item.question,
            answer=item.answers[0],
            hidden={"answers": list(item.answers), "gold_docs": list(item.gold_docs), **self._structure[index]},
            meta={"hops": len(item.gold_docs), "index": index, "source": source, "world": world},
            key=item.question,
        )

    def opening(self, task: Task) -> Messages:
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": task.prompt}]

    def respond(self, turn: AssistantTurn) -> Step:
        answered_before = self.submitted is not None
        if not turn.tool_calls:
            return Step(
                messages=[{"role": "user", "content": "Use a tool: search, open, or answer to submit your answer."}],
                terminated=answered_before,
                signals=self._signals(tool_ok=None, new_hops=0),
            )
        found_before = len(self.found)
        run = self.run_tools(turn)
        done, outcome = self.submitted is not None, self.outcome()
        return Step(
            messages=run.messages,
            reward=outcome["reward"] if done and not answered_before else 0.0,
            terminated=done,
            signals=self._signals(
                tool_ok=run.ok,
                new_hops=len(self.found) - found_before,
                components=outcome["components"] if done else {},
            ),
        )

    def on_search(self, args: Search) -> str:
        return self._search(args.query, args.k)

    def on_open(self, args: Open) -> ToolResult:
        text, found = self._open(args.doc_id)
        return ToolResult(text, ok=found)

    def on_answer(self, args: Answer) -> str:
        self.submitted = args.text
        # Never say what the right answer was: the feedback must not leak it to later samples.
        return "Answer submitted."

    def outcome(self) -> dict[str, Any]:
        answers = self.task.hidden["answers"]
        if self.submitted is None:
            return {"reward": 0.0, "components": {"em": 0.0, "f1": 0.0}}
        em = exact_match(self.submitted, answers)
        return {"reward": em, "components": {"em": em, "f1": token_f1(self.submitted, answers)}}

    # --- tools -------------------------------------------------------------------------------------

    def _search(self, query: str, k: int) -> str:
        results = self.index.search(query, k)
        if not results:
            return f"No documents match {query[:80]!r}. Try other keywords."
        lines = [f"{i}. [{doc.id}] {doc.title}: {self._snippet(doc, query)}" for i, (doc, _) in enumerate(results, 1)]
        self._see([doc.id for doc, _ in results])
        return "\n".join(lines)

    def _open(self, doc_id: str) -> tuple[str, bool]:
        """The page's text and whether it exists."""
        doc = self.docs.get(doc_id.strip())
        if doc is None:
            return f"Error: no document with id {doc_id[:80]!r}. Use an id exactly as listed by search.", False
        self._see([doc.id])
        return f"[{doc.id}] {doc.title}\n{doc.text}", True

    def _snippet(self, doc: Document, query: str) -> str:
        """The sentence of `doc` sharing most words with the query, so results show why they matched."""
        words = set(query.lower().split())
        sentences = [s.strip() for s in doc.text.replace("\n", " ").split(". ") if s.strip()]
        best = max(sentences, key=lambda s: len(words & set(s.lower().rstrip(".").split())), default="")
        return best if len(best) <= self.snippet_chars else best[: self.snippet_chars - 3] + "..."

    def _see(self, doc_ids: list[str]) -> None:
        """Record seen documents, and the hops whose gold document is among them."""
        self.seen.update(doc_ids)
        self.found |= {i for i, g in enumerate(self.task.hidden["gold_docs"]) if g in doc_ids}

    def _signals(
        self, tool_ok: bool | None, new_hops: int, components: Mapping[str, float] | None = None
    ) -> StepSignals:
        """The turn's signals; `new_hops`: the hops this turn found first (its new evidence, all it is paid for)."""
        total = len(self.task.hidden["gold_docs"])
        key = hashlib.sha256("|".join([self.task.id, *sorted(self.seen)]).encode()).hexdigest()[:16]
        return StepSignals(
            tool_ok=tool_ok,
            subgoals=(len(self.found), total) if total else None,
            progress=new_hops / total if total else None,
            reward_components=dict(components or {}),
            state_key=key,
            extra={"gold_retrieved": new_hops > 0},
        )

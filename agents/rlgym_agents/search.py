"""A scripted oracle for `rlgym/Search-v0` generated worlds: plans from the question's structure, reads the tools.

The oracle knows which relations the question chains (`task.hidden["relations"]`) and the entity it starts
from (named in the question), but not the intermediate entities nor the answer: for each hop it searches for
the current entity, opens that entity's page from the results, and reads the next entity off the page text.
It is the env's upper-bound baseline and a test that every question is answerable with the tools.

    agent = SearchOracle()
    messages, _ = env.reset(seed=0)
    agent.reset(env.unwrapped.task)
    while True:
        messages, reward, terminated, truncated, _ = env.step(agent.act(messages))
        if terminated or truncated:
            break
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from rlgym_llm import AssistantTurn, ToolCall

_NAME = r"([A-Z]\w*(?: [A-Z]\w*)*)"
_YEAR = r"(\d{4})"
# How the world's pages state each relation; group 1 is the relation's object.
READERS: dict[str, re.Pattern[str]] = {
    "born_in": re.compile(rf"was born in {_NAME} in \d{{4}}\."),
    "birth_year": re.compile(rf"was born in [A-Z][\w ]* in {_YEAR}\."),
    "works_at": re.compile(rf"works at {_NAME}\."),
    "headquartered_in": re.compile(rf"is headquartered in {_NAME}\."),
    "founded_by": re.compile(rf"founded by {_NAME} in \d{{4}}\."),
    "founded_year": re.compile(rf"founded by [A-Z][\w ]* in {_YEAR}\."),
    "located_in": re.compile(rf"is a city located in {_NAME}\."),
    "capital": re.compile(rf"whose capital is {_NAME}\."),
    "held_in": re.compile(rf"gathering held in {_NAME}\."),
    "organised_by": re.compile(rf"is organised by {_NAME}\."),
}
_RESULT = re.compile(r"^\d+\. \[([^\]]+)\] ([^:\n]+):", re.MULTILINE)


class SearchOracle:
    """Solves generated-world Search tasks with search → open → read per hop, then answers.

    Args:
        k: results per search; a second search with `fallback_k` results runs if the page is not among them.
        fallback_k: results for the retry search.
    """

    def __init__(self, k: int = 5, fallback_k: int = 10):
        self.k, self.fallback_k = k, fallback_k
        self._calls = 0

    def reset(self, task: Any) -> None:
        """Start on `task` (an env's `task`); reads only the start entity and the relation chain."""
        hidden: Mapping[str, Any] = task.hidden
        if "relations" not in hidden:
            raise ValueError("SearchOracle needs a generated-world task (task.hidden['relations'])")
        self.relations: Sequence[str] = list(hidden["relations"])
        self.subject: str = hidden["start"]
        self.hop = 0
        self.phase = "search"
        self.retried = False
        self._calls = 0

    def act(self, observation: Sequence[Mapping[str, Any]]) -> AssistantTurn:
        """The next turn, given the messages the env returned for the previous one (or the opening)."""
        text = "\n".join(m.get("content", "") for m in observation if m.get("role") == "tool")
        if self.phase == "open":
            doc_id = self._pick(text)
            if doc_id is not None:
                self.phase = "read"
                return self._call("open", doc_id=doc_id)
            if self.retried:
                return self._call("answer", text="unknown")
            self.retried = True
            return self._call("search", query=self.subject, k=self.fallback_k)
        if self.phase == "read":
            match = READERS[self.relations[self.hop]].search(text)
            if match is None:
                return self._call("answer", text="unknown")
            self.subject, self.hop, self.retried = match.group(1), self.hop + 1, False
            if self.hop == len(self.relations):
                return self._call("answer", text=self.subject)
        self.phase = "open"
        return self._call("search", query=self.subject, k=self.k)

    def _pick(self, results: str) -> str | None:
        """The id of the result titled with the current entity's name (its own page)."""
        for doc_id, title in _RESULT.findall(results):
            if title.strip() == self.subject:
                return doc_id
        return None

    def _call(self, name: str, **arguments: Any) -> AssistantTurn:
        self._calls += 1
        return AssistantTurn(tool_calls=(ToolCall(name=name, arguments=arguments, id=f"call_{self._calls}"),))

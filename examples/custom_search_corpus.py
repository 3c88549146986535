"""Register a Search env over your own corpus and QA set, then play one scripted episode.

python examples/custom_search_corpus.py
"""

import json
import re
import sys
import tempfile
from pathlib import Path

import rlgym_llm

DOCS = [
    {"id": "lab", "title": "Orvane Lab", "text": "Orvane Lab studies tidal power. It is headquartered in Kessport."},
    {"id": "kessport", "title": "Kessport", "text": "Kessport is a harbour town on the Selm estuary."},
    {"id": "selm", "title": "Selm", "text": "The Selm is a slow river. Orvane Lab tests turbines in it."},
]
QA = [{"question": "Where is Orvane Lab headquartered?", "answers": ["Kessport"], "gold_docs": ["lab"]}]


def main(workdir: Path) -> float:
    (workdir / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in DOCS))
    (workdir / "qa.jsonl").write_text("\n".join(json.dumps(q) for q in QA))
    rlgym_llm.register(
        "myorg/OrvaneSearch-v0",
        "rlgym_envs.search.env:SearchEnv",
        max_turns=5,
        corpus_path=str(workdir / "corpus.jsonl"),
        qa_path=str(workdir / "qa.jsonl"),
        cache_dir=str(workdir / "index-cache"),
    )
    env = rlgym_llm.make("myorg/OrvaneSearch-v0")
    messages, _ = env.reset(seed=0)
    question = messages[-1]["content"]

    def call(name: str, **arguments) -> dict:
        return {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": name, "arguments": arguments}}],
        }

    # A scripted reader: search the question, open the top hit, read the place off the page.
    (hits,), *_ = env.step(call("search", query=question, k=2))
    top_id = re.search(r"\[(\w+)\]", hits["content"]).group(1)
    (page,), _, _, _, info = env.step(call("open", doc_id=top_id))
    place = re.search(r"headquartered in (\w+)", page["content"]).group(1)
    _, reward, _, _, info = env.step(call("answer", text=place))
    print(f"Q: {question}\nopened {top_id}, answered {place!r}: reward={reward} signals={info['signals']}")
    return reward


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        sys.exit(0 if main(Path(tmp)) == 1.0 else 1)

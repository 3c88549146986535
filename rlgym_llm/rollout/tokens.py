"""Token bookkeeping check: does the incremental context equal a fresh rendering of the chat?

The manager never re-tokenizes: it appends the model's own completion ids and the rendering of each
env reply. This check renders the whole final conversation afresh and compares:
- text drift (an error): the decoded incremental ids differ from the fresh rendering's text, i.e. the
  continuation rendering went wrong (a template that is not prefix-stable, a lost separator);
- re-tokenization mismatch (information): tokenizing the fresh text gives other ids than the ones
  the model generated, which is exactly what re-tokenizing pipelines would have silently trained on.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from rlgym_llm.core.errors import RlgymError
from rlgym_llm.core.types import Messages, Trajectory


class TokenDriftError(RlgymError, ValueError):
    """The incremental context does not match a fresh rendering."""

    failure_kind = "policy"


@dataclass(frozen=True)
class TokenReport:
    drift: bool
    first_diff_char: int | None
    retokenize_equal: bool
    n_tokens: int
    excerpt: str = ""

    def describe(self) -> str:
        if not self.drift:
            return "ok"
        return f"text differs from a fresh rendering at char {self.first_diff_char}: {self.excerpt!r}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_tokens(agent: Any, traj: Trajectory, history: Messages, tools: Any) -> TokenReport:
    """Compare `traj.token_ids` with a fresh rendering of `history` (see module doc)."""
    tokenizer = agent.tokenizer
    ids = traj.token_ids
    incremental = tokenizer.decode(ids, skip_special_tokens=False)
    fresh = agent.render_text(history, tools, generation_prompt=False)
    # The fresh rendering closes the last turn (e.g. "<|im_end|>\n"); the context may stop before that.
    common = fresh[: len(incremental)]
    drift = incremental != common or len(incremental) > len(fresh)
    first = next((i for i, (a, b) in enumerate(zip(incremental, common)) if a != b), None)
    if drift and first is None:
        first = min(len(incremental), len(common))
    retok = list(tokenizer.encode(common, add_special_tokens=False)) == list(ids)
    excerpt = incremental[max(0, (first or 0) - 20) : (first or 0) + 40] if drift else ""
    return TokenReport(drift=drift, first_diff_char=first, retokenize_equal=retok, n_tokens=len(ids), excerpt=excerpt)

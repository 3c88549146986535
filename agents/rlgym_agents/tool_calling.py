"""The tool-calling agent: chat-template rendering of env messages and parsing of model tool calls.

Rendering uses the tokenizer's own chat template (with the env's tool schemas). After the first
prompt, the context only ever grows: `render_continuation` returns the ids to append after a
completion (the env's reply and the next generation prompt), computed as the difference between two
renderings, so earlier turns are never re-tokenized.

Parsing reads Hermes-style calls, `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`.
Documented plain-text fallback, used only when the text has no `<tool_call>` tag: a JSON object
with `name` and `arguments` keys standing alone in the text (optionally in a ```json fence).
A call that cannot be parsed (bad JSON, missing name, cut off by the token limit) is returned in
`AssistantTurn.parse_errors`; the env answers it with an error message. Arguments are validated
against the tool's schema by the env (its pydantic model), where untrusted input is checked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from rlgym_llm import AssistantTurn, Message, Messages, ToolCall

_CALL_RE = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_FENCE_RE = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)


def parse_tool_calls(text: str) -> AssistantTurn:
    """Parse model text into an `AssistantTurn` (content without the call markup, calls, errors)."""
    calls: list[ToolCall] = []
    errors: list[str] = []
    if "<tool_call>" in text:
        bodies = _CALL_RE.findall(text)
        content = _CALL_RE.sub("", text)
        if "<tool_call>" in content:  # an opening tag with no closing tag: cut off or malformed
            errors.append(f"tool call #{len(bodies)} is not closed with </tool_call>")
            content = content.split("<tool_call>", 1)[0]
        for body in bodies:
            _read_call(body, len(calls) + len(errors), calls, errors)
        return AssistantTurn(content=content.strip(), tool_calls=tuple(calls), parse_errors=tuple(errors))
    # Plain-text fallback: a lone JSON object {"name": ..., "arguments": ...}.
    fenced = _FENCE_RE.search(text)
    candidate = fenced.group(1) if fenced else text.strip()
    if candidate.startswith("{") and candidate.endswith("}") and '"name"' in candidate:
        _read_call(candidate, 0, calls, errors)
        if calls:
            return AssistantTurn(
                content=text.replace(fenced.group(0) if fenced else candidate, "").strip(), tool_calls=tuple(calls)
            )
    return AssistantTurn(content=text.strip())


def _read_call(body: str, index: int, calls: list[ToolCall], errors: list[str]) -> None:
    try:
        obj = json.loads(body)
    except json.JSONDecodeError as e:
        errors.append(f"tool call #{index} is not valid JSON ({e.msg} at char {e.pos})")
        return
    if not isinstance(obj, dict):
        errors.append(f'tool call #{index} must be a JSON object like {{"name": ..., "arguments": {{...}}}}')
        return
    try:
        calls.append(ToolCall.from_any({**obj, "id": obj.get("id") or f"call_{index}"}, index))
    except ValueError as e:
        errors.append(str(e))


class ToolCallingAgent:
    """Render with a tokenizer's chat template, parse Hermes tool calls.

    Args:
        tokenizer: a Hugging Face tokenizer with a chat template that accepts `tools=`.
        system_prompt: prepended as a system message when the env's opening has none.
        full_history: render continuations against the whole history (for chat templates whose
            rendering of a message depends on earlier ones); off by default, see `render_continuation`.
    """

    def __init__(self, tokenizer: Any, system_prompt: str | None = None, full_history: bool = False):
        self.tokenizer = tokenizer
        self.system_prompt = system_prompt
        self.full_history = full_history
        self.eos_text = tokenizer.eos_token or ""

    def prepare(self, opening: Messages) -> Messages:
        """The first messages the model sees (the env's opening, plus our system prompt if any)."""
        if self.system_prompt and not (opening and opening[0]["role"] == "system"):
            return [{"role": "system", "content": self.system_prompt}, *opening]
        return list(opening)

    def render_text(self, messages: Messages, tools: Sequence[dict] | None, generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(
            list(messages),
            tools=list(tools) if tools else None,
            add_generation_prompt=generation_prompt,
            tokenize=False,
        )

    def render_prompt(self, messages: Messages, tools: Sequence[dict] | None) -> list[int]:
        """Token ids of the whole conversation followed by the assistant generation prompt."""
        return self._encode(self.render_text(messages, tools, generation_prompt=True))

    def render_continuation(
        self, history: Messages, new_messages: Messages, tools: Sequence[dict] | None, completion: Any
    ) -> list[int]:
        """Ids to append after the last completion: the env's reply and the next generation prompt.

        The difference between rendering `[last assistant message]` and `[last assistant message,
        *new_messages]`: rendering only the last turn keeps the cost per turn constant (the whole
        history would make it quadratic). Templates whose rendering of new messages depends on older
        ones need `full_history=True`; the manager's token check reports such drift.

        Args:
            history: the conversation up to and including the last assistant message (its raw text).
            new_messages: the env's reply to it.
            tools: the tool schemas the prompt was rendered with.
            completion: the last completion (`token_ids`); if it did not end with the EOS token (cut
                off, or stopped on another stop id) the template's end-of-turn marker is added here, as
                context the model did not generate.
        """
        completion_closed = self._closed(completion)
        context = history if self.full_history else history[-1:]
        tools = tools if self.full_history else None
        before = self.render_text(context, tools, generation_prompt=False)
        after = self.render_text([*context, *new_messages], tools, generation_prompt=True)
        if not after.startswith(before):
            raise ValueError("the chat template is not prefix-stable: rendering more messages changed earlier text")
        # The template closes the assistant turn with EOS plus, maybe, separator text (e.g. "\n").
        # The completion already holds EOS when it stopped on it; only what follows EOS is new.
        cut = before.rfind(self.eos_text) if self.eos_text else -1
        tail = (
            before[cut + len(self.eos_text) :] if cut >= 0 and completion_closed else before[cut:] if cut >= 0 else ""
        )
        return self._encode(tail + after[len(before) :])

    def assistant_message(self, completion: Any) -> Message:
        """The assistant message to keep in the history: the raw text of the completion's ids (tool-call
        markup and any special tokens the model emitted included, the closing EOS excluded), so a
        fresh rendering reproduces what the model actually wrote."""
        ids = list(completion.token_ids)
        if self._closed(completion):
            ids = ids[:-1]
        return {"role": "assistant", "content": self.tokenizer.decode(ids, skip_special_tokens=False)}

    def _closed(self, completion: Any) -> bool:
        return bool(completion.token_ids) and completion.token_ids[-1] == self.tokenizer.eos_token_id

    def parse(self, text: str) -> AssistantTurn:
        return parse_tool_calls(text)

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

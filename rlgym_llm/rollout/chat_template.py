"""The ChatML chat template with tool support used by the project's tiny model.

Tool schemas go in the system turn; assistant tool calls render Hermes-style as
`<tool_call>{"name": ..., "arguments": {...}}</tool_call>`; tool results render as `tool` turns.
The template has no whitespace control: every newline in it is literal output.
Rendering a conversation and then the same conversation plus more messages gives a prefix-extended
string (no message's rendering depends on later messages), which is what incremental token
bookkeeping relies on.
"""

CHATML_TOOLS_TEMPLATE = (
    "{% set sys = messages[0].content if messages and messages[0].role == 'system' else '' %}"
    "{% if sys or tools %}"
    "<|im_start|>system\n{{ sys }}"
    "{% if tools %}"
    "{% if sys %}\n\n{% endif %}"
    '# Tools\nCall a tool as <tool_call>{"name": ..., "arguments": {...}}</tool_call>. Tools:\n<tools>\n'
    "{% for tool in tools %}{{ tool | tojson }}\n{% endfor %}"
    "</tools>"
    "{% endif %}"
    "<|im_end|>\n"
    "{% endif %}"
    "{% for m in messages %}"
    "{% if not (loop.first and m.role == 'system') %}"
    "<|im_start|>{{ m.role }}\n{{ m.content if m.content is not none else '' }}"
    "{% if m.role == 'assistant' and m.tool_calls %}"
    "{% for call in m.tool_calls %}"
    "{% set fn = call.function if call.function is defined else call %}"
    '<tool_call>{"name": {{ fn.name | tojson }}, "arguments": '
    "{{ fn.arguments if fn.arguments is string else fn.arguments | tojson }}}</tool_call>"
    "{% endfor %}"
    "{% endif %}"
    "<|im_end|>\n"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

"""The README's Python snippets run as written."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)


def test_readme_has_snippets():
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_snippet_runs(index, capsys):
    exec(compile(BLOCKS[index], f"README.md[block {index}]", "exec"), {"__name__": f"readme_{index}"})

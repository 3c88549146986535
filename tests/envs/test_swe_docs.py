"""docs/swe_env.md: its Python examples run as written (the built set, local sandbox)."""

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "swe_env.md"


def _python_blocks():
    return re.findall(r"```python(?: slow)?\n(.*?)```", DOC.read_text(), re.S)  # not the illustrative ones


def test_the_quick_start_resolves_with_the_oracle(capsys):
    quick_start = _python_blocks()[0]
    exec(compile(quick_start, str(DOC), "exec"), {})
    assert capsys.readouterr().out.startswith("1.0 ")


def test_the_options_block_builds_an_env():
    import rlgym_llm

    options = _python_blocks()[1]
    namespace = {"rlgym_llm": rlgym_llm}
    exec(compile(options.replace("rlgym_llm.make(", "env = rlgym_llm.make(", 1), str(DOC), "exec"), namespace)
    env = namespace["env"]
    try:
        assert len(env.unwrapped.split_of_instance) >= 100 and env.unwrapped.backend == "local"
        train = [i for i, split in env.unwrapped.split_of_instance.items() if split == "train"]
        assert [i.id for i in env.unwrapped.instances] == train  # the options block's split="train"
    finally:
        env.close()

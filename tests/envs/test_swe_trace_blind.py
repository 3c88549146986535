"""Trace-blind real instances (docs/threat_model.md): a FAIL_TO_PASS test whose traced records are
the same on the buggy tree as on the gold fix (or that the gold fix gives no stable trace for) is
judged by pytest's report alone, which candidate code can forge. By default (`trace_blind="void"`)
such a grade is voided, solved or not; with `trace_blind="pay"` the report pays, forged too. Local
backend, two shipped real instances: one the blind-guess measurement found forgeable (its three
FAIL_TO_PASS tests record the same on both trees) and one it did not."""

import pytest
from test_swe_attacks import ATTACKS  # tests/envs is on sys.path (pytest's rootdir-less import mode)

import rlgym_llm
from rlgym_llm import AssistantTurn, ToolCall

pytestmark = pytest.mark.slow  # ~10 s per graded episode (a reference: two gold runs and one buggy run)

BLIND, SEEING = "cachetools-006", "cachetools-000"

# pytest's reports forced to passed from inside the run (the attack suite's first hook attack)
FORGE = ATTACKS["hooks: reports forced to passed"]


@pytest.fixture(scope="module")
def make_env():
    envs = {}

    def make(instance_id, trace_blind="void", dense=False):
        probe = rlgym_llm.make("rlgym/SWE-v0", backend="local", dense_signals=False)
        split = probe.unwrapped.split_of_instance[instance_id]
        probe.close()
        key = (split, trace_blind, dense)
        if key not in envs:
            envs[key] = rlgym_llm.make(
                "rlgym/SWE-v0",
                backend="local",
                dense_signals=dense,
                hide_tests=True,
                split=split,
                trace_blind=trace_blind,
            )
        return envs[key]

    yield make
    for env in envs.values():
        env.close()


def step(env, name, **args):
    return env.step(AssistantTurn(tool_calls=(ToolCall(name, args, "c"),)))


def forge_edit(env):
    """Plants the forgery in the package's first module, which the tests import; the step's info."""
    inner = env.unwrapped
    path = sorted(p for p in inner._files if p.endswith("__init__.py") and "test" not in p)[0]
    text = inner._files[path]
    head = text.split("\n", 1)[0]  # the module's docstring line
    assert head and text.count(head) == 1, "the first line must be unique to edit after it"
    info = step(env, "edit_file", path=path, old_str=head, new_str=head + "\n" + FORGE)[4]
    assert info["signals"]["tool_ok"]
    return info


def submit(env, instance_id, gold=False, forge=False):
    env.reset(options={"instance_id": instance_id})
    inner = env.unwrapped
    if gold:
        for path, edits in inner.task.hidden["gold_edits"].items():
            for old, new in edits:
                step(env, "edit_file", path=path, old_str=old, new_str=new)
    if forge:
        forge_edit(env)
    _, reward, terminated, _, info = step(env, "submit")
    assert terminated
    return reward, info


def test_a_blind_instance_is_found_and_its_grade_voided_even_when_solved(make_env):
    env = make_env(BLIND)
    reward, info = submit(env, BLIND, gold=True)
    assert reward == 0.0 and info.get("voided") and info["void_reason"].startswith("ungradable"), info
    reward, info = submit(env, BLIND, forge=True)
    assert reward == 0.0 and info.get("voided"), info


def test_with_trace_blind_pay_the_report_decides_and_a_forgery_is_paid(make_env):
    """What the default guards against: on the same instance the forgery is paid by the report."""
    env = make_env(BLIND, trace_blind="pay")
    assert submit(env, BLIND, gold=True)[0] == 1.0
    reward, info = submit(env, BLIND, forge=True)
    assert reward == 1.0 and not info.get("voided"), info


def test_dense_signals_never_count_a_blind_test(make_env):
    """The forgery on the buggy tree, graded after the edit turn: under `pay` its `progress` (the share
    of FAIL_TO_PASS passing) reads 1 by the forged report; by default the blind tests never count."""
    seen = {}
    for mode in ("pay", "void"):
        env = make_env(BLIND, trace_blind=mode, dense=True)
        env.reset(options={"instance_id": BLIND})
        seen[mode] = forge_edit(env)["signals"]["progress"]
    inner = env.unwrapped
    blind = inner._reference()[2]
    assert len(blind) == len(inner._instance.fail_to_pass) == 3
    assert seen == {"pay": 1.0, "void": 0.0}


def test_the_control_an_instance_the_trace_sees_pays_its_fix_and_not_a_forgery(make_env):
    env = make_env(SEEING)
    reward, info = submit(env, SEEING, gold=True)
    assert reward == 1.0 and not info.get("voided"), info
    reward, info = submit(env, SEEING, forge=True)
    assert reward == 0.0, info


def test_trace_blind_takes_void_or_pay():
    with pytest.raises(Exception, match="trace_blind must be one of"):
        rlgym_llm.make("rlgym/SWE-v0", tier="toy", trace_blind="ignore")


def test_the_benchmark_lists_blind_instances(tmp_path):
    """`benchmarks/swe_trace_blind.py` runs (toy tier, one instance per split: none is blind)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "blind"
    cmd = [
        sys.executable,
        str(root / "benchmarks/swe_trace_blind.py"),
        "--tier",
        "toy",
        "--limit",
        "1",
        "--out",
        str(out),
    ]
    subprocess.run(cmd, check=True, cwd=root, timeout=300)
    data = json.loads(out.with_suffix(".json").read_text())
    assert len(data["rows"]) == 3 and {r["split"] for r in data["rows"]} == {"train", "val", "test"}
    assert all(r["blind"] == [] for r in data["rows"])
    assert "**0 of 3 instances**" in out.with_suffix(".md").read_text()


def test_the_blind_guess_benchmark_runs_with_live_controls(tmp_path):
    """`benchmarks/swe_blind_guess.py` (toy tier, one instance per split): the guesses are paid 0, the
    gold fix 1.0 and the buggy tree 0, and each guess on top of the gold fix breaks its grade (the
    patch runs and changes the records: a patch that silently did nothing would also be paid 0)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "guess"
    cmd = [
        sys.executable,
        str(root / "benchmarks/swe_blind_guess.py"),
        "--tier",
        "toy",
        "--limit",
        "1",
        "--out",
        str(out),
    ]
    subprocess.run(cmd, check=True, cwd=root, timeout=300)
    rows = json.loads(out.with_suffix(".json").read_text())["rows"]
    assert len(rows) == 3
    for r in rows:
        assert r["gold"] == [1.0, False] and r["buggy"][0] == 0.0, r
        for s in ("deep True", "deep flip"):
            assert r[s][0] == 0.0 and r[s + " on gold"][0] == 0.0, (s, r)
    assert "| deep flip | 3 | 0 | 0.0000 | 3 of 3 |" in out.with_suffix(".md").read_text()

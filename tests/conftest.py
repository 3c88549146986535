"""Shared fixtures: the project's tiny model (built once, cached under RLGYM_CACHE), the vLLM venv."""

import os
from pathlib import Path

import pytest

try:  # property tests check properties, not speed: no per-example deadline on a shared, loaded machine
    from hypothesis import settings

    settings.register_profile("rlgym", deadline=None)
    settings.load_profile("rlgym")
except ImportError:  # the dev extra is not installed
    pass


@pytest.fixture()
def load_benchmark(monkeypatch):
    """Import `benchmarks/<folder>/<script>.py` for one test (folder `learning` unless named): its folder on
    sys.path (the scripts import each other), the module in sys.modules under `name` (dataclasses look their
    module up there)."""
    import importlib.util
    import sys

    benchmarks = Path(__file__).resolve().parents[1] / "benchmarks"

    def load(script: str, name: str | None = None, folder: str = "learning"):
        where = benchmarks / folder
        monkeypatch.syspath_prepend(str(where))
        spec = importlib.util.spec_from_file_location(name or script, where / f"{script}.py")
        module = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, name or script, module)
        spec.loader.exec_module(module)
        return module

    return load


@pytest.fixture(scope="session")
def tiny_model_dir():
    pytest.importorskip("torch", reason="needs the train extra")
    from rlgym_llm.rollout.tiny_model import build_tiny_model

    return build_tiny_model()


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="session")
def vllm_python() -> Path:
    """The vLLM venv's Python. Missing venv: skip locally, fail in CI (`CI` set), where it must exist."""
    from rlgym_llm.rollout.vllm_server import VLLMEnvMissingError, find_vllm_python

    try:
        return find_vllm_python()
    except VLLMEnvMissingError as e:
        if os.environ.get("CI", "").lower() not in ("", "0", "false"):
            pytest.fail(f"CI must run the vLLM tests, but `make services` did not build the venv: {e}")
        pytest.skip(f"the project's vLLM venv is missing; build it with `make vllm-env` ({e})")


# Files that take minutes (real servers, containers, training runs): scheduled first, so that under
# `pytest -n 2` (make test) the two workers end together instead of one waiting on a long tail.
HEAVY_FIRST = (
    "tests/train/test_vllm_train.py",
    "tests/rollout/test_vllm.py",
    "tests/rollout/test_weight_sync.py",
    "tests/sandbox/test_docker.py",
    "tests/envs/test_code_tampering.py",
    "tests/envs/test_swe_docker.py",
    "tests/sandbox/test_attacks.py",
    "tests/rollout/test_ray_runner.py",
    "tests/train/test_distributed.py",
    "tests/test_wheel.py",
)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config, items):
    """Under `--dist loadgroup` a test file is one unit of work, unless a test names its own
    `xdist_group`: a file's module fixtures (a vLLM server, a box, a warm-up) are then built once, on
    one worker. Heavy files go first."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    rank = {path: i for i, path in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))  # stable: file order kept


TIERS = ("vllm", "docker", "ray", "slow")  # a test's tier: its first marker here, else "unit"
_tier_seconds: dict[str, list[float]] = {}


def pytest_runtest_logreport(report):
    """Sums each tier's test time (setup + call + teardown), on the controller under xdist too."""
    tier = next((t for t in TIERS if t in report.keywords), "unit")
    tally = _tier_seconds.setdefault(tier, [0, 0.0])
    tally[1] += report.duration
    if report.when == "call" or (report.when == "setup" and report.outcome == "skipped"):
        tally[0] += 1


def pytest_terminal_summary(terminalreporter):
    """One line per tier: its tests and their summed seconds (time in tests, not wall: two workers
    run side by side). docs/testing.md gives each tier's budget."""
    if not _tier_seconds or hasattr(terminalreporter.config, "workerinput"):
        return
    terminalreporter.section("time per tier (summed over tests)")
    for tier in ("unit", *TIERS):
        if tier in _tier_seconds:
            n, seconds = _tier_seconds[tier]
            terminalreporter.write_line(f"{tier:>7}: {n:5d} tests, {seconds:7.0f} s")

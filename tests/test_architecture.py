"""The dependency rules of DESIGN.md, enforced on the source (lazy imports inside functions included).

The recipes are the composition root: they may import every room and `rlgym_agents`; the `rlgym`
command (cli) imports the recipes (and the shared vocabulary, core); nothing imports either.
"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# room -> rooms it may import ("core" also covers the top-level `rlgym_llm` package, which re-exports core).
ROOMS = {"core", "credit", "sandbox", "rollout", "train", "eval", "config", "testing", "serve"}
ALLOWED = {
    "core": set(),
    "credit": {"core"},
    "sandbox": {"core"},
    "rollout": {"core"},
    "train": {"core", "credit", "rollout"},
    "eval": {"core", "rollout", "sandbox", "credit"},
    # the schema is the rooms' own runtime configs (trainer, sampling) and registries (credit
    # methods, sandbox backends), composed for Hydra: "the runtime configs are the schema"
    "config": {"core", "credit", "rollout", "sandbox", "train"},
    "testing": {"core", "rollout", "sandbox"},
    "serve": {"core"},  # envs as OpenEnv services, and remote envs as envs
    "recipes": ROOMS | {"rlgym_agents"},
    "cli": {"recipes", "core"},
    "rlgym_envs": {"core", "sandbox", "rlgym_envs"},
    "rlgym_agents": {"core", "rlgym_agents"},
}
HEAVY = ("torch", "transformers", "vllm", "ray", "docker")


def _sources():
    for path in sorted((ROOT / "rlgym_llm").rglob("*.py")):
        parts = path.relative_to(ROOT / "rlgym_llm").parts
        room = parts[0] if len(parts) > 1 else "core"  # rlgym_llm/__init__.py re-exports core
        yield room, path
    for pkg in ("envs/rlgym_envs", "agents/rlgym_agents"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            yield pkg.split("/")[1], path


def _project_imports(path: Path):
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        else:
            continue
        for name in names:
            top = name.split(".")
            if top[0] == "rlgym_llm":
                yield node.lineno, top[1] if len(top) > 1 else "core"
            elif top[0] in ("rlgym_envs", "rlgym_agents"):
                yield node.lineno, top[0]


SOURCES = list(_sources())


def test_there_are_sources_to_check():
    rooms = {room for room, _ in SOURCES}
    assert {"core", "rlgym_envs", "rlgym_agents"} <= rooms


@pytest.mark.parametrize(("room", "path"), SOURCES, ids=[str(p.relative_to(ROOT)) for _, p in SOURCES])
def test_imports_follow_the_dependency_rules(room, path):
    assert room in ALLOWED, f"{room!r} is not a room of DESIGN.md; add it to ALLOWED with its rules"
    allowed = ALLOWED[room]
    for lineno, target in _project_imports(path):
        if target == room:
            continue
        assert target != "cli", f"{path.relative_to(ROOT)}:{lineno}: nothing may import the cli"
        assert target != "recipes" or room == "cli", f"{path.relative_to(ROOT)}:{lineno}: only the cli runs recipes"
        assert target in allowed, (
            f"{path.relative_to(ROOT)}:{lineno}: room {room!r} imports {target!r}; DESIGN.md allows only {sorted(allowed)}"
        )


def test_only_the_recipes_import_the_agents():
    importers = {room for room, path in SOURCES for _, target in _project_imports(path) if target == "rlgym_agents"}
    assert importers - {"rlgym_agents"} == {"recipes"}


def test_the_config_schema_loads_no_heavy_module():
    # config reads the rooms' runtime configs (train.config, rollout.policy): they must stay light
    code = f"import sys, rlgym_llm.config\nprint([m for m in {HEAVY!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", f"heavy modules imported: {out.stdout}{out.stderr}"


def test_import_stays_light():
    code = (
        "import sys, rlgym_llm, rlgym_envs, rlgym_agents\n"
        "env = rlgym_llm.make('rlgym/Math-v0'); env.reset(seed=0)\n"
        f"print([m for m in {HEAVY!r} if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", f"heavy modules imported: {out.stdout}{out.stderr}"

"""The public surface stays clean: no exported name shadows a builtin, and every project error is an RlgymError
(so the CLI's handler, which catches RlgymError, reports each one cleanly)."""

import ast
import builtins
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [ROOT / "rlgym_llm", ROOT / "envs" / "rlgym_envs", ROOT / "agents" / "rlgym_agents"]


def _trees():
    for folder in SOURCES:
        for path in sorted(folder.rglob("*.py")):
            if "repos" in path.relative_to(folder).parts:  # SWE task repositories: data, not the project
                continue
            yield path, ast.parse(path.read_text(), str(path))


def test_no_exported_name_shadows_a_builtin():
    shadowing = []
    for path, tree in _trees():
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
            ):
                names = [e.value for e in getattr(node.value, "elts", []) if isinstance(e, ast.Constant)]
                shadowing += [f"{path.relative_to(ROOT)}: {n}" for n in names if hasattr(builtins, n)]
    assert not shadowing, shadowing


def test_every_project_error_is_an_rlgym_error():
    bases: dict[str, list[str]] = {}
    where: dict[str, str] = {}
    for path, tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.bases:  # (ToolError is a dataclass, not an exception)
                bases[node.name] = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases]
                where[node.name] = str(path.relative_to(ROOT))

    def reaches_rlgym_error(name: str, seen: frozenset = frozenset()) -> bool:
        if name == "RlgymError":
            return True
        return any(b not in seen and reaches_rlgym_error(b, seen | {name}) for b in bases.get(name, []))

    errors = [n for n in bases if n.endswith("Error") and n != "RlgymError"]
    assert "EngineError" in errors and len(errors) > 10
    outside = [f"{where[n]}: {n}" for n in errors if not reaches_rlgym_error(n)]
    assert not outside, f"errors that are not RlgymError: {outside}"

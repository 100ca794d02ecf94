"""The predictor's core reads one way: each module imports only modules below it, at module level.

Order (bottom first): ``limits``, ``artifacts``, ``constants`` -> ``features``, ``provenance`` -> ``terms`` -> ``complexity``, ``reference`` ->
``regime`` -> ``model`` -> ``transfer`` -> ``calibration``, ``serialization`` -> ``bundled`` -> ``space``; the
operations on top (service, recommend, fleet, planning, cli) may use any of them. Core modules import nothing
inside functions but the third-party modules of :data:`DEFERRED_IMPORTS`, import only ``jetpredict.models`` and the predictor from jetpredict, and no module of the
predictor can deserialise code (pickle, joblib, marshal, dill, shelve). Imports are read with :mod:`ast`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PREDICTOR = Path(__file__).resolve().parents[2] / "predictor"
#: Core module -> its rank; a core module may import core modules of lower rank only.
CORE_RANK = {"limits": 0, "artifacts": 0, "constants": 0, "features": 1, "provenance": 1, "terms": 2, "complexity": 3, "reference": 3, "regime": 4,
             "model": 5, "transfer": 6, "calibration": 7, "serialization": 7, "bundled": 8, "space": 9, "__init__": 0}
#: Third-party modules a core module may import inside the function that needs them: a fit's optimiser, which a
#: prediction from a fitted model never runs (0.14 s of every ``jetpredict predict`` start).
DEFERRED_IMPORTS = {"scipy.optimize"}
#: Modules that can turn bytes into running code: never imported by the predictor.
CODE_LOADERS = {"pickle", "_pickle", "cPickle", "joblib", "marshal", "dill", "cloudpickle", "shelve", "torch"}


def imports_of(path: Path) -> list[tuple[str, int, bool]]:
    """(imported module, line, inside a function) for every import of ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            if isinstance(child, ast.Import):
                found.extend((a.name, child.lineno, in_function) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                found.extend((f"{base}.{a.name}" if base == "jetpredict.predictor" else base, child.lineno,
                              in_function) for a in child.names)
            visit(child, inner)

    visit(tree, False)
    return found


MODULES = {p.stem: p for p in sorted(PREDICTOR.glob("*.py"))}


def test_every_core_module_is_ranked():
    assert set(CORE_RANK) <= set(MODULES), sorted(set(CORE_RANK) - set(MODULES))


@pytest.mark.parametrize("name", sorted(CORE_RANK))
def test_core_module_imports_point_down_and_at_module_level(name):
    problems = []
    for target, line, in_function in imports_of(MODULES[name]):
        where = f"predictor/{name}.py:{line} imports {target}"
        if in_function and target not in DEFERRED_IMPORTS:
            problems.append(f"{where} inside a function (core modules import at module level)")
        parts = target.split(".")
        if parts[0] == "jetpredict":
            if parts[1:2] == ["predictor"]:
                other = parts[2] if len(parts) > 2 else "__init__"
                if other not in CORE_RANK:
                    problems.append(f"{where} (an operation module above the core)")
                elif CORE_RANK[other] >= CORE_RANK[name]:
                    problems.append(f"{where} (rank {CORE_RANK[other]} is not below {name}'s {CORE_RANK[name]})")
            elif parts[1:2] != ["models"]:
                problems.append(f"{where} (the predictor imports only jetpredict.models and itself)")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_predictor_module_imports_a_code_loader_or_points_up(name):
    problems = []
    for target, line, _ in imports_of(MODULES[name]):
        parts = target.split(".")
        if parts[0] in CODE_LOADERS:
            problems.append(f"predictor/{name}.py:{line} imports {target} (loading a file never runs code)")
        if parts[0] in ("models", "predictor", "profiler", "api", "tools") or (
                parts[0] == "jetpredict" and len(parts) > 1 and parts[1] in ("profiler", "api", "integrations")):
            problems.append(f"predictor/{name}.py:{line} imports {target} (points up or is not absolute)")
    assert not problems, "\n".join(problems)

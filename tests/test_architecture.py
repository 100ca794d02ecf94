"""The import graph of the ``jetpredict`` package: every import absolute, every import pointing down, no
cycles (module-level and function-level imports alike), and the service free of torch.

Layers, top to bottom (an arrow is an allowed import): ``jetpredict.cli`` -> everything;
``integrations`` -> client, predictor, profiler, models; ``api`` -> predictor, models (never the client:
the service does not call itself); ``predictor`` -> models; ``profiler`` (its twin wing ``profiler.sim``
included) -> client, models; ``models`` -> nothing; ``client`` (``jetpredict.client``, the one HTTP
client of the service) -> nothing: it imports only the standard library. Nothing in the package imports
``tools`` (build-time scripts). Imports are read from the source with :mod:`ast`, so a
module that is never imported by a test is checked too.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Folder -> the import name it maps to (pyproject ``package-dir``).
PACKAGE_DIRS = {"jetpredict": "jetpredict", "models": "jetpredict.models",
                "predictor": "jetpredict.predictor", "profiler": "jetpredict.profiler", "api": "jetpredict.api"}
#: Top-level names that must only ever be reached as ``jetpredict.<name>``.
BARE_NAMES = {"models", "predictor", "profiler", "api", "integrations"}
#: Layer -> the layers it may import (itself included).
ALLOWED = {
    "cli": {"cli", "integrations", "api", "predictor", "profiler", "client", "models"},
    "integrations": {"integrations", "predictor", "profiler", "client", "models"},
    "api": {"api", "predictor", "models"},
    "predictor": {"predictor", "models"},
    "profiler": {"profiler", "client", "models"},
    "client": {"client"},
    "models": {"models"},
}
#: Third-party packages a layer must not import: the service (api, predictor, models) installs and runs
#: without PyTorch.
FORBIDDEN_THIRD_PARTY = {layer: {"torch", "torchvision", "ptflops"}
                         for layer in ("api", "predictor", "models")}


@dataclass(frozen=True)
class Import:
    module: str          # the importing module
    target: str          # the imported name, absolute (``jetpredict.models.catalogue``, ``torch``...)
    line: int
    relative: bool       # written as a relative import
    type_only: bool      # inside ``if TYPE_CHECKING:`` (never executed)


def _module_name(path: Path) -> str | None:
    rel = path.relative_to(ROOT)
    base = PACKAGE_DIRS.get(rel.parts[0])
    if base is None:
        return None
    parts = [*base.split("."), *rel.parts[1:]]
    parts[-1] = parts[-1].removesuffix(".py")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _package_files() -> dict[str, Path]:
    files = {}
    for folder in PACKAGE_DIRS:
        for path in sorted((ROOT / folder).rglob("*.py")) if (ROOT / folder).is_dir() else []:
            name = _module_name(path)
            if name is not None:
                files[name] = path
    return files


MODULES = _package_files()


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(path: Path, module: str | None) -> list[Import]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    found: list[Import] = []

    def visit(node: ast.AST, type_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for stmt in child.body:
                    visit_stmt(stmt, True)
                for stmt in child.orelse:
                    visit_stmt(stmt, type_only)
                continue
            visit_stmt(child, type_only)

    def visit_stmt(node: ast.AST, type_only: bool) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.append(Import(module or "", alias.name, node.lineno, False, type_only))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = (module or "").split(".")
                anchor = anchor if is_package else anchor[:-1]
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                # ``from package import submodule`` imports the submodule; anything else, the module.
                found.append(Import(module or "", sub if sub in MODULES else base, node.lineno,
                                    bool(node.level), type_only))
        visit(node, type_only)

    visit(tree, False)
    return found


IMPORTS = {name: _imports(path, name) for name, path in MODULES.items()}


def layer_of(module: str) -> str:
    """The layer of a module: its first folder under ``jetpredict``; the root and the CLI are ``cli``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ALLOWED else "cli"


def _where(module: str, imp: Import) -> str:
    return f"{MODULES[module].relative_to(ROOT)}:{imp.line} imports {imp.target}"


LAYERS = sorted(ALLOWED)


@pytest.mark.parametrize("layer", LAYERS)
def test_imports_are_absolute_and_point_down(layer):
    problems = []
    for module, imports in IMPORTS.items():
        if layer_of(module) != layer:
            continue
        for imp in imports:
            top = imp.target.split(".")[0]
            if imp.relative:
                problems.append(f"{_where(module, imp)} (relative: write jetpredict.* absolutely)")
            elif top in BARE_NAMES or top == "tools":
                problems.append(f"{_where(module, imp)} (bare name: the package never imports "
                                f"{'tools' if top == 'tools' else top}; use jetpredict.{top})")
            elif top == "jetpredict" and imp.target != "jetpredict":
                target_layer = layer_of(imp.target)
                if target_layer not in ALLOWED[layer]:
                    problems.append(f"{_where(module, imp)} (points up: {layer} may import "
                                    f"{', '.join(sorted(ALLOWED[layer]))})")
            elif top in FORBIDDEN_THIRD_PARTY.get(layer, ()):
                problems.append(f"{_where(module, imp)} ({layer} runs without PyTorch)")
    assert not problems, "\n".join(problems)


def _cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), over executed imports."""
    graph = {m: sorted({i.target for i in imps if not i.type_only and i.target in MODULES and i.target != m})
             for m, imps in IMPORTS.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = [0]

    def connect(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return components


CYCLES = _cycles()


@pytest.mark.parametrize("layer", LAYERS)
def test_no_import_cycles(layer):
    mine = [c for c in CYCLES if any(layer_of(m) == layer for m in c)]
    assert not mine, ("import cycles (function-level imports count):\n"
                      + "\n".join(" <-> ".join(c) for c in mine))


def test_scripts_and_tests_use_the_package_name_too():
    """tools/, tests/ and bench/ reach the package as jetpredict.* (tests and bench may import tools.*)."""
    problems = []
    for folder in ("tools", "tests", "bench"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for imp in _imports(path, None):
                if imp.target.split(".")[0] in BARE_NAMES and not imp.relative:
                    problems.append(f"{path.relative_to(ROOT)}:{imp.line} imports {imp.target}")
    assert not problems, "\n".join(problems)


def test_the_checker_sees_what_it_must_refuse(tmp_path):
    """The rules above fail on the imports they are meant to refuse (a checker that cannot fail proves
    nothing): a bare name, an upward import, a relative import, torch in the predictor."""
    src = tmp_path / "m.py"
    src.write_text("import models.catalogue\nfrom jetpredict.api import app\nfrom . import x\n"
                   "def f():\n    import torch\n", encoding="utf-8")
    found = {(i.target, i.relative) for i in _imports(src, "jetpredict.predictor.m")}
    assert ("models.catalogue", False) in found and ("torch", False) in found
    assert ("jetpredict.predictor", True) in found
    assert layer_of("jetpredict.api.app") not in ALLOWED["predictor"]
    assert "torch" in FORBIDDEN_THIRD_PARTY["predictor"]
    assert len(MODULES) > 50 and "jetpredict.profiler.sim.physics" in MODULES
    assert layer_of("jetpredict.client") == "client" and "client" not in ALLOWED["api"]


def test_the_client_imports_only_the_standard_library():
    """``jetpredict.client`` is what tuning tools install the package for: nothing beyond the standard
    library (no pandas, numpy, requests), so it works on any install, with or without the extras."""
    import sys

    imports = IMPORTS["jetpredict.client"]
    outside = [f"{_where('jetpredict.client', i)}" for i in imports
               if i.target.split(".")[0] not in sys.stdlib_module_names and i.target != "__future__"]
    assert imports and not outside, "\n".join(outside)


#: A console script's sys.path: the working directory is not on it (the profiler adds it for module:factory).
_CONSOLE = ("import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; "
            "from jetpredict.cli import main; raise SystemExit(main(sys.argv[1:]))")
_USER_NET = """from torch import nn


def build():
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 16), nn.ReLU(), nn.Linear(16, 4))
    return model, (3, 8, 8), 4
"""


@pytest.mark.slow
@pytest.mark.parametrize("device, extra", [("sim:agx-xavier", ["--modes", "MAXN"]),
                                           ("host", ["--workers", "0"])])
def test_a_user_package_named_models_profiles(tmp_path, device, extra):
    """jetpredict claims only the import name ``jetpredict``: a project's own ``models/`` package (the usual
    name in ML projects) is what ``models.mynet:build`` finds, on the twin and on the host."""
    import subprocess
    import sys

    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "models" / "mynet.py").write_text(_USER_NET, encoding="utf-8")
    out = subprocess.run([sys.executable, "-c", _CONSOLE, "profile", "--device", device, "--workload",
                          "models.mynet:build", "--out", "p.csv", "--warmup", "1", "--minibatches", "2",
                          "--no-progress", *extra], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    from jetpredict.models.profile_files import read_profile_csv

    row = read_profile_csv(tmp_path / "p.csv").iloc[0]
    assert row["workload"] == "models.mynet:build" and row["epoch_time_s"] > 0
    assert row["source"] == ("simulated" if device.startswith("sim:") else "measured")


def test_every_package_folder_is_installed():
    """pyproject lists packages explicitly: a sub-package folder missing from the list would work in a
    checkout and be absent from the wheel."""
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(pyproject["tool"]["setuptools"]["packages"])
    packages = {name for name, path in MODULES.items() if path.name == "__init__.py"}
    assert packages - listed == set()


#: A module longer than this holds more than one job.
MAX_MODULE_LINES = 600
#: Folders outside the package whose Python files are held to the same limit: the scripts and the tests.
SCRIPT_DIRS = ("bench", "tools", "tests")
#: The page's ES modules are held to it too; the vendored libraries under it (not ours) are not.
PAGE_DIR = ROOT / "api" / "static"
VENDOR_DIR = PAGE_DIR / "vendor"
#: Names every command-line module defines by convention (its entry point, its subcommand hook).
CONVENTIONAL_NAMES = {"main", "register"}


def _script_files() -> dict[str, Path]:
    """The Python files of SCRIPT_DIRS (tests, conftests and helpers alike) and the page's .js modules,
    vendored ones aside, by repository path."""
    python = [path for folder in SCRIPT_DIRS for path in (ROOT / folder).rglob("*.py")]
    page = [path for path in PAGE_DIR.rglob("*.js") if not path.is_relative_to(VENDOR_DIR)]
    return {str(path.relative_to(ROOT)): path for path in sorted(python + page)}


def test_no_module_is_over_the_line_limit():
    files = {**MODULES, **_script_files()}
    assert {"bench/real_cv.py", "tools/calibrate_twin.py", "tests/test_architecture.py", "tests/api/conftest.py",
            "api/static/page.js", "api/static/docs.js"} <= set(files)
    assert not any(name.startswith("api/static/vendor/") for name in files)
    lengths = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in files.items()}
    assert {name: n for name, n in lengths.items() if n > MAX_MODULE_LINES} == {}


def _public_definitions() -> dict[str, list[str]]:
    """Public top-level function and class name -> the modules that define it."""
    defined: dict[str, list[str]] = {}
    for name, path in MODULES.items():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and not (
                    node.name.startswith("_") or node.name in CONVENTIONAL_NAMES):
                defined.setdefault(node.name, []).append(name)
    return defined


def test_each_public_name_has_one_definition():
    """A verb or noun means one thing: two modules defining one public name (re-exports aside) make the
    reader guess which one an import gets."""
    assert {name: where for name, where in _public_definitions().items() if len(where) > 1} == {}


UPPER_CASE = re.compile(r"[A-Z][A-Z0-9_]*")


def _constant_values() -> dict[str, dict[str, str]]:
    """Module-level UPPER_CASE name -> {module: its value's AST dump}; ``NAME = other.NAME`` (a reference to
    another module's definition) is not a definition."""
    values: dict[str, dict[str, str]] = {}
    for module, path in MODULES.items():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, ast.AnnAssign) and node.value is not None else []
            for target in targets:
                if not (isinstance(target, ast.Name) and UPPER_CASE.fullmatch(target.id)):
                    continue
                value = node.value
                if (isinstance(value, ast.Name) and value.id == target.id) or (
                        isinstance(value, ast.Attribute) and value.attr == target.id):
                    continue
                values.setdefault(target.id, {})[module] = ast.dump(value)
    return values


def test_each_module_constant_has_one_value():
    """A constant's name means one value: two modules setting ``MAX_ROWS`` to 200,000 (rows per file) and
    10,000 (rows per request) make an import's reader guess which limit applies."""
    clashes = {name: set(where) for name, where in _constant_values().items() if len(set(where.values())) > 1}
    assert clashes == {}, f"rename (name what each is): {sorted(clashes)}"


def test_test_modules_have_unique_basenames():
    """pytest imports a test module by its basename (tests/ folders are not packages): two files of one name
    in two folders fail at collection ('import file mismatch'), as the CI at 12d8226 did."""
    seen: dict[str, list[str]] = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        seen.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert {name: where for name, where in seen.items() if len(where) > 1 and name != "conftest.py"} == {}

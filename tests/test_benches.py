"""The benchmark scripts under ``bench/`` stay runnable: each imports, and a cheap one runs end to end
without writing its committed results (a plain run leaves the tree as it was)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
SCRIPTS = sorted(p.stem for p in BENCH.glob("*.py"))


@pytest.fixture
def bench_path(monkeypatch):
    """``bench/`` on the path; afterwards the path as it was, and no module of this checkout that the
    scripts imported under their own names (``results_io``, the API fixtures) left behind."""
    monkeypatch.syspath_prepend(str(BENCH))
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        # The package itself stays: a second copy of a jetpredict module would split its classes in two.
        if not name.startswith("jetpredict") and str(getattr(sys.modules[name], "__file__", "") or "").startswith(
                str(ROOT)):
            del sys.modules[name]


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_bench_script_imports(name, bench_path):
    module = importlib.import_module(name)
    assert module.__doc__, f"bench/{name}.py says what it measures"


def test_a_plain_run_prints_its_growth_and_writes_nothing(bench_path, capsys):
    results = BENCH / "results"
    before = {p: p.stat().st_mtime_ns for p in results.iterdir()}
    mixed_fleet = importlib.import_module("mixed_fleet")
    assert mixed_fleet.main(["--sizes", "10,100", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "slope (time ~ stored rows^b)" in out and "slope (time ~ devices^b)" in out
    assert {p: p.stat().st_mtime_ns for p in results.iterdir()} == before

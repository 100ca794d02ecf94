"""The re-trace command of the twin's workload costs: it writes the committed cache only when asked to."""

from __future__ import annotations

import json

import pytest
from jetpredict.profiler.sim import kernel_costs
from jetpredict.profiler.sim.kernel_costs import WORKLOADS_DIR, load_complexity

from tools.retrace_workloads import main

pytest.importorskip("torch")


def _cache() -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(WORKLOADS_DIR.glob("*.json"))}


def test_help_answers_without_tracing_or_writing(capsys, monkeypatch):
    """``--help`` ran the whole re-trace and rewrote the committed costs (a newcomer's way to ask what the
    command does)."""
    monkeypatch.setattr(kernel_costs, "measure_workload", lambda name: pytest.fail("traced on --help"))
    before = _cache()
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0 and "--write" in capsys.readouterr().out
    assert _cache() == before


def test_a_retrace_prints_against_the_cache_and_writes_only_with_write(tmp_path, capsys):
    before = _cache()
    assert main(["--workload", "lenet5-mnist"]) == 0
    out = capsys.readouterr().out
    assert "lenet5-mnist: 41 kernels" in out and "against the cache: GFLOP x1" in out and "nothing written" in out
    assert _cache() == before
    assert main(["--workload", "lenet5-mnist", "--write", "--out-dir", str(tmp_path)]) == 0
    written = json.loads((tmp_path / "lenet5-mnist.json").read_text(encoding="utf-8"))
    assert written["kinds"] == load_complexity("lenet5-mnist").kinds.tolist() and _cache() == before


def test_the_interval_calibration_answers_help_and_refuses_unknown_flags(capsys):
    from tools.calibrate_intervals import main as calibrate_main

    with pytest.raises(SystemExit) as exit_:
        calibrate_main(["--help"])
    assert exit_.value.code == 0 and "INTERVAL_SCALES" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        calibrate_main(["--scales", "1"])
    assert exit_.value.code == 2

"""Benches take their scaffolding from tools/, never from tests/; the sweep replay lives there too."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from jetpredict.models import catalogue

from tools import replay
from tools.testing import published_rows

ROOT = Path(__file__).resolve().parent.parent


def test_benches_import_nothing_from_tests():
    for path in sorted((ROOT / "bench").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert "from api_fixtures" not in text and "import api_fixtures" not in text, path.name


def test_published_rows_from_tools():
    rows = published_rows(as_id="x", n=3)
    assert len(rows) == 3 and {r["workload"] for r in rows} == {"x"}
    assert isinstance(rows[0]["epoch_time_s"], float)


def test_replay_is_not_in_the_package_and_matches_clocks_as_the_catalogue_does(monkeypatch):
    assert not (ROOT / "predictor" / "replay.py").exists()
    sweep = pd.DataFrame([{"mode": "a", "cpu_cores": 4, "cpu_mhz": 1000.0, "gpu_mhz": 500.0, "emc_mhz": 1600.0,
                           "epoch_time_s": 10.0}])
    assert replay.SAME_CLOCK_REL is catalogue.SAME_CLOCK_REL  # the catalogue's tolerance, not a copy
    off = {"mode": "a", "cpu_cores": 4, "cpu_mhz": 1005.0, "gpu_mhz": 500.0, "emc_mhz": 1600.0}  # 0.5% off
    monkeypatch.setattr(replay, "SAME_CLOCK_REL", 1e-2)
    assert replay.SweepReplay(sweep).measure(off)["epoch_time_s"] == 10.0

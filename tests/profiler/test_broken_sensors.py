"""A sensor that reads what no device can draw leaves the energy cells null with the reason; the timings stay."""

from __future__ import annotations

import pytest
from jetpredict.models.catalogue import load_device
from jetpredict.models.profile_files import read_profile_csv
from jetpredict.profiler.campaign import CampaignConfig, run_campaign

pytestmark = [pytest.mark.usefixtures("torch_one_thread"), pytest.mark.slow]  # the meter waits 5 s for a line


def test_a_campaign_whose_tegrastats_reads_0_mw_keeps_its_rows_with_null_energy(fake_root, tegrastats_samples,
                                                                                tmp_path):
    """tegrastats printing ``VDD_IN 0mW`` made every window 0 J: the first measured row was refused (exit 2), the
    campaign stopped and an earlier --out kept only its old rows. Now the meter refuses the readings, the rows
    are written with timings, and their energy and power cells are empty with the reason."""
    nx = load_device("orin-nx")
    fake_root.add_jetson(nx)
    line = next(s["line"] for s in tegrastats_samples if s["board"] == "orin-nx")
    fake_root.add_tegrastats([line.replace("VDD_IN 17946mW/15710mW", "VDD_IN 0mW/0mW")])
    status = fake_root.read("/var/lib/nvpmodel/status")
    out = tmp_path / "p.csv"
    out.write_text("an,earlier,campaign\n")
    cfg = CampaignConfig(device="jetson", workload="lenet5-mnist", out=out, modes="MAXN,10W", batch_size=4,
                         workers=0, warmup=1, minibatches=3, settle_s=0.0, idle_s=0.2, hz=50.0, progress=False)
    rows = run_campaign(cfg)
    assert [r["mode"] for r in rows] == ["MAXN", "10W"]
    for row in rows:
        assert row["epoch_time_s"] > 0 and row["compute_time_s"] > 0  # the timings are kept
        assert row["epoch_energy_j"] is None and row["avg_power_w"] is None and row["base_power_w"] is None
        assert "implausible module power 0 W" in row["power_null_reason"], row["power_null_reason"]
        assert row["power_meter"].startswith("none: ")
    assert list(read_profile_csv(out)["mode"]) == ["MAXN", "10W"]
    assert fake_root.read("/var/lib/nvpmodel/status") == status  # the original mode is back

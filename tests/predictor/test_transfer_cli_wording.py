"""``predict`` across devices says how much wider the flagged modes' intervals are, and "no wider" where the
transfer's own SD absorbs the widening (it said "wider ... 1.00x as wide")."""

from __future__ import annotations

from jetpredict.models.profile_files import read_profile_csv
from jetpredict.predictor.reference import REFERENCE_DIR

from jetpredict.cli import main


def test_a_cross_device_widening_of_1_00x_is_no_wider(tmp_path, capsys):
    """The audit's case: LeNet-5 twin rows of AGX Xavier's 8 presets, predicted on Orin Nano's presets."""
    rows = read_profile_csv(REFERENCE_DIR / "agx-xavier-simulated.csv")
    rows[rows.workload == "lenet5-mnist"].head(8).to_csv(tmp_path / "p.csv", index=False)
    assert main(["fit", "--device", "agx-xavier", "--profiles", str(tmp_path / "p.csv"),
                 "--out", str(tmp_path / "m.json")]) == 0
    capsys.readouterr()
    assert main(["predict", "--model", str(tmp_path / "m.json"), "--presets", "--device", "orin-nano",
                 "--format", "json", "--out", str(tmp_path / "out.json")]) == 0
    err = capsys.readouterr().err
    assert "lie outside the profiled knob ranges" in err
    assert "their intervals are no wider (time intervals at most 1.00x as wide as inside them)" in err
    assert "are wider" not in err

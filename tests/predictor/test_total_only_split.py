"""A model fitted on rows that time the whole epoch only (no stall or compute columns) still splits each
mode's epoch into compute and stall (``terms.split_compute``)."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
from jetpredict.models.catalogue import ModeArrays, load_device
from jetpredict.predictor.bundled import fit_workload
from jetpredict.predictor.reference import build_reference
from model_sweeps import REF


@pytest.mark.parametrize("workload", ["resnet18-cifar10", "lenet5-mnist"])
def test_a_total_only_fit_predicts_stall_and_compute_at_every_mode(workload):
    """Real e,f,i,j rows with the component columns dropped, the other two workloads as reference: every
    mode of AGX Xavier gets stall > 0 and compute > 0, together no longer than the epoch. (With the memory
    clock's term moved from stall to compute, ResNet-18's stall was 0.0 s at all 29,232 modes.) No accuracy
    is pinned: a split guessed from totals is only the reference's shape."""
    rows = REF[(REF.workload == workload) & REF["mode"].isin(list("efij"))]
    rows = rows.drop(columns=["stall_time_s", "compute_time_s"]).reset_index(drop=True)
    reference = build_reference(REF[REF.workload != workload].reset_index(drop=True), "agx-xavier")
    model = fit_workload(rows, reference=reference)
    assert "total" in model.time_fits  # no component was measured: one fit of the total
    device = load_device("agx-xavier")
    p = model.predict(ModeArrays.of_device(device), 0.9)
    assert len(p) == len(device.modes())
    assert (p.stall_time_s > 0).all() and (p.compute_time_s > 0).all()
    assert (p.stall_time_s + p.compute_time_s <= p.epoch_time_s * (1 + 1e-9)).all()
    assert np.isfinite(p.stall_time_s).all() and np.isfinite(p.compute_time_s).all()


def test_fit_and_predict_say_when_the_split_rests_on_epoch_totals(tmp_path, capsys, lenet):
    """``fit`` and ``predict`` of total-only rows note that stall and compute are not measured, and every
    answer line carries ``split_source`` ``epoch_totals``; rows with the columns say ``components``, no note."""
    from jetpredict.cli import main

    rows = lenet[lenet["mode"].isin(list("efij"))]
    said = {}
    for name, table in (("totals", rows.drop(columns=["stall_time_s", "compute_time_s"])), ("components", rows)):
        table.to_csv(tmp_path / f"{name}.csv", index=False)
        assert main(["fit", "--device", "agx-xavier", "--profiles", str(tmp_path / f"{name}.csv"),
                     "--out", str(tmp_path / f"{name}.json")]) == 0
        assert main(["predict", "--model", str(tmp_path / f"{name}.json"), "--presets", "--format", "csv"]) == 0
        out = capsys.readouterr()
        split = set(pd.read_csv(io.StringIO(out.out))["split_source"])
        said[name] = (split, "stall_time_s / compute_time_s" in out.err)
    assert said == {"totals": ({"epoch_totals"}, True), "components": ({"components"}, False)}

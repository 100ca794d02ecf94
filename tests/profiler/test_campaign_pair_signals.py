"""A stop signal between the renames of a mode's CSV and its sidecar (atomic_files.replace_pair) leaves the
two files in step: the campaign holds signals around the pair's write."""

from __future__ import annotations

import json
import os
import signal

import pytest
from jetpredict.profiler.campaign import CampaignConfig, run_campaign
from test_campaign import _csv_modes


class _Stopped(Exception):
    """What the test's handler raises for a stop signal."""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_a_signal_after_the_csv_rename_still_renames_its_sidecar(tmp_path, monkeypatch, sig):
    cfg = CampaignConfig(device="sim:orin-nano", workload="resnet18-cifar10", out=tmp_path / "p.csv",
                         modes="15W,7W", batch_size=16, workers=0, warmup=1, minibatches=2, progress=False)
    real_replace, csv_renames = os.replace, []

    def replace_then_signal(src, dst, *a, **kw) -> None:
        real_replace(src, dst, *a, **kw)
        if os.path.basename(dst) == "p.csv":
            csv_renames.append(dst)
            if len(csv_renames) == 2:  # the second mode's CSV is in place; its sidecar is not yet
                signal.raise_signal(sig)

    def stop(signum, frame):
        raise _Stopped(signum)

    monkeypatch.setattr(os, "replace", replace_then_signal)
    previous = signal.signal(sig, stop)
    try:
        with pytest.raises(BaseException) as stopped:  # the controller may turn it into its own exit
            run_campaign(cfg)
    finally:
        signal.signal(sig, previous)
        monkeypatch.undo()
    assert not isinstance(stopped.value, AssertionError)
    assert len(csv_renames) == 2
    doc = json.loads((tmp_path / "p.csv.json").read_text())
    assert _csv_modes(tmp_path / "p.csv") == [m["mode"] for m in doc["modes"]] == ["15W", "7W"]
    assert [r["mode"] for r in doc["rows"]] == ["15W", "7W"]

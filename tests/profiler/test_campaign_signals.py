"""A stop signal between the writes of a mode's CSV and its sidecar leaves the two files in step."""

from __future__ import annotations

import json
import signal

import pytest
from jetpredict.profiler import campaign
from jetpredict.profiler.campaign import CampaignConfig, run_campaign
from test_campaign import _csv_modes


class _Stopped(Exception):
    """What the test's handler raises for a stop signal."""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_a_signal_after_the_csv_write_still_writes_its_sidecar(tmp_path, monkeypatch, sig):
    cfg = CampaignConfig(device="sim:orin-nano", workload="resnet18-cifar10", out=tmp_path / "p.csv",
                         modes="15W,7W", batch_size=16, workers=0, warmup=1, minibatches=2, progress=False)
    write_csv = campaign._write_csv_atomic
    calls = []

    def write_then_signal(path, rows):
        write_csv(path, rows)
        calls.append(len(rows))
        if len(rows) == 2:  # the second mode's CSV is on disk; its sidecar is not yet
            signal.raise_signal(sig)

    def stop(signum, frame):
        raise _Stopped(signum)

    monkeypatch.setattr(campaign, "_write_csv_atomic", write_then_signal)
    previous = signal.signal(sig, stop)
    try:
        with pytest.raises(BaseException) as stopped:  # the controller may turn it into its own exit
            run_campaign(cfg)
    finally:
        signal.signal(sig, previous)
    assert not isinstance(stopped.value, AssertionError)
    assert calls == [1, 2]
    doc = json.loads((tmp_path / "p.csv.json").read_text())
    assert _csv_modes(tmp_path / "p.csv") == [m["mode"] for m in doc["modes"]] == ["15W", "7W"]
    assert [r["mode"] for r in doc["rows"]] == ["15W", "7W"]

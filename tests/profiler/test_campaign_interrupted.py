"""Ctrl-C during ``profile``: exit 130, and the one line says what the run kept (the modes finished are in
--out, written after each mode), not only ``interrupted``."""

from __future__ import annotations

import csv

import pytest
from jetpredict.profiler.sim.backend import SimulatedBackend

from jetpredict.cli import main


@pytest.fixture
def ctrl_c_at(monkeypatch):
    """Ctrl-C in the first minibatch of the mode labelled as given."""
    simulate = SimulatedBackend.next_minibatch

    def arm(label: str) -> None:
        def next_minibatch(self):
            if self._mode.mode == label:
                raise KeyboardInterrupt
            return simulate(self)

        monkeypatch.setattr(SimulatedBackend, "next_minibatch", next_minibatch)

    return arm


def _profile(out) -> list[str]:
    return ["profile", "--device", "sim:orin-nx", "--workload", "lenet5-mnist", "--modes", "10W,15W,25W",
            "--warmup", "1", "--minibatches", "2", "--no-progress", "--out", str(out)]


def test_an_interrupt_after_two_modes_says_they_are_in_the_outputs(tmp_path, capsys, ctrl_c_at):
    """It printed only ``jetpredict profile: interrupted`` while 10W and 15W stood in --out."""
    out = tmp_path / "c3.csv"
    ctrl_c_at("25W")
    assert main(_profile(out)) == 130
    err = capsys.readouterr().err
    assert err.rstrip().splitlines()[-1] == (f"jetpredict profile: interrupted: 2 of 3 modes finished, written to "
                                             f"{out}, {out}.json"), err
    with out.open() as f:
        assert [row["mode"] for row in csv.DictReader(f)] == ["10W", "15W"]


def test_an_interrupt_in_the_first_mode_says_nothing_was_written(tmp_path, capsys, ctrl_c_at):
    out = tmp_path / "c3.csv"
    out.write_text("an earlier run's rows\n")
    ctrl_c_at("10W")
    assert main(_profile(out)) == 130
    err = capsys.readouterr().err
    assert err.rstrip().splitlines()[-1] == ("jetpredict profile: interrupted: no mode was finished: nothing was "
                                             "written (an existing --out is as it was)"), err
    assert out.read_text() == "an earlier run's rows\n"


def test_an_interrupt_of_a_run_that_switched_modes_says_the_mode_is_back(fake_root, tmp_path):
    """SIGTERM and SIGHUP said "the power mode in force before it was restored"; Ctrl-C said only what was
    written, although its controller had put the mode back as well."""
    from fakes import busy_vdd_in
    from jetpredict.models.catalogue import load_device
    from jetpredict.profiler.campaign import CampaignConfig, CampaignParts, run_campaign
    from jetpredict.profiler.mode_lists import modes_to_profile
    from jetpredict.profiler.power import NullPowerMeter
    from jetpredict.profiler.powermode import detect_controller
    from jetpredict.profiler.runner import RealTimeRunner

    nano = load_device("orin-nano")
    fake_root.add_jetson(nano)
    status = fake_root.read("/var/lib/nvpmodel/status")
    backend = busy_vdd_in(fake_root, minibatch_s=0.0)

    def ctrl_c():
        raise KeyboardInterrupt

    backend.next_minibatch = ctrl_c
    parts = CampaignParts("orin-nano", nano, modes_to_profile(nano, "7W"), RealTimeRunner(backend, NullPowerMeter()),
                          detect_controller("jetson", "orin-nano"), 0.0)
    cfg = CampaignConfig(device="jetson", workload="lenet5-mnist", out=tmp_path / "p.csv", modes="7W", batch_size=8,
                         workers=0, warmup=1, minibatches=2, progress=False)
    with pytest.raises(KeyboardInterrupt) as stop:
        run_campaign(cfg, parts)
    assert str(stop.value) == ("no mode was finished: nothing was written (an existing --out is as it was); "
                               "the power mode in force before it was restored")
    assert fake_root.read("/var/lib/nvpmodel/status") == status

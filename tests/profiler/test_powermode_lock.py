"""One run at a time changes a device's power modes: checking for another run and saving the original mode
is one claim (the state folder's lock), so of two runs started at the same moment the second is refused,
and the device ends in the original mode with no state file left (fake AGX Xavier, fake nvpmodel)."""

from __future__ import annotations

import os

import pytest
from fakes import finish, start_cli
from jetpredict.models.catalogue import load_device
from jetpredict.profiler.powermode import PrivilegedCommandError, detect_controller
from jetpredict.profiler.powermode.recovery import RunStillActive, restore_unfinished

ORIGINAL_ID = 3  # MODE_30W_ALL in force (the xavier_30w fixture): neither run's mode, nor the default
PROFILE = ["profile", "--device", "jetson", "--workload", "lenet5-mnist", "--batch-size", "2", "--workers", "0",
           "--warmup", "0", "--minibatches", "1", "--settle-s", "0", "--no-progress"]


def test_a_second_run_checking_while_the_first_saves_its_original_is_refused(xavier_30w):
    """The race itself, in one process: the second run checks while the first is inside ``nvpmodel -q``,
    after its own check found no state file and before it wrote one."""
    first, second = detect_controller("jetson"), detect_controller("jetson")
    refusals: list[Exception] = []
    snapshot = first.snapshot

    def second_run_checks_now():
        try:
            second.remember()
        except PrivilegedCommandError as err:
            refusals.append(err)
        return snapshot()

    first.snapshot = second_run_checks_now
    with first:
        first.apply(load_device("agx-xavier").preset("MAXN"))
    assert [str(e) for e in refusals] == [f"another jetpredict run (pid {os.getpid()}) is changing power modes "
                                          "on this device; wait for it to end"]
    assert xavier_30w.read("/var/lib/nvpmodel/status") == f"pmode:{ORIGINAL_ID:04d}"
    assert xavier_30w.state_files() == []  # no state file, and the lock file goes with its run


def test_restore_refuses_while_a_run_holds_the_lock(xavier_30w):
    ctl = detect_controller("jetson")
    with ctl:
        ctl.apply(load_device("agx-xavier").preset("MAXN"))
        with pytest.raises(RunStillActive, match=f"another jetpredict run \\(pid {os.getpid()}\\)"):
            restore_unfinished()
        assert xavier_30w.read("/var/lib/nvpmodel/status") == "pmode:0000"  # the run's mode, not put back under it
    assert xavier_30w.read("/var/lib/nvpmodel/status") == f"pmode:{ORIGINAL_ID:04d}"


@pytest.mark.slow
@pytest.mark.parametrize("second", ["profile", "apply"])
def test_of_two_runs_started_together_the_second_is_refused_naming_the_first(xavier_30w, tmp_path, second):
    xavier_30w.hold_nvpmodel("q")  # the first run waits inside the query that saves the original mode
    first = start_cli(xavier_30w, *PROFILE, "--modes", "MAXN", "--out", str(tmp_path / "first.csv"))
    try:
        xavier_30w.wait_held("q")
        args = ([*PROFILE, "--modes", "MODE_10W", "--out", str(tmp_path / "second.csv")] if second == "profile"
                else ["apply", "--mode", "MODE_10W"])
        late = start_cli(xavier_30w, *args)
        _, err = finish(late, 60)
        assert late.returncode == 1, err
        assert f"another jetpredict run (pid {first.pid}) is changing power modes on this device" in err
    finally:
        xavier_30w.release_nvpmodel("q")
        _, first_err = finish(first)
    assert first.returncode == 0, first_err
    switches = [c[-1] for c in xavier_30w.calls() if c[0] == "nvpmodel" and "-m" in c]
    assert switches == ["0", str(ORIGINAL_ID)]  # the first run's switch and restore, nothing of the second
    assert xavier_30w.read("/var/lib/nvpmodel/status") == f"pmode:{ORIGINAL_ID:04d}"
    assert xavier_30w.state_files() == [] and not (tmp_path / "second.csv").exists()

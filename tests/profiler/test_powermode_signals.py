"""Restore survives impatient people and dead processes (fake Jetson, fake ``nvpmodel``).

Ctrl-C twice (to the process group, as a terminal sends it), the second while the restore's ``nvpmodel -m``
is held, SIGTERM twice, SIGHUP and SIGQUIT during a custom mode all end in the original mode with no
temporary file left; after SIGKILL the state file is there and ``jetpredict restore`` puts the original mode
back.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from fakes import (
    FAKE_NVPMODEL,
    ORIGINAL_ID,
    finish,
    in_original_mode,
    signal_inside_switch,
    start_cli,
    start_python,
)
from jetpredict.models.catalogue import PowerMode, load_device
from jetpredict.profiler.powermode import detect_controller
from jetpredict.profiler.powermode import state as state_file

from tools.testing import NAPPING_MINUTE, wait_until

pytestmark = pytest.mark.slow  # starts processes or servers (see README: the fast pass)

CUSTOM_KNOBS = (2, 1190.4, 420.75, 800.0)
#: How long the restore's switch takes where a test needs something to happen inside it (_start's slow_restore).
SLOW_S = 1.0
#: How long a restore that should not happen is given to show (s): SIGTERM to exit through a restore took 0.31
#: and 0.35 s on a 2-core machine, so this leaves it over a second of load (SLOW_S + 1.5 before, with SLOW_S on).
RESTORE_SHOWS_S = 1.5

# The dispositions are set explicitly (SIGHUP's per test, @SIGHUP@): a child inherits ignored ones from a
# suite run under nohup (SIGHUP) or as a shell's background job (SIGINT, SIGQUIT).
CHILD = textwrap.dedent("""
    import signal
    import time
    signal.signal(signal.SIGHUP, signal.@SIGHUP@)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    from jetpredict.models.catalogue import PowerMode
    from jetpredict.profiler.powermode import detect_controller

    ctl = detect_controller("jetson", "agx-xavier")
    with ctl:
        ctl.apply(PowerMode("custom", 2, 1190.4, 420.75, 800.0))
        print("switched", ctl.read_back().knobs(), flush=True)
        @MINUTE@
    print("unreachable", flush=True)
""").replace("@MINUTE@", NAPPING_MINUTE)

# The same run training from a DataLoader with worker processes (a stop sent to the group ends them too).
WORKERS_CHILD = CHILD.replace("with ctl:\n", textwrap.dedent("""\
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    batches = iter(DataLoader(TensorDataset(torch.zeros(100000, 4)), batch_size=4, num_workers=2))
    with ctl:
""")).replace(NAPPING_MINUTE, "while True:\n        next(batches)\n        time.sleep(0.001)")


def _leftovers(root) -> list[str]:
    """Files a run may leave: the state dir's contents and any jetpredict temp file."""
    return root.state_files() + [p.name for p in Path(tempfile.gettempdir()).glob("jetpredict-nvpmodel-*")
                                 if p.stat().st_mtime > time.time() - 120]


def _start(root, sighup: str = "SIG_DFL", code: str = CHILD, slow_restore: bool = False) -> subprocess.Popen:
    """The child ``code`` (SIGHUP's disposition ``sighup``) once in the custom mode; ``slow_restore``: its
    restore's switch then takes :data:`SLOW_S` (only where a test needs it: every restore would pay it)."""
    child = start_python(root, code.replace("@SIGHUP@", sighup))
    line = child.stdout.readline()
    assert line.startswith(f"switched {CUSTOM_KNOBS}"), line + child.stderr.read()
    assert (root.state_dir() / state_file.STATE_FILE_NAME).is_file()  # written before the first switch
    if slow_restore:
        (root.path / "nvpmodel_delay_s").write_text(str(SLOW_S))
    return child


def _wait_delivered(pid: int, sig: int, timeout_s: float = 60.0) -> None:
    """Wait until ``sig``, sent to ``pid``, is no longer pending for it (/proc's SigPnd and ShdPnd): the kernel
    has handed it to the process, whose Python handler then runs before the main thread waits again."""
    bit = 1 << (sig - 1)

    def delivered() -> bool:
        fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
        return not (int(fields["SigPnd"], 16) | int(fields["ShdPnd"], 16)) & bit

    wait_until(delivered, timeout_s, f"signal {sig} still pending for pid {pid} after {timeout_s:g} s")


@pytest.mark.parametrize("sig, to_group", [(signal.SIGINT, True), (signal.SIGTERM, False)],
                         ids=["ctrl-c-twice-to-group", "sigterm-twice"])
def test_second_signal_during_restore_still_ends_in_the_original_mode(xavier_30w, sig, to_group):
    child = _start(xavier_30w)
    send = (lambda s: os.killpg(child.pid, s)) if to_group else child.send_signal
    xavier_30w.hold_nvpmodel("m")  # the restore's switch waits inside until released
    try:
        send(sig)
        xavier_30w.wait_held("m")  # the restore's nvpmodel -m is running
        send(sig)  # the second signal lands inside it, and is taken before it ends
        _wait_delivered(child.pid, sig)
    finally:
        xavier_30w.release_nvpmodel("m")
        out, err = finish(child)
    assert "unreachable" not in out
    assert child.returncode != 0, err
    # The restore's nvpmodel runs in a session of its own: the second signal to the group does not cut it short.
    assert f"nvpmodel -m {ORIGINAL_ID} failed" not in err, err
    in_original_mode(xavier_30w)
    assert _leftovers(xavier_30w) == []
    switches = [c[-1] for c in xavier_30w.calls() if c[0] == "nvpmodel" and "-m" in c]
    assert switches[-1] == str(ORIGINAL_ID)


def test_a_stop_to_the_group_restores_on_the_signal_though_dataloader_workers_end(xavier_30w):
    """SIGTERM to the process group ends the DataLoader's workers too, and torch's SIGCHLD handler raises
    for them: held during the restore, it runs once the original mode is back, not in the middle."""
    child = _start(xavier_30w, code=WORKERS_CHILD, slow_restore=True)  # the workers end during the restore
    os.killpg(child.pid, signal.SIGTERM)
    out, err = finish(child)
    assert "unreachable" not in out and child.returncode != 0
    assert "restoring the power mode on signal 15 failed" not in err, err
    in_original_mode(xavier_30w)
    assert _leftovers(xavier_30w) == []


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGQUIT], ids=["sighup", "sigquit"])
def test_sighup_and_sigquit_restore(xavier_30w, sig):
    child = _start(xavier_30w)
    os.killpg(child.pid, sig)
    out, err = finish(child)
    assert "unreachable" not in out
    assert child.returncode == 128 + sig, err
    in_original_mode(xavier_30w)
    assert _leftovers(xavier_30w) == []


def test_an_ignored_sighup_stays_ignored_and_the_exit_still_restores(xavier_30w):
    """Under nohup a dropped session must not end the run, nor put the original mode back while it goes on
    profiling: the hangup is ignored and the mode restored when the run ends (here on SIGTERM)."""
    child = _start(xavier_30w, sighup="SIG_IGN")
    os.killpg(child.pid, signal.SIGHUP)
    time.sleep(RESTORE_SHOWS_S)  # a restore would be done by now
    assert child.poll() is None
    assert xavier_30w.read("/var/lib/nvpmodel/status") != f"pmode:{ORIGINAL_ID:04d}"  # still in the custom mode
    os.killpg(child.pid, signal.SIGTERM)
    out, err = finish(child)
    assert "unreachable" not in out
    assert child.returncode == 128 + signal.SIGTERM, err
    in_original_mode(xavier_30w)
    assert _leftovers(xavier_30w) == []


# A switch to MODE_10W (-m 1) talks for 1.5 s; every -m logs its start and its end to <root>/events.
TALKING_NVPMODEL = textwrap.dedent("""
    import atexit as _a, pathlib as _p, sys as _s, time as _t
    _log = _p.Path(__file__).resolve().parents[2] / "events"
    if "-m" in _s.argv:
        _log.open("a").write(f"start {_s.argv[-1]}\\n")
        _a.register(lambda: _log.open("a").write(f"done {_s.argv[-1]}\\n"))
        if _s.argv[-1] == "1":
            for _ in range(5):
                print("NVPM: working", flush=True)
                _t.sleep(0.3)
""") + FAKE_NVPMODEL

# A run with a second thread (the power sampler, torch's pool): the kernel may hand it the signal.
CHILD_WITH_A_THREAD = textwrap.dedent("""
    import signal, threading, time
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from jetpredict.models.catalogue import load_device
    from jetpredict.profiler.powermode import detect_controller

    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
    ctl = detect_controller("jetson", "agx-xavier")
    with ctl:
        print("entered", flush=True)
        ctl.apply(load_device("agx-xavier").preset("MODE_10W"))
        print("unreachable", flush=True)
""")


def test_a_ctrl_c_during_a_switch_waits_for_it_then_restores(xavier_30w):
    """The switch's nvpmodel finishes before the restore's starts, however the signal reaches the process."""
    xavier_30w.install_tool("nvpmodel", TALKING_NVPMODEL.replace("@SOC@", load_device("agx-xavier").specs.soc))
    events = xavier_30w.path / "events"
    child = start_python(xavier_30w, CHILD_WITH_A_THREAD)
    assert child.stdout.readline().startswith("entered")
    deadline = time.monotonic() + 20
    while not (events.exists() and "start 1" in events.read_text()) and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.2)  # inside the 1.5 s switch
    os.killpg(child.pid, signal.SIGINT)
    time.sleep(0.3)
    os.killpg(child.pid, signal.SIGINT)  # impatient: twice
    out, err = finish(child)
    assert "unreachable" not in out and "KeyboardInterrupt" in err
    assert events.read_text().split("\n")[:4] == ["start 1", "done 1", f"start {ORIGINAL_ID}", f"done {ORIGINAL_ID}"]
    in_original_mode(xavier_30w)
    assert _leftovers(xavier_30w) == []


def _cli(root, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "jetpredict", *args], env=root.run_env(), capture_output=True,
                          text=True, timeout=60)


def test_after_sigkill_jetpredict_restore_brings_the_original_mode_back(xavier_30w):
    child = _start(xavier_30w)
    os.killpg(child.pid, signal.SIGKILL)
    finish(child)
    assert xavier_30w.read("/var/lib/nvpmodel/status") != f"pmode:{ORIGINAL_ID:04d}"  # left in the custom mode
    assert state_file.unfinished_run_warning() is not None  # what `profile` prints at its start
    done = _cli(xavier_30w, "restore")
    assert done.returncode == 0, done.stderr
    assert "restored the original power mode MODE_30W_ALL on agx-xavier" in done.stderr
    in_original_mode(xavier_30w)
    assert _leftovers(xavier_30w) == []
    again = _cli(xavier_30w, "restore")
    assert again.returncode == 0 and "nothing to restore" in again.stderr
    assert state_file.unfinished_run_warning() is None


def test_restore_refuses_while_the_run_is_alive(xavier_30w):
    child = _start(xavier_30w)
    try:
        busy = _cli(xavier_30w, "restore")
        assert busy.returncode == 1 and "still running" in busy.stderr
        second = detect_controller("jetson")
        with pytest.raises(RuntimeError, match=f"another jetpredict run \\(pid {child.pid}\\)"), second:
            pass  # a second run on the same device would fight the first one's switches
    finally:
        child.send_signal(signal.SIGTERM)
        finish(child)
    in_original_mode(xavier_30w)


def test_a_new_run_adopts_the_original_mode_of_an_unfinished_one(xavier_30w):
    child = _start(xavier_30w)
    os.killpg(child.pid, signal.SIGKILL)
    finish(child)
    ctl = detect_controller("jetson")
    # The mode in force is the dead run's custom one; the state file knows the real original.
    with ctl:
        ctl.apply(load_device("agx-xavier").preset("MAXN"))
    in_original_mode(xavier_30w)
    assert _leftovers(xavier_30w) == []


def test_a_failed_restore_keeps_the_state_and_is_retried(xavier_30w, monkeypatch):
    ctl = detect_controller("jetson")
    ctl.__enter__()
    ctl.apply(PowerMode("custom", *CUSTOM_KNOBS))
    monkeypatch.setenv("FAKE_NVPMODEL_FAIL", str(ORIGINAL_ID))
    with pytest.raises(Exception, match="failed"):
        ctl.restore()
    assert (xavier_30w.state_dir() / state_file.STATE_FILE_NAME).is_file()
    monkeypatch.delenv("FAKE_NVPMODEL_FAIL")
    ctl.__exit__(None, None, None)  # the exit path tries again
    in_original_mode(xavier_30w)
    assert _leftovers(xavier_30w) == []


def test_state_dir_choice(monkeypatch, tmp_path):
    monkeypatch.setenv(state_file.STATE_DIR_ENV, str(tmp_path / "s"))
    assert state_file.state_path() == tmp_path / "s" / state_file.STATE_FILE_NAME
    monkeypatch.delenv(state_file.STATE_DIR_ENV)
    monkeypatch.delenv("JETPREDICT_SYSFS_ROOT", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    expected = Path("/var/lib/jetpredict") if os.geteuid() == 0 else tmp_path / "xdg" / "jetpredict"
    assert state_file.state_dir() == expected
    assert set(state_file.state_dirs()) == {Path("/var/lib/jetpredict"), tmp_path / "xdg" / "jetpredict"}


def test_a_state_file_that_is_not_ours_is_reported_not_executed(xavier_30w):
    path = xavier_30w.state_dir() / state_file.STATE_FILE_NAME
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\x80\x04cos\nsystem\n.")  # pickle bytes: never loaded as anything but JSON
    done = _cli(xavier_30w, "restore")
    assert done.returncode == 1 and "cannot be read" in done.stderr
    assert "cannot be read" in state_file.unfinished_run_warning()


def test_profile_warns_at_start_about_an_unfinished_run(xavier_30w, tmp_path, capsys):
    from jetpredict.cli import main

    child = _start(xavier_30w)
    os.killpg(child.pid, signal.SIGKILL)
    finish(child)
    rc = main(["profile", "--device", "sim:agx-xavier", "--workload", "lenet5-mnist", "--modes", "MAXN",
               "--out", str(tmp_path / "p.csv"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "warning: an unfinished run left the device in a changed power mode" in err
    assert "MODE_30W_ALL on agx-xavier" in err and "jetpredict restore" in err
    # the twin's run switches no mode: no promise to restore it
    assert "This run changes no power mode" in err and "This run restores" not in err


APPLIED_ID = 2  # MODE_15W, set with `jetpredict apply` before the run


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["sigterm", "sighup"])
def test_a_signalled_run_over_an_applied_mode_ends_in_it_and_restore_then_gives_the_original(xavier_30w, sig):
    applied = _cli(xavier_30w, "apply", "--mode", "MODE_15W")
    assert applied.returncode == 0, applied.stderr
    child = _start(xavier_30w)
    os.killpg(child.pid, sig)
    out, err = finish(child)
    assert "unreachable" not in out and child.returncode == 128 + sig, err
    assert xavier_30w.read("/var/lib/nvpmodel/status") == f"pmode:{APPLIED_ID:04d}"  # the mode apply set
    kept = state_file.find_state()
    assert kept.kept and kept.original["mode"] == "MODE_30W_ALL"
    done = _cli(xavier_30w, "restore")
    assert done.returncode == 0, done.stderr
    in_original_mode(xavier_30w)
    assert _leftovers(xavier_30w) == []


def test_a_run_over_an_applied_mode_is_said_to_return_to_it_and_after_sigkill_restore_gives_the_original(
        xavier_30w):
    from jetpredict.profiler.status import pending_restore

    applied = _cli(xavier_30w, "apply", "--mode", "MODE_15W")
    assert applied.returncode == 0, applied.stderr
    child = _start(xavier_30w)
    try:
        pending = pending_restore()
        assert pending.run_alive and pending.saved_by_pid == child.pid
        assert (f"a run (pid {child.pid}) switches power modes over the one `jetpredict apply` set and "
                "returns to it when it ends; the original from before that, MODE_30W_ALL on agx-xavier"
                in pending.summary)
        busy = _cli(xavier_30w, "restore")
        assert busy.returncode == 1 and "still running" in busy.stderr
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        finish(child)
    assert xavier_30w.read("/var/lib/nvpmodel/status") != f"pmode:{ORIGINAL_ID:04d}"  # left in the custom mode
    done = _cli(xavier_30w, "restore")
    assert done.returncode == 0, done.stderr
    assert "restored the original power mode MODE_30W_ALL on agx-xavier" in done.stderr
    in_original_mode(xavier_30w)
    assert _leftovers(xavier_30w) == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT], ids=["sigterm", "sighup", "sigquit"])
def test_a_profile_stopped_by_a_signal_says_which_and_that_the_mode_is_back(xavier_30w, tmp_path, sig):
    """Ctrl-C prints "interrupted"; a stop by another signal says as much in one line, not nothing."""
    child, _, err = signal_inside_switch(
        xavier_30w, sig, "profile", "--device", "jetson", "--workload", "lenet5-mnist", "--modes", "MAXN",
        "--batch-size", "2", "--workers", "0", "--warmup", "0", "--minibatches", "1", "--settle-s", "0",
        "--no-progress", "--out", str(tmp_path / "p.csv"))
    assert child.returncode == 128 + sig, err
    assert err.strip().splitlines()[-1] == (f"jetpredict profile: stopped by {signal.Signals(sig).name}; the "
                                            "power mode in force before it was restored")
    in_original_mode(xavier_30w)
    assert _leftovers(xavier_30w) == []


def _run_with_outputs_gone(root, sig: int | None, *args: str) -> subprocess.Popen:
    """``profile`` of LeNet-5 on the board with ``args``: once inside the first switch its stdout and stderr
    readers go (a write to them then fails with EPIPE) and ``sig`` (None: none) is sent; the child, ended."""
    root.hold_nvpmodel("m")
    child = start_cli(root, "profile", "--device", "jetson", "--workload", "lenet5-mnist", "--batch-size", "2",
                      "--workers", "0", "--warmup", "0", "--settle-s", "0", *args)
    try:
        root.wait_held("m")
        child.stdout.close()
        child.stderr.close()
        if sig is not None:
            child.send_signal(sig)
    finally:
        root.release_nvpmodel("m")
        try:
            child.wait(timeout=120)
        finally:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
    return child


@pytest.mark.parametrize("sig, progress", [(signal.SIGHUP, False), (signal.SIGTERM, False), (signal.SIGHUP, True),
                                           (signal.SIGINT, True)],
                         ids=["sighup", "sigterm", "sighup-progress-bar", "sigint-progress-bar"])
def test_a_stop_after_standard_error_is_gone_still_exits_128_plus_the_signal(xavier_30w, tmp_path, sig, progress):
    """A hung-up terminal (the usual SIGHUP) takes standard error with it: the one-line message (and the
    progress bar's last line) cannot be written, and that must not turn 128 + the signal into 1."""
    child = _run_with_outputs_gone(xavier_30w, sig, "--modes", "MAXN", "--minibatches", "1",
                                   *([] if progress else ["--no-progress"]), "--out", str(tmp_path / "p.csv"))
    assert child.returncode == 128 + sig
    in_original_mode(xavier_30w)
    assert _leftovers(xavier_30w) == []


def test_a_run_whose_standard_error_goes_mid_run_profiles_on_and_exits_0(xavier_30w, tmp_path):
    """Without a signal (nohup, or a pipe reader that quit) the progress bar's failed write ends neither the run
    nor its status: exit 0 then reads as "profiled", and every mode is there."""
    out = tmp_path / "p.csv"
    child = _run_with_outputs_gone(xavier_30w, None, "--modes", "MAXN,MODE_10W", "--minibatches", "2", "--out", str(out))
    assert child.returncode == 0
    from jetpredict.models.profile_files import read_profile_csv

    assert list(read_profile_csv(out)["mode"]) == ["MAXN", "MODE_10W"]
    in_original_mode(xavier_30w)
    assert _leftovers(xavier_30w) == []


def test_the_unfinished_run_warning_to_a_gone_standard_error_does_not_end_the_profile(xavier_30w, tmp_path):
    """The warning is for a person: a failed write of it (standard error closed) must not end the run before
    its first mode with exit 0, as if it had profiled."""
    child = _start(xavier_30w)
    os.killpg(child.pid, signal.SIGKILL)
    finish(child)
    out = tmp_path / "p.csv"
    run = subprocess.Popen([sys.executable, "-m", "jetpredict", "profile", "--device", "sim:agx-xavier", "--workload",
                            "lenet5-mnist", "--modes", "MAXN", "--no-progress", "--out", str(out)],
                           env=xavier_30w.run_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    run.stderr.close()  # before its first line
    assert run.wait(timeout=120) == 0
    from jetpredict.models.profile_files import read_profile_csv

    assert list(read_profile_csv(out)["mode"]) == ["MAXN"]

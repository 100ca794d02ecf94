"""The original power mode comes back on every exit path: normal end, exception, SIGINT, SIGTERM."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import textwrap

import pytest
from jetpredict.models.catalogue import PowerMode, load_device
from jetpredict.profiler.powermode import HostController, detect_controller

from jetpredict.cli import main
from tools.testing import NAPPING_MINUTE

# Default dispositions: a child inherits ignored SIGINT/SIGQUIT from a suite run as a background job.
CHILD = textwrap.dedent("""
    import signal, sys, time
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    from jetpredict.models.catalogue import PowerMode, load_device
    from jetpredict.profiler.powermode import detect_controller

    device = load_device("agx-xavier")
    ctl = detect_controller("jetson", "agx-xavier")
    with ctl:
        ctl.apply(device.preset("MODE_10W"))
        ctl.apply(PowerMode("custom", 2, 1190.4, 420.75, 800.0))
        print("switched", ctl.read_back().knobs(), flush=True)
        @MINUTE@
    print("unreachable", flush=True)
""").replace("@MINUTE@", NAPPING_MINUTE)


@pytest.fixture
def xavier(fake_root):
    device = load_device("agx-xavier")
    fake_root.add_jetson(device, preset_id=3)  # start in MODE_30W_ALL, not the default
    return fake_root


def _nvpmodel_switches(root) -> list[str]:
    return [c[-1] for c in root.calls() if c[0] == "nvpmodel" and "-m" in c]


def test_normal_exit_restores(xavier):
    ctl = detect_controller("jetson")
    with ctl:
        ctl.apply(load_device("agx-xavier").preset("MAXN"))
    assert _nvpmodel_switches(xavier) == ["0", "3"]
    assert xavier.read("/var/lib/nvpmodel/status") == "pmode:0003"


def test_exception_restores_and_propagates(xavier):
    ctl = detect_controller("jetson")
    with pytest.raises(ZeroDivisionError), ctl:
        ctl.apply(PowerMode("custom", 1, 729.6, 318.75, 665.6))
        assert ctl.read_back().cpu_cores == 1
        1 / 0  # noqa: B018
    assert _nvpmodel_switches(xavier)[-1] == "3"
    assert ctl.read_back().knobs() == (8, 1190.4, 828.75, 1600.0)


# Python re-raises an uncaught KeyboardInterrupt as death by SIGINT; SIGTERM exits 128 + 15.
@pytest.mark.slow
@pytest.mark.parametrize("sig, expected_rc", [(signal.SIGINT, -signal.SIGINT), (signal.SIGTERM, 128 + signal.SIGTERM)])
def test_signal_in_a_child_process_restores_the_original_mode(xavier, sig, expected_rc):
    env = xavier.run_env()  # this checkout's jetpredict, under the kernel's refusals as the test's own writes
    child = subprocess.Popen([sys.executable, "-c", CHILD], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline()
        assert line.startswith("switched (2, 1190.4, 420.75, 800.0)"), line + child.stderr.read()
        child.send_signal(sig)
        out, err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == expected_rc, err
    assert "unreachable" not in out
    if sig == signal.SIGINT:
        assert "KeyboardInterrupt" in err
    switches = _nvpmodel_switches(xavier)
    assert switches[0] == "1" and switches[-1] == "3" and len(switches) == 3
    assert xavier.read("/var/lib/nvpmodel/status") == "pmode:0003"
    ctl = detect_controller("jetson")
    assert ctl.read_back().knobs() == (8, 1190.4, 828.75, 1600.0)


def test_sigint_chains_to_the_previous_handler_and_handlers_are_put_back():
    seen = []

    def previous(signum, frame):
        seen.append(signum)

    old = signal.signal(signal.SIGINT, previous)
    try:
        ctl = HostController(use_torch=False)
        start = ctl.current().cpu_cores
        with ctl:
            ctl.apply(PowerMode("host", 1, 0, 0, 0))
            os.kill(os.getpid(), signal.SIGINT)
            assert seen == [signal.SIGINT]
            assert ctl.read_back().cpu_cores == start  # restored by the handler, before the block ends
        assert signal.getsignal(signal.SIGINT) is previous
    finally:
        signal.signal(signal.SIGINT, old)


def test_restore_runs_once_even_when_signal_and_exit_both_fire(xavier):
    # Python's own SIGINT handler, as in a terminal (a suite run as a background job inherits it ignored).
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        ctl = detect_controller("jetson")
        with pytest.raises(KeyboardInterrupt), ctl:
            ctl.apply(load_device("agx-xavier").preset("MODE_10W"))
            os.kill(os.getpid(), signal.SIGINT)
        assert _nvpmodel_switches(xavier) == ["1", "3"]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, inherited)


# A DataLoader worker forked inside the block gets a Ctrl-C sent to the process group too: it must stop
# (as the owner would) but neither put the original mode back nor remove the owner's state file or lock.
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_a_process_forked_inside_neither_restores_nor_clears_the_state_file(xavier, monkeypatch, sig):
    from jetpredict.profiler.powermode import state as state_file

    monkeypatch.delenv(state_file.STATE_DIR_ENV, raising=False)
    saved = xavier.real("/var/lib/jetpredict") / state_file.STATE_FILE_NAME
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        ctl = detect_controller("jetson")
        with ctl:
            ctl.apply(PowerMode("custom", 2, 1190.4, 420.75, 800.0))
            calls_before = xavier.calls()
            assert saved.is_file()
            pid = os.fork()
            if pid == 0:  # the child: every way out ends in os._exit, never back into pytest
                status = 1
                try:
                    os.kill(os.getpid(), sig)
                    status = 2  # the handler let the child run on
                except (KeyboardInterrupt, SystemExit):
                    # Its exit paths too: the restore is a no-op outside the process that switched.
                    status = 3 if ctl.restore() else 0
                    ctl.__exit__(None, None, None)
                finally:
                    os._exit(status)
            _, wait_status = os.waitpid(pid, 0)
            assert os.waitstatus_to_exitcode(wait_status) == 0
            assert xavier.calls() == calls_before  # no nvpmodel call from the child
            assert saved.is_file()
            # Nor the lock: the child shares the parent's flock, so its unlock would free the parent's too.
            assert state_file.lock_path().is_file()
            with pytest.raises(state_file.LockHeldError):
                state_file.ModeLock.take()
            assert xavier.read("/var/lib/nvpmodel/status") != "pmode:0003"  # still in the custom mode
            assert signal.getsignal(sig) == ctl._on_signal  # the parent's handlers are untouched
        assert _nvpmodel_switches(xavier)[-1] == "3"
        assert xavier.read("/var/lib/nvpmodel/status") == "pmode:0003"
        assert not saved.exists()
    finally:
        signal.signal(signal.SIGINT, inherited)


def test_a_failed_restore_on_the_way_out_says_what_to_run(xavier, monkeypatch):
    from jetpredict.profiler.powermode import state as state_file
    from jetpredict.profiler.powermode.privileged import PrivilegedCommandError

    monkeypatch.delenv(state_file.STATE_DIR_ENV, raising=False)
    saved = xavier.real("/var/lib/jetpredict") / state_file.STATE_FILE_NAME
    ctl = detect_controller("jetson")
    with pytest.raises(PrivilegedCommandError) as err, ctl:
        ctl.apply(PowerMode("custom", 2, 1190.4, 420.75, 800.0))
        monkeypatch.setenv("FAKE_NVPMODEL_FAIL", "3")  # putting MODE_30W_ALL back fails, twice
    message = str(err.value)
    assert "nvpmodel -m 3 failed" in message and "MODE_30W_ALL on agx-xavier" in message
    assert f"{saved} keeps it; to put it back, run: " in message
    assert message.endswith(f"JETPREDICT_SYSFS_ROOT={xavier.path} jetpredict restore")
    assert saved.is_file() and err.value.argv[:2] == ["nvpmodel", "-m"]
    # The command it names does it once the cause is gone.
    monkeypatch.delenv("FAKE_NVPMODEL_FAIL")
    assert main(["restore"]) == 0
    assert xavier.read("/var/lib/nvpmodel/status") == "pmode:0003" and not saved.exists()


def test_the_restore_command_carries_the_environment_that_finds_the_state_file(monkeypatch, tmp_path):
    from jetpredict.profiler.powermode import privileged
    from jetpredict.profiler.powermode import state as state_file

    monkeypatch.delenv("JETPREDICT_SYSFS_ROOT", raising=False)
    monkeypatch.delenv(state_file.STATE_DIR_ENV, raising=False)
    monkeypatch.setattr(privileged, "is_root", lambda: False)
    assert state_file.restore_command() == "jetpredict restore"  # the user's own state dir
    monkeypatch.setattr(privileged, "is_root", lambda: True)
    assert state_file.restore_command() == "sudo jetpredict restore"  # a run started with sudo
    monkeypatch.setenv(state_file.STATE_DIR_ENV, str(tmp_path / "my state"))
    expected = f"sudo JETPREDICT_STATE_DIR='{tmp_path}/my state' jetpredict restore"  # quoted for a shell
    assert state_file.restore_command() == expected


# --- a run that starts over a mode `jetpredict apply` set ------------------------------------------


APPLIED_LABEL = "6c-1497.6-905.25-1600"  # a custom mode: nvpmodel -f <the apply's conf> -m 4
APPLIED_KNOBS = (6, 1497.6, 905.25, 1600.0)


def _apply(label: str = APPLIED_LABEL) -> None:
    """What `jetpredict apply --mode LABEL` does (the switch kept, the original in the state file)."""
    from jetpredict.profiler.apply import apply_mode, parse_mode

    device = load_device("agx-xavier")
    apply_mode(device, parse_mode(device, label), out=io.StringIO())


def test_a_run_over_an_applied_mode_ends_in_it_even_on_an_exception(xavier, monkeypatch):
    from jetpredict.profiler.powermode import state as state_file

    monkeypatch.delenv(state_file.STATE_DIR_ENV, raising=False)
    _apply()
    ctl = detect_controller("jetson")
    assert ctl.read_back().knobs() == APPLIED_KNOBS
    with pytest.raises(ZeroDivisionError), ctl:
        during = state_file.find_state()
        # On disk meanwhile: the apply's original under this run's pid, what a crash leaves to restore.
        assert (during.pid, during.kept, during.over_applied) == (os.getpid(), False, True)
        assert during.original["mode"] == "MODE_30W_ALL"
        ctl.apply(load_device("agx-xavier").preset("MODE_10W"))
        1 / 0  # noqa: B018
    assert ctl.read_back().knobs() == APPLIED_KNOBS
    kept = state_file.find_state()
    assert kept.kept and not kept.over_applied and kept.original["mode"] == "MODE_30W_ALL"
    assert main(["restore"]) == 0
    assert _nvpmodel_switches(xavier)[-1] == "3" and ctl.read_back().knobs() == (8, 1190.4, 828.75, 1600.0)


def test_over_an_applied_mode_whose_configuration_is_gone_the_run_ends_in_the_original(xavier, monkeypatch,
                                                                                        caplog):
    from jetpredict.profiler.powermode import state as state_file

    monkeypatch.delenv(state_file.STATE_DIR_ENV, raising=False)
    _apply()
    (state_file.state_dir() / state_file.CUSTOM_CONF_NAME).unlink()  # nvpmodel -m 4 alone cannot come back
    ctl = detect_controller("jetson")
    with caplog.at_level("WARNING"), ctl:
        ctl.apply(load_device("agx-xavier").preset("MAXN"))
    assert "cannot be put back as it is; this run ends in the original from before it" in caplog.text
    assert _nvpmodel_switches(xavier)[-1] == "3" and state_file.find_state() is None


def test_a_failed_return_to_the_applied_mode_says_so_and_restore_gives_the_original(xavier, monkeypatch):
    from jetpredict.profiler.powermode import state as state_file
    from jetpredict.profiler.powermode.base import RestoreFailedError

    monkeypatch.delenv(state_file.STATE_DIR_ENV, raising=False)
    _apply("MODE_15W")
    ctl = detect_controller("jetson")
    with pytest.raises(RestoreFailedError) as err, ctl:
        ctl.apply(load_device("agx-xavier").preset("MAXN"))
        monkeypatch.setenv("FAKE_NVPMODEL_FAIL", "2")  # going back to MODE_15W fails
    assert "could not return to the power mode `jetpredict apply` set; the original from before it is " \
           "MODE_30W_ALL on agx-xavier" in str(err.value)
    monkeypatch.delenv("FAKE_NVPMODEL_FAIL")
    assert main(["restore"]) == 0
    assert xavier.read("/var/lib/nvpmodel/status") == "pmode:0003" and state_file.find_state() is None


def test_over_an_applied_mode_the_board_cannot_name_the_run_ends_in_the_original(xavier, monkeypatch, caplog):
    """A board tool that cannot say which mode is in force (``nvpmodel -q`` failing) does not stop the run:
    it ends in the apply's original, as a crashed run's file is adopted."""
    from jetpredict.profiler.powermode import state as state_file
    from jetpredict.profiler.powermode.privileged import PrivilegedCommandError

    monkeypatch.delenv(state_file.STATE_DIR_ENV, raising=False)
    _apply("MODE_15W")
    ctl = detect_controller("jetson")

    def no_answer():
        raise PrivilegedCommandError("unexpected nvpmodel -q output: 'NVPM ERROR'", ["nvpmodel", "-q"])

    monkeypatch.setattr(ctl, "query", no_answer)
    with caplog.at_level("WARNING"), ctl:
        ctl.apply(load_device("agx-xavier").preset("MAXN"))
    assert "cannot read the power mode in force" in caplog.text
    assert xavier.read("/var/lib/nvpmodel/status") == "pmode:0003" and state_file.find_state() is None


def test_a_restore_nvpmodel_reports_a_refused_write_in_fails_and_keeps_the_state_file(xavier, monkeypatch):
    """nvpmodel goes on past a knob the kernel refuses and exits 0: its NVPM ERROR line is the only sign, and the
    restore must read it as a failure, not remove the record of the original mode."""
    from fakes import EMC_CAP
    from jetpredict.profiler.powermode import state as state_file
    from jetpredict.profiler.powermode.base import RestoreFailedError

    monkeypatch.delenv(state_file.STATE_DIR_ENV, raising=False)
    xavier.hide_debugfs()  # the fake's governors then leave the EMC cap alone
    cap = xavier.real(EMC_CAP)
    ctl = detect_controller("jetson")
    with pytest.raises(RestoreFailedError, match="NVPM ERROR: Error writing") as err, ctl:
        ctl.apply(PowerMode("custom", 2, 1190.4, 420.75, 800.0))
        cap.unlink()
        cap.mkdir()  # the switch back cannot write the EMC cap (EISDIR)
    assert err.value.argv[:2] == ["nvpmodel", "-m"]
    assert (xavier.real("/var/lib/jetpredict") / state_file.STATE_FILE_NAME).is_file()

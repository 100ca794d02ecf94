"""The original power mode comes back on every exit path: normal end, exception, SIGINT, SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest
from jetpredict.models.catalogue import PowerMode, load_device
from jetpredict.profiler.powermode import HostController, detect_controller

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
        time.sleep(60)
    print("unreachable", flush=True)
""")


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
    assert ctl.read_back().knobs() == (8, 1200.0, 900.0, 1600.0)


# Python re-raises an uncaught KeyboardInterrupt as death by SIGINT; SIGTERM exits 128 + 15.
@pytest.mark.slow
@pytest.mark.parametrize("sig, expected_rc", [(signal.SIGINT, -signal.SIGINT), (signal.SIGTERM, 128 + signal.SIGTERM)])
def test_signal_in_a_child_process_restores_the_original_mode(xavier, sig, expected_rc):
    env = xavier.env()
    env["PYTHONPATH"] = os.pathsep.join([os.getcwd(), env.get("PYTHONPATH", "")])
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
    assert ctl.read_back().knobs() == (8, 1200.0, 900.0, 1600.0)


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
# (as the owner would) but neither put the original mode back nor remove the owner's state file.
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

    from jetpredict.cli import main

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

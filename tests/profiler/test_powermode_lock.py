"""One run at a time changes a device's power modes: checking for another run and saving the original mode
is one claim (the device's lock, whoever runs it), so of two runs started at the same moment the second is
refused, and the device ends in the original mode with no state file left (fake AGX Xavier, fake nvpmodel)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest
from fakes import ORIGINAL_ID, finish, start_cli
from jetpredict.models.catalogue import load_device
from jetpredict.models.errors import InputError
from jetpredict.profiler.campaign import CampaignConfig, run_campaign
from jetpredict.profiler.powermode import PrivilegedCommandError, detect_controller
from jetpredict.profiler.powermode import state as state_file
from jetpredict.profiler.powermode.recovery import RunStillActive, restore_unfinished

from tools.testing import wait_until

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


def test_runs_that_keep_their_state_in_different_folders_share_one_lock(xavier_30w, tmp_path, monkeypatch):
    """Root keeps its state in /var/lib/jetpredict, a user in ~/.local/state: with a lock beside each state
    file, a user's run and a root run switched the same board at once and left it in neither's original."""
    monkeypatch.setenv(state_file.STATE_DIR_ENV, str(tmp_path / "alice"))
    alice = detect_controller("jetson")
    with alice:
        alice.apply(load_device("agx-xavier").preset("MAXN"))
        monkeypatch.setenv(state_file.STATE_DIR_ENV, str(tmp_path / "bob"))
        with pytest.raises(PrivilegedCommandError, match=f"another jetpredict run \\(pid {os.getpid()}\\)"):
            detect_controller("jetson").remember()
        assert not restore_unfinished().restored  # bob's restore finds no file of his: no switch under alice
        assert xavier_30w.read("/var/lib/nvpmodel/status") == "pmode:0000"
        monkeypatch.setenv(state_file.STATE_DIR_ENV, str(tmp_path / "alice"))
    assert xavier_30w.read("/var/lib/nvpmodel/status") == f"pmode:{ORIGINAL_ID:04d}"
    assert xavier_30w.state_files() == [] and not any((tmp_path / "bob").glob("*"))


def test_a_lock_file_another_user_left_is_taken_read_only(xavier_30w, monkeypatch):
    """A file left in the shared folder by another user's killed run (theirs, 0644): the lock is still taken
    on it, the holder's pid not written, and it stays there (in a sticky folder it is theirs to remove)."""
    path = state_file.lock_path()
    assert path.parent == xavier_30w.real("/run/lock")
    path.write_text("4242\n")
    os.chmod(path, 0o644)
    real_open = os.open

    def as_another_user(file, flags, *args):  # root would open it for writing; a user may not
        if os.fspath(file) == os.fspath(path) and flags & (os.O_RDWR | os.O_WRONLY):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, flags, *args)

    def not_theirs(self, *args, **kwargs):
        raise PermissionError(1, "Operation not permitted", str(self))

    with monkeypatch.context() as user:
        user.setattr(os, "geteuid", lambda: 65534)  # the file's owner (root here) is not this run's user
        user.setattr(os, "open", as_another_user)
        user.setattr(type(path), "unlink", not_theirs)
        lock = state_file.ModeLock.take()
        try:
            with pytest.raises(state_file.LockHeldError):
                state_file.ModeLock.take()  # held: a second run is refused
        finally:
            lock.release()
    assert path.read_text() == "4242\n"
    state_file.ModeLock.take().release()  # released: taken again, and removed by its owner
    assert not path.exists()


def test_restore_refuses_while_a_run_holds_the_lock(xavier_30w):
    ctl = detect_controller("jetson")
    with ctl:
        ctl.apply(load_device("agx-xavier").preset("MAXN"))
        with pytest.raises(RunStillActive, match=f"another jetpredict run \\(pid {os.getpid()}\\)"):
            restore_unfinished()
        assert xavier_30w.read("/var/lib/nvpmodel/status") == "pmode:0000"  # the run's mode, not put back under it
    assert xavier_30w.read("/var/lib/nvpmodel/status") == f"pmode:{ORIGINAL_ID:04d}"


def _failing_workload(tmp_path: Path, monkeypatch) -> tuple[CampaignConfig, Path]:
    """A profile of MODE_10W whose workload's module leaves the returned file when imported and whose factory
    fails: what says whether the campaign ever looked at its workload."""
    imported = tmp_path / "imported"
    (tmp_path / "never_built_model.py").write_text(
        f"open({str(imported)!r}, 'w').close()\n\n\ndef make():\n    raise AssertionError('built')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = CampaignConfig(device="jetson", workload="never_built_model:make", out=tmp_path / "second.csv",
                         modes="MODE_10W", batch_size=2, workers=0, warmup=0, minibatches=1, settle_s=0,
                         progress=False)
    return cfg, imported


def test_a_second_profile_is_refused_before_it_builds_its_workload(xavier_30w, tmp_path, monkeypatch):
    """A second ``profile`` met the lock only as it entered its controller, once torch was imported and its
    network built (5-7 s for a refusal): it is refused first, with the message the controller gives."""
    second, imported = _failing_workload(tmp_path, monkeypatch)
    first = detect_controller("jetson")
    with first:
        first.apply(load_device("agx-xavier").preset("MAXN"))
        with pytest.raises(PrivilegedCommandError) as refusal:
            run_campaign(second)
        original = state_file.find_state().describe()  # the first run's, named in the refusal
    assert str(refusal.value) == (f"another jetpredict run (pid {os.getpid()}) is changing power modes on this "
                                  f"device; wait for it to end (original mode: {original})")
    assert not imported.exists() and not (tmp_path / "second.csv").exists()
    assert xavier_30w.read("/var/lib/nvpmodel/status") == f"pmode:{ORIGINAL_ID:04d}"
    assert xavier_30w.state_files() == []


def test_a_profile_whose_workload_fails_to_build_leaves_the_lock_free(xavier_30w, tmp_path, monkeypatch):
    """The lock a profile takes before building its workload goes with the failed build: no lock file stays
    and the next run takes it."""
    cfg, imported = _failing_workload(tmp_path, monkeypatch)
    with pytest.raises(InputError, match=r"its factory make\(\) failed"):
        run_campaign(cfg)
    assert imported.exists() and xavier_30w.state_files() == []
    state_file.ModeLock.take().release()
    assert xavier_30w.read("/var/lib/nvpmodel/status") == f"pmode:{ORIGINAL_ID:04d}"


def test_a_profile_whose_out_cannot_be_written_leaves_the_lock_free(xavier_30w, tmp_path):
    """Refused before its controller is entered (the lock taken, the workload built): the campaign releases the
    lock itself, as the controller would have on its way out."""
    (tmp_path / "file").write_text("not a folder\n")
    cfg = CampaignConfig(device="jetson", workload="lenet5-mnist", out=tmp_path / "file" / "p.csv",
                         modes="MODE_10W", batch_size=2, workers=0, warmup=0, minibatches=1, settle_s=0,
                         progress=False)
    with pytest.raises(InputError, match="cannot write --out"):
        run_campaign(cfg)
    assert xavier_30w.state_files() == []
    state_file.ModeLock.take().release()  # the next run takes it
    assert xavier_30w.read("/var/lib/nvpmodel/status") == f"pmode:{ORIGINAL_ID:04d}"


def test_a_lock_released_before_it_is_handed_over_is_not_trusted(xavier_30w):
    """A controller given a lock (:meth:`hold_lock`) that is no longer held takes one of its own: switching
    under a released lock would let a second run in."""
    lock = state_file.ModeLock.take()
    lock.release()
    ctl = detect_controller("jetson")
    ctl.hold_lock(lock)
    with ctl:
        ctl.apply(load_device("agx-xavier").preset("MAXN"))
        with pytest.raises(state_file.LockHeldError):
            state_file.ModeLock.take()
    assert xavier_30w.read("/var/lib/nvpmodel/status") == f"pmode:{ORIGINAL_ID:04d}"
    assert xavier_30w.state_files() == []


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


def test_restore_after_a_kill_waits_for_the_switch_the_killed_run_left_running(xavier_30w, tmp_path, monkeypatch):
    """nvpmodel runs in its own session, so it outlives a SIGKILL of its run: a restore at once put the
    original mode back, then the killed run's switch landed and left MODE_10W, with no state file to undo it."""
    xavier_30w.hold_nvpmodel("m")
    child = start_cli(xavier_30w, *PROFILE, "--modes", "MODE_10W", "--out", str(tmp_path / "p.csv"))
    # The orphaned switch ends a second later at the latest, while the restore below waits for it (or does not).
    release = threading.Timer(1.0, xavier_30w.release_nvpmodel, ("m",))
    try:
        xavier_30w.wait_held("m")  # the run is inside its switch to MODE_10W
        child.kill()
        child.wait()
        orphan = int(state_file.lock_path().read_text().split()[1])  # the switch the killed run left running
        _release_once_waited_for(orphan, xavier_30w, monkeypatch)
        release.start()
        result = restore_unfinished()
    finally:
        release.cancel()
        xavier_30w.release_nvpmodel("m")
        finish(child)
    assert result.restored, result.message
    switches = [c[-1] for c in xavier_30w.calls() if c[0] == "nvpmodel" and "-m" in c]
    assert switches == ["1", str(ORIGINAL_ID)]  # the orphan's switch, then the restore: never the other way
    time.sleep(0.2)
    assert xavier_30w.read("/var/lib/nvpmodel/status") == f"pmode:{ORIGINAL_ID:04d}"
    assert xavier_30w.state_files() == []


def _release_once_waited_for(orphan: int, root, monkeypatch) -> None:
    """End the held switch ``orphan`` as soon as this process's restore has waited a poll for it: its third
    look at the pid (:func:`state.process_start_time`, read through) comes after one ``ORPHAN_POLL_S`` sleep
    with the switch still running. A restore that does not look gets the 1 s timer's release instead."""
    looks = []
    real_start_time = state_file.process_start_time

    def start_time(pid: int) -> int | None:
        started = real_start_time(pid)
        if pid == orphan:
            looks.append(started)
            if len(looks) == 3:
                root.release_nvpmodel("m")
        return started

    monkeypatch.setattr(state_file, "process_start_time", start_time)


def test_a_lock_folder_this_process_cannot_write_leaves_the_lock_beside_the_state_file(xavier_30w, monkeypatch):
    """A read-only /run/lock, or one only root may write, took 20 tries and then refused every run as if
    another held the lock ("pid not recorded yet")."""
    shared = xavier_30w.real("/run/lock")
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p) == shared else real_access(p, mode))
    assert state_file.lock_path() == xavier_30w.state_dir() / state_file.LOCK_FILE_NAME
    ctl = detect_controller("jetson")
    with ctl:
        ctl.apply(load_device("agx-xavier").preset("MAXN"))
    assert xavier_30w.read("/var/lib/nvpmodel/status") == f"pmode:{ORIGINAL_ID:04d}"
    assert xavier_30w.state_files() == []


def _left_record(path: Path, command: subprocess.Popen) -> None:
    """The lock file a killed holder (a pid no longer alive) left, naming ``command`` as still running."""
    path.write_text(f"999999\n{command.pid} {state_file.process_start_time(command.pid)}\n")


def test_a_command_a_killed_run_left_running_refuses_runs_and_restores_in_words(xavier_30w, monkeypatch):
    monkeypatch.setattr(state_file.privileged, "COMMAND_TIMEOUT_S", 0.3)  # how long a new holder waits
    orphan = subprocess.Popen(["sleep", "30"], start_new_session=True)
    said = f"a power-mode command a killed run left running (pid {orphan.pid}) has not ended"
    try:
        _left_record(state_file.lock_path(), orphan)
        with pytest.raises(PrivilegedCommandError, match=re.escape(f"{said}; wait for it to end")):
            detect_controller("jetson").remember()

        class Unfinished:  # a state file whose run was killed
            path, pid = None, 999999

            def run_alive(self) -> bool:
                return False

        monkeypatch.setattr(state_file, "find_state", Unfinished)
        with pytest.raises(RunStillActive, match=re.escape(f"{said}; wait for it, then restore")):
            restore_unfinished()
    finally:
        orphan.kill()
        orphan.wait()
    assert xavier_30w.read("/var/lib/nvpmodel/status") == f"pmode:{ORIGINAL_ID:04d}"


@pytest.mark.skipif(os.geteuid() != 0, reason="giving the lock file another owner needs root")
def test_sudo_restore_waits_for_a_command_another_users_killed_run_left(xavier_30w, monkeypatch):
    """A user's run (nvpmodel through sudo) killed mid-switch leaves its lock file, theirs: `sudo jetpredict
    restore` must still wait for that switch (trusting only root's files, it restored under it)."""
    monkeypatch.setattr(state_file.privileged, "COMMAND_TIMEOUT_S", 0.3)
    theirs = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        _left_record(state_file.lock_path(), theirs)
        os.chown(state_file.lock_path(), 65534, 65534)
        with pytest.raises(state_file.LockHeldError) as err:
            state_file.ModeLock.take()
        assert err.value.holder is not None and f"pid {theirs.pid}" in err.value.holder
    finally:
        theirs.kill()
        theirs.wait()
    state_file.ModeLock.take().release()  # once it has ended, the lock is taken


def test_an_unusable_shared_lock_folder_is_said(xavier_30w, monkeypatch, caplog):
    shared = xavier_30w.real("/run/lock")
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p) == shared else real_access(p, mode))
    with caplog.at_level("WARNING"):
        state_file.lock_path()
    assert f"cannot create files in {shared}" in caplog.text and "other users do not see it" in caplog.text


def test_a_command_stopped_on_its_timeout_takes_what_it_runs_with_it(fake_root, tmp_path):
    """sudo runs nvpmodel as its child: a SIGKILL of sudo alone (subprocess.run's timeout) left the switch
    running after the run had moved on."""
    from jetpredict.profiler.powermode import privileged

    child_pid = tmp_path / "child.pid"
    fake_root.install_tool("slowtool", f"""
import subprocess, sys
child = subprocess.Popen(["sleep", "60"])  # as sudo runs its command: a child in its process group
open({str(child_pid)!r}, "w").write(str(child.pid))
child.wait()
""")
    with pytest.raises(PrivilegedCommandError, match="did not finish within 1 s"):
        privileged.run_privileged(["slowtool"], timeout_s=1.0)
    pid = int(child_pid.read_text())
    # no zombie either: reaped by init once orphaned
    wait_until(lambda: state_file.process_start_time(pid) is None, 5, f"pid {pid} still there after 5 s", poll_s=0.05)


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="needs Linux /proc")
def test_a_live_run_that_took_no_lock_is_not_taken_over(xavier_30w):
    """A state file whose run still runs without holding the lock (a jetpredict from before the lock): a new
    run must refuse, not take the file over and later restore that run's original as its own."""
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        state = xavier_30w.state_dir() / state_file.STATE_FILE_NAME
        state.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        doc = {"schema_version": 1, "kind": "jetson", "device": "agx-xavier", "snapshot": {"id": 0, "clocks": None},
               "pid": sleeper.pid, "boot_id": state_file.boot_id(),
               "start_time": state_file.process_start_time(sleeper.pid)}
        state.write_text(json.dumps(doc))
        state.chmod(0o600)
        with pytest.raises(PrivilegedCommandError, match=f"another jetpredict run \\(pid {sleeper.pid}\\)"):
            detect_controller("jetson").remember()
        assert json.loads(state.read_text())["pid"] == sleeper.pid  # the live run's file is left to it
        assert xavier_30w.read("/var/lib/nvpmodel/status") == f"pmode:{ORIGINAL_ID:04d}"
    finally:
        sleeper.kill()
        sleeper.wait()

"""``jetpredict restore`` treats the state file as untrusted data, and a state dir it cannot see is skipped."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from jetpredict.models.catalogue import load_device
from jetpredict.profiler.powermode import state as state_file
from jetpredict.profiler.powermode.recovery import RunStillActive, restore_unfinished
from jetpredict.profiler.powermode.state import StateFileError

CPU = "/sys/devices/system/cpu"
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


@pytest.fixture
def orin(fake_root, monkeypatch):
    """An Orin NX fake root whose state dir is ``<root>/var/lib/jetpredict``."""
    monkeypatch.delenv(state_file.STATE_DIR_ENV, raising=False)
    fake_root.add_jetson(load_device("orin-nx"))
    return fake_root


def _write_state(root, kind: str, snapshot: object) -> Path:
    path = root.real("/var/lib/jetpredict") / state_file.STATE_FILE_NAME
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    doc = {"schema_version": 1, "kind": kind, "device": "orin-nx", "snapshot": snapshot, "pid": 999999,
           "boot_id": "x"}
    path.write_text(json.dumps(doc))
    path.chmod(0o600)
    return path


def test_sysfs_restore_writes_no_file_outside_the_controllers_knobs(orin):
    conf = orin.read("/etc/nvpmodel.conf")
    path = _write_state(orin, "jetson-sysfs", {"/etc/cron.d/evil": "* * * * * root sh -c id",
                                               "/etc/nvpmodel.conf": "garbage"})
    with pytest.raises(StateFileError, match="not a knob of orin-nx"):
        restore_unfinished()
    assert not orin.real("/etc/cron.d/evil").exists()
    assert orin.read("/etc/nvpmodel.conf") == conf
    assert path.is_file()  # kept for a person to look at


def test_sysfs_restore_refuses_a_value_that_is_not_a_number(orin):
    _write_state(orin, "jetson-sysfs", {f"{CPU}/cpu1/online": "0", f"{CPU}/cpu0/cpufreq/scaling_max_freq": "x\ny"})
    with pytest.raises(StateFileError, match="not a clock/knob number"):
        restore_unfinished()
    assert orin.read(f"{CPU}/cpu1/online") == "1"  # nothing written before the check


def test_sysfs_restore_of_a_well_formed_snapshot_still_works(orin):
    max_freq = f"{CPU}/cpu2/cpufreq/scaling_max_freq"
    path = _write_state(orin, "jetson-sysfs", {f"{CPU}/cpu1/online": 0, max_freq: "729600"})
    assert restore_unfinished().restored
    assert orin.read(f"{CPU}/cpu1/online") == "0" and orin.read(max_freq) == "729600"
    assert not path.exists()


def test_nvpmodel_restore_refuses_a_foreign_clocks_path(orin, tmp_path):
    victim = tmp_path / "victim.conf"
    victim.write_text("{}")
    _write_state(orin, "jetson", {"id": 0, "clocks": str(victim)})
    with pytest.raises(StateFileError, match="not the jetson_clocks store"):
        restore_unfinished()
    assert victim.is_file()
    assert orin.calls() == []  # neither nvpmodel nor jetson_clocks ran


def test_nvpmodel_restore_uses_the_store_beside_the_state_file(orin):
    store = orin.real("/var/lib/jetpredict") / state_file.CLOCKS_STORE_NAME
    store.parent.mkdir(parents=True, mode=0o700)
    store.write_text(json.dumps({f"{CPU}/cpu0/cpufreq/scaling_max_freq": 729600}))
    _write_state(orin, "jetson", {"id": 0, "clocks": str(store)})
    assert restore_unfinished().restored
    assert ["jetson_clocks", "--restore", str(store)] in orin.calls()
    assert not store.exists()


@pytest.mark.parametrize("kind, snapshot", [
    ("jetson", {"id": "x"}), ("jetson", {"id": True}), ("jetson", {"id": 0, "extra": 1}), ("jetson", [1]),
    ("jetson", "abc"), ("jetson-sysfs", [1]), ("jetson-sysfs", "abc"), ("jetson-sysfs", {f"{CPU}/cpu1/online": None}),
])
def test_a_malformed_snapshot_is_a_state_file_error_not_a_traceback(orin, kind, snapshot):
    _write_state(orin, kind, snapshot)
    with pytest.raises(StateFileError):
        restore_unfinished()
    assert [c for c in orin.calls() if c[0] == "nvpmodel" and "-m" in c] == []


def test_as_root_a_state_file_of_another_user_is_refused(orin, monkeypatch):
    path = _write_state(orin, "jetson", {"id": 0, "clocks": None})
    if IS_ROOT:
        os.chown(path, 12345, 12345)
    else:  # behave as root: the file is ours, so not root's
        monkeypatch.setattr(state_file.privileged, "is_root", lambda: True)
    with pytest.raises(StateFileError, match="not root"):
        state_file.find_state()
    assert orin.calls() == []


@pytest.mark.skipif(not IS_ROOT, reason="a root-owned file needs root")
@pytest.mark.parametrize("mode", [0o660, 0o620, 0o606, 0o602, 0o666], ids=oct)
def test_as_root_a_group_or_world_writable_state_file_is_refused(orin, mode):
    path = _write_state(orin, "jetson", {"id": 0, "clocks": None})
    path.chmod(mode)
    with pytest.raises(StateFileError, match=f"writable by group or others \\(mode {mode:o}\\)"):
        state_file.find_state()


def _root_stat(mode: int) -> os.stat_result:
    """What ``stat`` says of a root-owned regular file with permission bits ``mode``."""
    return os.stat_result((0o100000 | mode, 1, 1, 1, 0, 0, 2, 0, 0, 0))


@pytest.mark.parametrize("mode", [0o620, 0o660, 0o602, 0o606, 0o666], ids=oct)
def test_as_root_a_file_group_or_others_could_have_written_is_refused(monkeypatch, tmp_path, mode):
    """The rule without root: group write alone (0o620) is as much another user's way in as world write."""
    monkeypatch.setattr(state_file.privileged, "is_root", lambda: True)
    with pytest.raises(StateFileError, match=f"writable by group or others \\(mode {mode:o}\\)"):
        state_file.check_owner(tmp_path / "s.json", _root_stat(mode))


@pytest.mark.parametrize("mode", [0o600, 0o644, 0o400, 0o755], ids=oct)
def test_as_root_a_file_only_root_can_write_is_accepted(monkeypatch, tmp_path, mode):
    monkeypatch.setattr(state_file.privileged, "is_root", lambda: True)
    state_file.check_owner(tmp_path / "s.json", _root_stat(mode))


def test_a_state_dir_this_user_cannot_look_into_is_skipped_with_a_hint(tmp_path, monkeypatch, caplog):
    blocked, mine = tmp_path / "system", tmp_path / "user"
    monkeypatch.setattr(state_file, "state_dirs", lambda: [mine, blocked])
    real_exists = Path.exists

    def exists(self: Path, *args, **kwargs) -> bool:
        # What a 0700 root dir does to a non-root user (root itself would see through a chmod).
        if self.parent == blocked:
            raise PermissionError(13, "Permission denied", str(self))
        return real_exists(self, *args, **kwargs)

    monkeypatch.setattr(Path, "exists", exists)
    with caplog.at_level(logging.WARNING):
        assert state_file.find_state() is None
        assert state_file.unfinished_run_warning() is None
    assert "sudo jetpredict restore" in caplog.text and str(blocked) in caplog.text


@pytest.mark.skipif(IS_ROOT, reason="root reads a 0700 dir anyway")
def test_a_real_0700_dir_does_not_fail_find_state(tmp_path, monkeypatch):
    blocked = tmp_path / "system"
    blocked.mkdir(mode=0o700)
    (blocked / state_file.STATE_FILE_NAME).write_text("{}")
    blocked.chmod(0)
    monkeypatch.setattr(state_file, "state_dirs", lambda: [tmp_path / "user", blocked])
    try:
        assert state_file.find_state() is None
    finally:
        blocked.chmod(0o700)


# --- whose run is alive: the pid and when that process started --------------------------------------


@pytest.fixture
def sleeper(tmp_path):
    """A live process that is not a jetpredict run, named with spaces and parentheses (``/proc/<pid>/stat``
    puts the name in parentheses: the fields after it must still be found)."""
    exe = tmp_path / "a) 1 2 (b"  # the kernel keeps 15 characters of it
    exe.symlink_to(shutil.which("sleep"))
    child = subprocess.Popen([str(exe), "60"])
    yield child
    child.kill()
    child.wait()


def _owned_by(root, pid: int, **extra) -> Path:
    path = _write_state(root, "jetson", {"id": 0, "clocks": None})
    doc = json.loads(path.read_text()) | {"pid": pid, "boot_id": state_file.boot_id()} | extra
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="needs Linux /proc")
def test_the_start_time_is_field_22_of_proc_stat_in_clock_ticks_since_boot(sleeper):
    started = state_file.process_start_time(sleeper.pid)
    uptime_ticks = float(Path("/proc/uptime").read_text().split()[0]) * os.sysconf("SC_CLK_TCK")
    # Just started: within a few seconds of now (a field counted off by the name's spaces would not be). The
    # uptime and the start time are each truncated to their own step, and the product is a float: 1 tick slack.
    assert started is not None and -1 <= uptime_ticks - started < 10 * os.sysconf("SC_CLK_TCK")
    assert state_file.process_start_time(os.getpid()) <= started  # this test started first
    assert state_file.process_start_time(2**22 + 1) is None  # above pid_max: no such process


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="needs Linux /proc")
def test_a_pid_reused_by_another_process_is_not_a_live_run(orin, sleeper):
    # The run that wrote the file died; its pid now belongs to a process that started later (the run: one
    # clock tick after boot, the sleeper just now).
    _owned_by(orin, sleeper.pid, start_time=1)
    assert state_file.find_state().run_alive() is False
    assert state_file.unfinished_run_warning().startswith("an unfinished run left")
    assert restore_unfinished().restored  # not refused as "still running"
    assert ["nvpmodel", "-m", "0"] in orin.calls()


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="needs Linux /proc")
def test_the_run_with_the_recorded_start_time_is_alive_and_an_older_file_falls_back_to_its_pid(orin, sleeper):
    started = state_file.process_start_time(sleeper.pid)
    _owned_by(orin, sleeper.pid, start_time=started)
    assert state_file.find_state().run_alive() is True
    with pytest.raises(RunStillActive):
        restore_unfinished()
    _owned_by(orin, sleeper.pid)  # a file from before start times were recorded: the pid is all there is
    assert state_file.find_state().start_time_ticks is None and state_file.find_state().run_alive() is True


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="needs Linux /proc")
@pytest.mark.parametrize("recorded_start", ["none", "the live process's"])
def test_a_record_of_another_boot_is_not_a_live_run_though_its_pid_lives(orin, sleeper, recorded_start):
    """After a reboot the recorded pid may belong to a live process again, even one started at the same
    tick since boot: the boot id alone says the run that wrote the file is gone."""
    start = None if recorded_start == "none" else state_file.process_start_time(sleeper.pid)
    _owned_by(orin, sleeper.pid, start_time=start, boot_id="a-boot-before-this-one")
    record = state_file.find_state()
    assert (record.pid, record.start_time_ticks) == (sleeper.pid, start) and record.boot_id != state_file.boot_id()
    assert record.run_alive() is False
    assert restore_unfinished().restored  # not refused as "still running"


def test_a_new_record_notes_when_its_process_started_and_the_file_keeps_it(orin):
    record = state_file.RestoreState("jetson", "orin-nx", {"id": 0, "clocks": None})
    assert record.start_time_ticks == state_file.process_start_time(os.getpid())
    state_file.write_state(record)
    again = state_file.find_state()
    assert (again.start_time_ticks, again.kept, again.over_applied) == (record.start_time_ticks, False, False)


@pytest.mark.parametrize("field, value", [("start_time", "12"), ("start_time", -1), ("start_time", True),
                                          ("kept", "yes"), ("over_applied", 1)])
def test_a_bad_start_time_or_flag_is_a_state_file_error(orin, field, value):
    _owned_by(orin, 999999, **{field: value})
    with pytest.raises(StateFileError, match=field):
        state_file.find_state()


@pytest.mark.parametrize("text, why", [('{"schema_version": 1', "Expecting ','"),
                                       ("[" * 100_000 + "]" * 100_000, "nested too deeply")],
                         ids=["truncated", "nested"])
def test_a_state_file_that_is_not_json_is_named_and_kept(orin, capsys, text, why):
    """Brackets nested past Python's recursion limit made restore print 'failed: maximum recursion depth
    exceeded ...', naming no file, where every other malformed state file is named."""
    from jetpredict.cli import main

    path = _write_state(orin, "jetson", {"id": 0})
    path.write_text(text)
    with pytest.raises(StateFileError, match=f"{path} cannot be read: .*{why}"):
        state_file.read_state(path)
    assert main(["restore"]) == 1
    err = capsys.readouterr().err
    assert f"{path} cannot be read" in err and why in err, err
    assert path.read_text() == text
    assert [c for c in orin.calls() if c[0] == "nvpmodel" and "-m" in c] == []

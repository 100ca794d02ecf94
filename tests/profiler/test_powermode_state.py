"""``jetpredict restore`` treats the state file as untrusted data, and a state dir it cannot see is skipped."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest
from jetpredict.models.catalogue import load_device
from jetpredict.profiler.powermode import state as state_file
from jetpredict.profiler.powermode.recovery import restore_unfinished
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
def test_as_root_a_group_or_world_writable_state_file_is_refused(orin):
    path = _write_state(orin, "jetson", {"id": 0, "clocks": None})
    path.chmod(0o666)
    with pytest.raises(StateFileError, match="writable by group or others"):
        state_file.find_state()


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

"""A sysfs knob that refuses writes even to root (a file read-only for everyone, as a kernel that exposes a
clock's ``max_freq`` 0444 does; or a root without CAP_DAC_OVERRIDE): what ``apply`` and ``restore`` say, and
that a restore which has nothing left to put back does not block every later run."""

from __future__ import annotations

import errno
import json
import os
import re
import stat

import pytest
from fake_tools import CPU_DIR as CPU
from fakes import GPU_DIRS
from jetpredict.models.catalogue import load_device
from jetpredict.profiler import sysfs
from jetpredict.profiler.powermode import privileged
from jetpredict.profiler.powermode import state as state_file
from jetpredict.profiler.powermode.privileged import PrivilegedCommandError, write_sysfs

from jetpredict.cli import main

GPU = GPU_DIRS["T194"]
LABEL = "4c-1190.4-675.75-1331.2"  # 4 of 8 cores: cpu4..cpu7 go offline


@pytest.fixture
def refusing(fake_root, monkeypatch):
    """Writes as a Jetson kernel refuses them to root: a file without write bits (EACCES, whoever writes)
    and, while ``busy`` names CPUs, bringing those CPUs online (EBUSY: a hot-plug the kernel turns down).
    The test runs as root here or not: ``is_root`` says root, as the walk that found this ran."""
    busy: set[int] = set()
    plain = sysfs.write_text

    def write_text(device_path, value: object) -> None:
        where = device_path if isinstance(device_path, str) else sysfs.unroot(device_path)
        real = sysfs.path(where)
        if real.exists() and not real.stat().st_mode & 0o222:
            raise PermissionError(errno.EACCES, "Permission denied", str(real))
        cpu = re.fullmatch(rf"{CPU}/cpu(\d+)/online", where)
        if cpu and int(cpu.group(1)) in busy and str(value).strip() == "1":
            raise OSError(errno.EBUSY, "Device or resource busy", str(real))
        plain(device_path, value)

    monkeypatch.setattr(sysfs, "write_text", write_text)
    monkeypatch.setattr(privileged, "is_root", lambda: True)
    monkeypatch.delenv(state_file.STATE_DIR_ENV, raising=False)
    device = load_device("agx-xavier")
    fake_root.add_jetson(device, preset_id=0)  # MAXN in force
    os.chmod(fake_root.real(f"{GPU}/max_freq"), 0o444)
    return fake_root, busy


def _apply(capsys, *argv: str) -> tuple[int, str]:
    code = main(["apply", *argv])
    return code, capsys.readouterr().err


def test_a_write_refused_to_root_says_the_file_is_read_only_not_run_as_root(refusing):
    with pytest.raises(PrivilegedCommandError) as err:
        write_sysfs(f"{GPU}/max_freq", 675750000)
    message = str(err.value)
    assert "needs root" not in message and "run jetpredict as root" not in message
    assert f"writing 675750000 to {GPU}/max_freq" in message
    assert "read-only (mode 444)" in message and "the kernel or a security module refuses" in message


def test_not_root_still_says_to_run_as_root(refusing, monkeypatch):
    monkeypatch.setattr(privileged, "is_root", lambda: False)
    with pytest.raises(PrivilegedCommandError, match="needs root: run jetpredict as root"):
        write_sysfs(f"{GPU}/max_freq", 675750000)


def test_apply_names_its_own_failure_and_a_restore_with_nothing_to_write_ends_clean(refusing, capsys):
    """The GPU cap never changed (it could not be written): the restore skips it, puts the cores and CPU
    clocks back, and no state file is left to block the next run."""
    root, _ = refusing
    before = {p: root.read(p) for p in (f"{GPU}/max_freq", f"{CPU}/cpu7/online", f"{CPU}/cpu0/cpufreq/scaling_max_freq")}
    code, err = _apply(capsys, "--mode", LABEL, "--via", "sysfs")
    assert code == 1
    assert f"{GPU}/max_freq" in err and "read-only (mode 444)" in err and "needs root" not in err
    assert "the mode in force before it was put back" in err
    assert {p: root.read(p) for p in before} == before
    assert root.state_files() == []
    code, err = _apply(capsys, "--mode", "MODE_15W")  # nothing blocks the next switch
    assert code == 0, err


def test_a_failed_restore_after_a_failed_apply_says_both_and_the_way_out(refusing, capsys):
    root, busy = refusing
    busy.add(7)  # cpu7 goes offline for the mode, then refuses to come back
    code, err = _apply(capsys, "--mode", LABEL, "--via", "sysfs")
    assert code == 1
    saved = root.state_dir() / state_file.STATE_FILE_NAME
    # the apply's own failure: the knob and the value it could not set
    assert f"writing 675750000 to {GPU}/max_freq" in err and "read-only (mode 444)" in err
    # then the restore's: which knob differs from its saved value, and the manual way out
    assert f"{CPU}/cpu7/online holds 0, saved 1" in err, err
    assert f"remove {saved}" in err
    assert f"writing 1377000000 to {GPU}/max_freq" not in err  # the unchanged GPU cap (MAXN's) is not rewritten
    assert saved.exists() and root.read(f"{CPU}/cpu7/online") == "0"

    # `restore` again while cpu7 still refuses: the same way out, the file stays
    assert main(["restore"]) == 1
    err = capsys.readouterr().err
    assert f"{CPU}/cpu7/online holds 0, saved 1" in err and f"remove {saved}" in err
    assert f"{GPU}/max_freq" not in err and saved.exists()

    # the user brings cpu7 back by hand: the board is as saved, so restore writes nothing and removes the file
    root.write(f"{CPU}/cpu7/online", 1)
    assert main(["restore"]) == 0
    err = capsys.readouterr().err
    assert "already holds the original power mode" in err and f"removed {saved}" in err
    assert root.state_files() == []


def test_restore_skips_a_read_only_knob_that_holds_its_saved_value(refusing, capsys):
    """The walk's case: `restore` failed rewriting 900000000 into a file holding 900000000."""
    root, busy = refusing
    busy.add(7)
    assert _apply(capsys, "--mode", LABEL, "--via", "sysfs")[0] == 1
    busy.clear()  # cpu7 takes writes again: restore can do what is left
    assert main(["restore"]) == 0, capsys.readouterr().err
    assert "restored the original power mode" in capsys.readouterr().err
    assert root.read(f"{CPU}/cpu7/online") == "1" and root.state_files() == []


def _unfinished_sysfs_run(kept: bool = False) -> None:
    """A state file as a SIGKILLed `apply --via sysfs` leaves (kind jetson-sysfs, its pid gone), or, ``kept``,
    the record an `apply --via sysfs` keeps."""
    state_file.write_state(state_file.RestoreState("jetson-sysfs", "agx-xavier", {f"{CPU}/cpu7/online": "1"},
                                                   {"mode": "sysfs settings of 1 knobs"}, pid=2**31 - 2, kept=kept))


@pytest.mark.usefixtures("refusing")
def test_the_profile_warning_does_not_promise_what_the_run_then_refuses():
    _unfinished_sysfs_run()
    # `profile --device jetson` (nvpmodel) is refused over it: nothing is promised, its error says why...
    assert state_file.unfinished_run_warning() is None
    assert state_file.unfinished_run_warning("jetson") is None
    # ...and a run of the file's kind adopts it and says so.
    assert "This run restores that original mode at its end" in state_file.unfinished_run_warning("jetson-sysfs")


def test_profile_over_another_kinds_state_file_says_one_thing(refusing, capsys, tmp_path):
    root, _ = refusing
    _unfinished_sysfs_run()
    code = main(["profile", "--device", "jetson", "--workload", "lenet5-mnist", "--modes", "MAXN",
                 "--batch-size", "2", "--workers", "0", "--warmup", "0", "--minibatches", "1", "--settle-s", "0",
                 "--no-progress", "--out", str(tmp_path / "p.csv")])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "restores that original mode at its end" not in err
    assert "left jetson-sysfs settings" in err and "run `jetpredict restore` first" in err
    assert json.loads((root.state_dir() / state_file.STATE_FILE_NAME).read_text())["kind"] == "jetson-sysfs"
    assert stat.S_IMODE(root.real(f"{GPU}/max_freq").stat().st_mode) == 0o444


@pytest.mark.usefixtures("refusing")
def test_a_run_that_switches_no_mode_is_told_of_another_kinds_unfinished_run():
    """`profile --device host` or sim over a sysfs run's file: no controller of its own refuses it, so the
    warning says the device's mode is changed and how to put it back, whatever kind wrote the file."""
    _unfinished_sysfs_run()
    warning = state_file.unfinished_run_warning(switches=False)
    assert warning is not None and "This run changes no power mode; `jetpredict restore` puts it back" in warning


def test_a_kept_record_of_another_kind_is_refused_not_adopted(refusing, capsys):
    """`apply --via sysfs` kept its record; an nvpmodel `apply` cannot return to sysfs settings, so it is
    refused, warned of nothing, and the record stays as it was."""
    root, _ = refusing
    _unfinished_sysfs_run(kept=True)
    saved = root.state_dir() / state_file.STATE_FILE_NAME
    text = saved.read_text()
    assert state_file.unfinished_run_warning("jetson") is None
    code, err = _apply(capsys, "--mode", "MODE_15W")
    assert code == 1, err
    assert "`jetpredict apply` left jetson-sysfs settings" in err and "run `jetpredict restore` first" in err
    assert saved.read_text() == text


def test_a_restore_names_only_the_knobs_that_differ_not_an_equal_read_only_one(refusing):
    """A CPU cap that changed and turned read-only fails the restore; the read-only GPU cap, which holds its
    saved value, is not rewritten, so its refusal is no part of the error."""
    from jetpredict.profiler.powermode.base import RestoreIncomplete
    from jetpredict.profiler.powermode.custom import SysfsController

    root, _ = refusing
    controller = SysfsController(load_device("agx-xavier"))
    saved = controller.snapshot()
    cap = f"{CPU}/cpu0/cpufreq/scaling_max_freq"
    root.write(cap, 1190400)
    os.chmod(root.real(cap), 0o444)
    with pytest.raises(RestoreIncomplete) as err:
        controller.restore_snapshot(saved)
    assert list(err.value.differ) == [cap]
    assert f"writing {saved[cap]} to {cap}" in str(err.value)
    assert f"{GPU}/max_freq" not in str(err.value)

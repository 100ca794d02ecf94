"""``jetpredict status`` against fake Jetson trees: mode, cores, clocks and module power, and a restore state
file left behind; off a Jetson a message and its own exit status. And ``apply --dry-run --board B`` away from
the board."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from fakes import GPU_DIRS
from jetpredict.models.catalogue import PowerMode, load_device
from jetpredict.profiler.powermode import detect_controller
from jetpredict.profiler.powermode import state as state_file
from jetpredict.profiler.powermode.privileged import is_root
from jetpredict.profiler.status import EXIT_NOT_A_JETSON, read_status

from jetpredict.cli import main

CPU = "/sys/devices/system/cpu"


def test_status_reads_the_orin_nano_mode_clocks_and_vdd_in_power(fake_root, capsys):
    device = load_device("orin-nano")
    fake_root.add_jetson(device, preset_id=device.preset("7W").id)
    fake_root.write(f"{CPU}/cpu5/online", 0)  # one core offline, as 7W's nvpmodel would leave some
    fake_root.write(f"{CPU}/cpu4/online", 0)
    fake_root.write(f"{GPU_DIRS['T234']}/cur_freq", 408_000_000)
    fake_root.add_ina3221_hwmon("1-0040", 1, [("VDD_IN", 5000, 1400), ("VDD_CPU_GPU_CV", 5000, 500),
                                              ("VDD_SOC", 5000, 300)])
    status = read_status()
    assert (status.board, status.nvpmodel_mode, status.nvpmodel_id) == ("orin-nano", "7W", 1)
    assert (status.cores_online, status.cores_total) == (4, 6)
    assert status.gpu_mhz == pytest.approx(408.0) and status.cpu_mhz == pytest.approx(1510.4)
    assert status.module_power_w == pytest.approx(7.0) and status.power_meter == "ina3221:VDD_IN"
    assert status.mode_label == "4c-1510.4-408-2133" and status.unknown == {}

    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert "7W (nvpmodel id 1)" in out and "4 of 6" in out and "GPU 408 MHz" in out and "7.00 W" in out
    assert main(["status", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["module_power_w"] == pytest.approx(7.0)


def test_status_without_a_power_sensor_says_unknown_with_the_reason(fake_root, capsys):
    fake_root.add_jetson(load_device("agx-xavier"), preset_id=0)
    status = read_status()
    assert status.nvpmodel_mode == "MAXN" and status.cores_online == 8
    assert status.module_power_w is None and "INA3221" in status.unknown["power"]
    assert main(["status"]) == 0
    assert "module power:  unknown (no INA3221" in capsys.readouterr().out


def test_status_names_a_custom_mode_that_nvpmodel_conf_does_not_know(fake_root):
    fake_root.add_jetson(load_device("xavier-nx"))
    fake_root.write("/var/lib/nvpmodel/status", "pmode:0042")
    assert read_status().nvpmodel_mode == "id 42"


def test_status_off_a_jetson_is_a_message_and_its_own_exit_status(fake_root, capsys):
    assert main(["status"]) == EXIT_NOT_A_JETSON
    err = capsys.readouterr().err
    assert "not a recognised Jetson" in err and "Traceback" not in err
    # --board on a machine without that SoC is refused too: no made-up clocks
    assert main(["status", "--board", "orin-nx"]) == EXIT_NOT_A_JETSON
    assert "not that Jetson" in capsys.readouterr().err


@pytest.fixture
def xavier_state(fake_root, monkeypatch):
    """An AGX Xavier in MODE_30W_ALL whose restore state dir is ``<root>/var/lib/jetpredict``."""
    monkeypatch.delenv(state_file.STATE_DIR_ENV, raising=False)
    fake_root.add_jetson(load_device("agx-xavier"), preset_id=3)
    return fake_root


def _status(capsys) -> tuple[str, dict]:
    assert main(["status"]) == 0
    table = capsys.readouterr().out
    assert main(["status", "--format", "json"]) == 0
    return table, json.loads(capsys.readouterr().out)


def test_status_says_nothing_of_a_restore_when_no_state_file_waits(xavier_state, capsys):
    table, doc = _status(capsys)
    assert "restore" not in table and doc["pending_restore"] is None


def test_status_reports_a_pending_restore_with_its_mode_file_and_command(xavier_state, capsys):
    ctl = detect_controller("jetson")
    ctl.__enter__()  # as a run that died after its switch: the state file stays
    try:
        ctl.apply(PowerMode("custom", 2, 1190.4, 420.75, 800.0))
        saved = xavier_state.real("/var/lib/jetpredict") / state_file.STATE_FILE_NAME
        table, doc = _status(capsys)
    finally:
        ctl._uninstall_handlers()
        ctl._release_lock()  # as the kernel does for a run that died
    command = f"sudo JETPREDICT_SYSFS_ROOT={xavier_state.path} jetpredict restore"
    line = next(x for x in table.splitlines() if x.startswith("restore:"))
    assert "pending: the original power mode MODE_30W_ALL on agx-xavier" in line
    assert line.endswith(f"{saved} keeps it; to put it back, run: {command}")
    pending = doc["pending_restore"]
    assert (pending["path"], pending["original_mode"], pending["device"]) == (str(saved), "MODE_30W_ALL",
                                                                              "agx-xavier")
    assert pending["command"] == command and pending["run_alive"] is False and pending["error"] is None
    assert main(["restore"]) == 0  # what it says to run
    capsys.readouterr()
    table, doc = _status(capsys)
    assert "restore" not in table and doc["pending_restore"] is None


def test_status_reports_the_state_file_of_a_run_still_going_as_in_progress(xavier_state, capsys):
    # The run that saved it is alive (here: the test's parent process): it restores when it ends.
    alive = state_file.RestoreState("jetson", "agx-xavier", {}, {"mode": "MODE_30W_ALL"}, pid=os.getppid())
    path = state_file.write_state(alive)
    table, doc = _status(capsys)
    assert "restore:       in progress: the run that saved the original power mode MODE_30W_ALL" in table
    assert f"puts it back when it ends ({path})" in table
    assert doc["pending_restore"]["run_alive"] is True and doc["pending_restore"]["path"] == str(path)


def _dead_pid() -> int:
    """The pid of a process that has ended (and been reaped): no run holds it."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


@pytest.mark.parametrize("alive", [True, False], ids=["run-alive", "run-dead"])
def test_a_run_over_an_applied_mode_is_in_progress_while_it_runs_and_pending_once_it_died(xavier_state, capsys,
                                                                                            alive):
    """A run that started over a mode `apply` set returns to that mode itself while it lives; once it died
    nobody will, and its record is a pending restore like any other unfinished run's."""
    pid = os.getppid() if alive else _dead_pid()
    path = state_file.write_state(state_file.RestoreState("jetson", "agx-xavier", {}, {"mode": "MODE_30W_ALL"},
                                                          pid=pid, over_applied=True))
    table, doc = _status(capsys)
    line = next(x for x in table.splitlines() if x.startswith("restore:"))
    if alive:
        assert f"in progress: a run (pid {pid}) switches power modes over the one `jetpredict apply` set" in line
    else:
        assert line.startswith("restore:       pending: the original power mode MODE_30W_ALL on agx-xavier")
    assert doc["pending_restore"]["run_alive"] is alive and doc["pending_restore"]["path"] == str(path)


#: Permission bits of each refused state file: group write alone, others' write alone, neither (unparsable).
REFUSED_MODES = {"group-writable": 0o620, "world-writable": 0o602, "not-json": 0o600}


@pytest.mark.parametrize("refused", list(REFUSED_MODES))
def test_status_reports_a_state_file_the_reader_refuses(xavier_state, capsys, refused):
    writable = refused != "not-json"
    if writable and not is_root():
        pytest.skip("only root refuses a state file another user could have written")
    path = xavier_state.real("/var/lib/jetpredict") / state_file.STATE_FILE_NAME
    path.parent.mkdir(parents=True)
    path.write_text("{}" if writable else "not json")
    path.chmod(REFUSED_MODES[refused])
    table, doc = _status(capsys)
    why = f"writable by group or others (mode {REFUSED_MODES[refused]:o})" if writable else "cannot be read"
    assert f"restore:       a state file cannot be used: {path} " in table and why in table
    assert why in doc["pending_restore"]["error"] and doc["pending_restore"]["command"] is None


@pytest.mark.parametrize("mode, via, printed", [
    ("MODE_15W", "nvpmodel", "nvpmodel -m 2"),
    ("4c-1190.4-675.75-1065.6", "nvpmodel", "GPU min = max = 675750000 Hz"),
    ("4c-1190.4-675.75-1065.6", "sysfs", "cores 0..3 online, 4..7 offline"),
])
def test_apply_dry_run_with_board_works_off_the_board(fake_root, capsys, mode, via, printed):
    assert main(["apply", "--mode", mode, "--board", "agx-xavier", "--via", via, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "not this machine: steps from the catalogue" in out and printed in out and "Nothing was changed" in out
    assert not any(fake_root.path.rglob("*.json")), "a dry run wrote a state file"
    # a real switch away from the board is refused as a usage error that says how to see the plan
    assert main(["apply", "--mode", mode, "--board", "agx-xavier", "--via", via]) == 2
    assert "add --dry-run to see what apply would do" in capsys.readouterr().err


def test_unreadable_clocks_are_unknown_with_their_reasons_never_0_mhz(fake_root, capsys):
    """No cur_freq for any CPU or the GPU, and debugfs root-only (no EMC rate): null, not 0 MHz, and each said
    with its reason."""
    device = load_device("orin-nano")
    fake_root.add_jetson(device, preset_id=device.preset("7W").id)
    for cpu in range(6):
        fake_root.real(f"{CPU}/cpu{cpu}/cpufreq/scaling_cur_freq").unlink()
    fake_root.real(f"{GPU_DIRS['T234']}/cur_freq").unlink()
    fake_root.hide_debugfs()
    status = read_status()
    assert (status.cpu_mhz, status.gpu_mhz, status.emc_mhz, status.mode_label) == (None, None, None, None)
    assert status.unknown["cpu_mhz"] == status.unknown["gpu_mhz"] == "not readable in sysfs"
    assert status.unknown["emc_mhz"].startswith("EMC rate needs root (debugfs)")
    assert status.cores_online == 6 and status.nvpmodel_mode == "7W"  # what is readable still is
    assert main(["status"]) == 0
    clocks = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("clocks:"))
    # Each unknown clock with its reason, as the JSON gives it (the CPU's and GPU's were said without).
    assert clocks == ("clocks:        CPU unknown (not readable in sysfs), GPU unknown (not readable in sysfs), "
                      f"EMC unknown ({status.unknown['emc_mhz']})")
    assert main(["status", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["cpu_mhz"], doc["gpu_mhz"], doc["emc_mhz"]) == (None, None, None)


def test_an_unreadable_rail_is_unknown_not_0_w(fake_root, capsys):
    fake_root.add_jetson(load_device("orin-nano"), preset_id=0)
    hwmon = fake_root.add_ina3221_hwmon("1-0040", 1, [("VDD_IN", 5000, 1400), ("VDD_CPU_GPU_CV", 5000, 500),
                                                      ("VDD_SOC", 5000, 300)])
    (hwmon / "curr3_input").write_text("\n")  # VDD_SOC's current: an empty read, as from a sensor gone away
    status = read_status()
    assert status.rails_w["VDD_SOC"] is None and status.module_power_w == pytest.approx(7.0)
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert "  rail VDD_SOC: unknown" in out.splitlines() and "VDD_SOC: 0.00 W" not in out


def test_no_nvpmodel_status_and_a_failing_nvpmodel_q_is_an_unknown_mode_with_the_reason(fake_root, capsys):
    fake_root.add_jetson(load_device("xavier-nx"), preset_id=0)
    fake_root.real("/var/lib/nvpmodel/status").unlink()
    fake_root.install_tool("nvpmodel", "import sys\nprint('NVPM ERROR: failed to read PARAM', file=sys.stderr)\n"
                                       "sys.exit(1)\n")
    status = read_status()
    assert (status.nvpmodel_id, status.nvpmodel_mode) == (None, None)
    why = status.unknown["nvpmodel"]
    assert why.startswith("no /var/lib/nvpmodel/status and nvpmodel -q failed: ") and "NVPM ERROR" in why, why
    assert main(["status"]) == 0
    assert f"nvpmodel mode: unknown ({why})" in capsys.readouterr().out


def test_a_custom_mode_is_said_to_be_set_by_the_verb_its_record_names(xavier_state, capsys):
    """`profile` writes the same nvpmodel-custom.conf as `apply`: after a SIGKILLed profile the mode was said
    to be "set by `jetpredict apply`". The state file's record says which: kept = apply, else an unfinished run."""
    ctl = detect_controller("jetson")
    ctl.__enter__()  # a run that dies after its custom switch: its record and configuration stay
    try:
        ctl.apply(PowerMode("custom", 2, 1190.4, 420.75, 800.0))
        table, doc = _status(capsys)
        by_run = f"JETPREDICT_CUSTOM (set by an unfinished jetpredict run, pid {os.getpid()})"
        assert doc["nvpmodel_mode"] == by_run and f"nvpmodel mode: {by_run} (nvpmodel id" in table
        ctl.keep()  # as `apply` leaves it
        assert read_status().nvpmodel_mode == "JETPREDICT_CUSTOM (set by `jetpredict apply`)"
        # no record left (removed by hand): either verb may have written the configuration
        (xavier_state.state_dir() / state_file.STATE_FILE_NAME).unlink()
        assert read_status().nvpmodel_mode == "JETPREDICT_CUSTOM (set by jetpredict: apply or profile)"
    finally:
        ctl._uninstall_handlers()
        ctl._release_lock()

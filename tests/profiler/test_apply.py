"""``jetpredict apply``: presets and custom labels through the fake nvpmodel and fake sysfs; dry runs change
nothing; ``jetpredict restore`` puts the original mode back."""

from __future__ import annotations

import signal
from dataclasses import replace

import pytest
from fake_tools import GATED_NVPMODEL
from fakes import EMC_CAP, GPU_DIRS, signal_inside_switch
from jetpredict.models.catalogue import PowerMode, load_device, mode_label
from jetpredict.profiler.apply import READBACK_TOLERANCE_MHZ, _far, parse_mode
from jetpredict.profiler.powermode.state import STATE_FILE_NAME, state_dir

from jetpredict.cli import main

GPU = GPU_DIRS["T194"]
CPU0 = "/sys/devices/system/cpu/cpu0/cpufreq"


@pytest.fixture
def xavier(fake_root):
    device = load_device("agx-xavier")
    fake_root.add_jetson(device, preset_id=0)  # MAXN in force
    return fake_root, device


def tree(root) -> dict[str, str]:
    """Every file of the fake device tree except the tools' call log: what a dry run must not change."""
    return {str(p.relative_to(root.path)): p.read_text() for p in sorted(root.path.rglob("*"))
            if p.is_file() and p.name != "calls.log" and "usr/bin" not in str(p)}


def switches(root) -> list[list[str]]:
    return [c for c in root.calls() if c[0] == "nvpmodel" and "-m" in c]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["apply", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_labels_and_presets_parse_against_the_catalogue():
    device = load_device("agx-xavier")
    label = device.modes().labels()[1234]
    mode = parse_mode(device, label)
    assert mode_label(*mode.knobs()) == label and mode.mode == label
    assert parse_mode(device, "mode_15w").mode == "MODE_15W"
    assert parse_mode(device, str(device.preset("MODE_15W").id)).mode == "MODE_15W"


@pytest.mark.parametrize("mode, printed", [
    ("MODE_15W", ["nvpmodel -m 2", "Nothing was changed"]),
    ("6c-1497.6-905.25-1600", ["GPU MIN_FREQ 905250000", "GPU MAX_FREQ 905250000", "CPU_ONLINE CORE_5 1",
                               "CPU_ONLINE CORE_6 0", "EMC MAX_FREQ 1600000000", "nvpmodel -f"]),
], ids=["preset", "custom-label"])
def test_a_dry_run_prints_the_switch_and_changes_nothing(xavier, capsys, mode, printed):
    root, _ = xavier
    before = tree(root)
    code, out, _ = run(capsys, "--mode", mode, "--dry-run")
    assert code == 0
    assert [s for s in printed if s not in out] == []
    assert switches(root) == [] and tree(root) == before
    assert not (state_dir() / STATE_FILE_NAME).exists()


def test_preset_is_applied_read_back_and_restored(xavier, capsys):
    root, device = xavier
    code, out, _ = run(capsys, "--mode", "MODE_15W")
    assert code == 0
    assert ["nvpmodel", "-m", "2"] in switches(root)
    assert root.read("/var/lib/nvpmodel/status") == "pmode:0002"
    assert "read back now: 4 cores, CPU 1190.4 MHz, GPU 624.75 MHz, EMC 1331.2 MHz" in out
    # The command names the state's place (here the fake root), so run as printed it finds the file.
    assert f"to put it back: sudo JETPREDICT_SYSFS_ROOT={root.path} jetpredict restore\n" in out and "MAXN" in out
    assert (state_dir() / STATE_FILE_NAME).exists()  # the original waits for `restore`

    assert main(["restore"]) == 0
    assert switches(root)[-1] == ["nvpmodel", "-m", "0"]
    assert root.read("/var/lib/nvpmodel/status") == "pmode:0000"
    assert not (state_dir() / STATE_FILE_NAME).exists()


def test_custom_label_through_nvpmodel_then_restore(xavier, capsys):
    root, device = xavier
    label = "6c-1497.6-905.25-1600"
    code, out, _ = run(capsys, "--mode", label)
    assert code == 0, out
    assert root.read_int(f"{GPU}/min_freq") == root.read_int(f"{GPU}/max_freq") == 905250000
    assert root.read_int(EMC_CAP) == 1600000000
    assert "read back now: 6 cores, CPU 1497.6 MHz, GPU 905.25 MHz, EMC 1600 MHz" in out
    assert "warning" not in out
    assert main(["restore"]) == 0
    assert root.read("/var/lib/nvpmodel/status") == "pmode:0000"
    assert root.read_int(f"{GPU}/max_freq") == round(max(device.gpu_steps_mhz) * 1e6)


def test_sysfs_dry_run_lists_exactly_the_writes_of_the_real_run(xavier, capsys):
    root, device = xavier
    label = "4c-1190.4-675.75-1331.2"
    before = tree(root)
    code, out, _ = run(capsys, "--mode", label, "--via", "sysfs", "--dry-run")
    assert code == 0 and tree(root) == before
    planned: dict[str, str] = {}
    for line in out.splitlines():
        if line.strip().startswith("write "):
            value, path = line.strip()[len("write "):].split(" > ")
            planned[path] = value  # the last write to a file is what it holds afterwards
    assert planned[f"{GPU}/max_freq"] == "675750000"
    assert planned["/sys/devices/system/cpu/cpu4/online"] == "0"

    code, out, _ = run(capsys, "--mode", label, "--via", "sysfs")
    assert code == 0
    for path, value in planned.items():
        assert root.read(path) == value, path
    root.settle(device)  # what the governors do after the writes
    assert main(["restore"]) == 0
    assert tree(root) == before | {k: v for k, v in tree(root).items() if k.endswith("cur_freq")
                                   or k.endswith("/rate")}
    assert root.read(f"{CPU0}/scaling_max_freq") == before["sys/devices/system/cpu/cpu0/cpufreq/scaling_max_freq"].strip()


def test_an_off_step_mode_says_which_steps_it_set(xavier, capsys):
    """AGX Xavier has no 1200 MHz CPU nor 1000 MHz GPU step: the dry run and the switch name the steps written."""
    root, _ = xavier
    label = "4c-1200-1000-1331.2"
    said = f"{label}: 4 cores, CPU 1190.4 MHz (asked 1200), GPU 1032.75 MHz (asked 1000), EMC 1331.2 MHz"
    code, out, _ = run(capsys, "--mode", label, "--via", "sysfs", "--dry-run")
    assert code == 0 and f"would set {said}\n" in out
    code, out, _ = run(capsys, "--mode", label, "--via", "sysfs")
    assert code == 0 and f"applied {said}\n" in out
    assert root.read_int(f"{GPU}/max_freq") == 1032750000


@pytest.mark.parametrize("mode, said, written", [
    ("4c-1200-1000-1331.2", "4c-1200-1000-1331.2: 4 cores, CPU 1190.4 MHz (asked 1200), GPU 1032.75 MHz "
     "(asked 1000), EMC 1331.2 MHz", ["CPU_0 MAX_FREQ 1190400", "GPU MIN_FREQ 1032750000"]),
    ("MODE_15W", "MODE_15W: 4 cores, CPU 1190.4 MHz (asked 1200), GPU 624.75 MHz (asked 670), EMC 1331.2 MHz",
     ["nvpmodel -m 2"]),
], ids=["custom-label", "preset"])
def test_an_nvpmodel_dry_run_shows_the_steps_the_board_runs(xavier, capsys, mode, said, written):
    """Through nvpmodel as through sysfs: a custom mode is written at the board's steps, and a preset's caps
    run at the step below each; the dry run says so, as the real switch does."""
    code, out, _ = run(capsys, "--mode", mode, "--dry-run")
    assert code == 0 and f"would set {said}\n" in out
    assert [w for w in written if w not in out] == []
    code, out, _ = run(capsys, "--mode", mode)
    assert code == 0 and f"applied {said}\n" in out


def test_sysfs_dry_run_without_access_to_debugfs(xavier, capsys, monkeypatch):
    """/sys/kernel/debug is root only: not being able to look there is "not there", not a failure."""
    import pathlib

    exists = pathlib.Path.exists

    def denied(self: pathlib.Path, *a, **kw) -> bool:
        if "sys/kernel/debug/" in str(self):  # what stat() on a path under a 0700 folder does for a user
            raise PermissionError(13, "Permission denied", str(self))
        return exists(self, *a, **kw)

    monkeypatch.setattr(pathlib.Path, "exists", denied)
    code, out, err = run(capsys, "--mode", "4c-1190.4-675.75-1331.2", "--via", "sysfs", "--dry-run")
    assert code == 0, err
    assert "Permission denied" not in out + err and f"{GPU}/max_freq" in out


@pytest.mark.parametrize("knob", ["cpu_mhz", "gpu_mhz", "emc_mhz"])
def test_a_read_back_clock_is_warned_only_past_the_tolerance(knob):
    """At the tolerance either side of the clock asked (a table step or a cap off the steps) nothing is said; a
    MHz past it the knob is named with both clocks."""
    asked = PowerMode("asked", 4, 1000.0, 500.0, 1000.0)
    want = getattr(asked, knob)
    for edge in (want + READBACK_TOLERANCE_MHZ, want - READBACK_TOLERANCE_MHZ):
        assert _far(asked, replace(asked, **{knob: edge})) == []
    for past in (want + READBACK_TOLERANCE_MHZ + 1, want - READBACK_TOLERANCE_MHZ - 1):
        assert _far(asked, replace(asked, **{knob: past})) == [f"{knob} {past:g} (asked {want:g})"]


def test_bad_modes_exit_2_naming_the_rule(xavier, capsys):
    root, _ = xavier
    code, _, err = run(capsys, "--mode", "MODE_99W")
    assert code == 2 and "neither a preset of agx-xavier" in err and "MODE_15W" in err
    code, _, err = run(capsys, "--mode", "4c-9999-675.75-1331.2")
    assert code == 2 and "cpu_mhz=9999 is outside device 'agx-xavier'" in err
    code, _, err = run(capsys, "--mode", "MAXN", "--device", "host")
    assert code == 2 and "--device" in err
    assert switches(root) == []


def test_not_a_jetson_says_so(fake_root, capsys):
    code, _, err = run(capsys, "--mode", "MAXN", "--dry-run")
    assert code == 2 and "not a recognised Jetson" in err and "--board" in err
    # --board: the dry run says what it would do from the catalogue (tests/profiler/test_status.py); the
    # real switch needs the board's own nvpmodel.conf, none under this fake root
    code, out, _ = run(capsys, "--mode", "MAXN", "--board", "nano", "--dry-run")
    assert code == 0 and "nvpmodel -m 0" in out
    # --board off the board: said "nvpmodel not found on PATH" (exit 1) before, as if L4T were broken here.
    code, _, err = run(capsys, "--mode", "MAXN", "--board", "nano")
    assert code == 2 and "--board nano does not make this machine a nano" in err and "--dry-run" in err


def test_a_board_other_than_the_one_found_is_refused_before_any_switch(xavier, capsys):
    root, _ = xavier
    code, _, err = run(capsys, "--mode", "MAXN", "--board", "nano")
    assert code == 2 and "this machine is agx-xavier" in err and "--dry-run" in err
    assert switches(root) == [] and not (state_dir() / STATE_FILE_NAME).exists()
    code, _, _ = run(capsys, "--mode", "MODE_15W", "--board", "agx-xavier")  # its own board: applied
    assert code == 0 and ["nvpmodel", "-m", "2"] in switches(root)
    assert main(["restore"]) == 0


def _profile(tmp_path, modes: str) -> list[str]:
    """A short profile on the fake board (one minibatch per mode); returns ``main``'s argv."""
    return ["profile", "--device", "jetson", "--workload", "lenet5-mnist", "--modes", modes,
            "--batch-size", "2", "--workers", "0", "--warmup", "0", "--minibatches", "1", "--settle-s", "0",
            "--no-progress", "--out", str(tmp_path / "p.csv")]


@pytest.mark.usefixtures("torch_one_thread")
@pytest.mark.parametrize("applied", ["MODE_15W", "6c-1497.6-905.25-1600"], ids=["preset", "custom-label"])
def test_profile_after_apply_ends_in_the_applied_mode_and_keeps_the_original(xavier, capsys, tmp_path,
                                                                             applied):
    from jetpredict.profiler.powermode.state import CUSTOM_CONF_NAME, find_state

    root, device = xavier
    assert run(capsys, "--mode", applied)[0] == 0
    in_applied = {p: root.read(p) for p in ("/var/lib/nvpmodel/status", f"{GPU}/max_freq", EMC_CAP)}
    # The profile's own custom mode replaces the apply's custom nvpmodel configuration while it runs.
    assert main(_profile(tmp_path, "MAXN,4c-1190.4-675.75-1331.2")) == 0
    err = capsys.readouterr().err
    assert "set by `jetpredict apply`: this run returns to it at its end" in err
    assert "an unfinished run" not in err
    assert {p: root.read(p) for p in in_applied} == in_applied  # back in the applied mode
    kept = find_state()
    assert kept.kept and kept.original["mode"] == "MAXN" and kept.snapshot == {"id": 0, "clocks": None}
    assert (state_dir() / CUSTOM_CONF_NAME).exists() == (applied != "MODE_15W")  # the apply's, as it left it

    assert main(["restore"]) == 0
    assert root.read("/var/lib/nvpmodel/status") == "pmode:0000"
    assert root.read_int(f"{GPU}/max_freq") == round(max(device.gpu_steps_mhz) * 1e6)
    assert list(state_dir().iterdir()) == []


def test_a_failed_second_apply_goes_back_to_the_first_and_both_keep_the_first_original(xavier, capsys,
                                                                                        monkeypatch):
    from jetpredict.profiler.powermode.state import find_state

    root, _ = xavier
    assert run(capsys, "--mode", "MODE_15W")[0] == 0
    monkeypatch.setenv("FAKE_NVPMODEL_FAIL", "1")  # the switch to MODE_10W fails
    code, _, err = run(capsys, "--mode", "MODE_10W")
    assert code == 1 and "failed to set power mode 1" in err and "the mode in force before it was put back" in err
    assert root.read("/var/lib/nvpmodel/status") == "pmode:0002"  # MODE_15W, the mode before this apply
    assert find_state().kept and find_state().original["mode"] == "MAXN"
    monkeypatch.delenv("FAKE_NVPMODEL_FAIL")
    code, out, _ = run(capsys, "--mode", "MODE_10W")
    assert code == 0 and "original mode: MAXN on agx-xavier (saved by `jetpredict apply`" in out
    assert root.read("/var/lib/nvpmodel/status") == "pmode:0001"
    assert main(["restore"]) == 0
    assert root.read("/var/lib/nvpmodel/status") == "pmode:0000" and find_state() is None


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["sigterm", "sighup"])
def test_a_stop_during_the_switch_puts_the_mode_before_it_back_and_says_so(xavier, sig):
    """As Ctrl-C does: the switch finishes (the signal is held meanwhile), then the mode in force before the
    command is restored, and the exit status is the signal's. No state file is left for a later run to
    take over (it would end in the original instead of a mode this command never kept)."""
    root, device = xavier
    root.install_tool("nvpmodel", GATED_NVPMODEL.replace("@SOC@", device.specs.soc))
    child, out, err = signal_inside_switch(root, sig, "apply", "--mode", "MODE_15W")
    assert child.returncode == 128 + sig, err
    assert err.strip().splitlines()[-1] == (f"jetpredict apply: stopped by {signal.Signals(sig).name}; the power "
                                            "mode in force before it was restored")
    assert "applied" not in out
    assert [c[-1] for c in switches(root)] == ["2", "0"]  # the switch, then back to MAXN
    assert root.read("/var/lib/nvpmodel/status") == "pmode:0000"
    assert not (root.real("/var/lib/jetpredict") / STATE_FILE_NAME).exists()


#: AGX Xavier's MODE_15W caps CPU 1200 / GPU 670 MHz: the kernel runs each at the step at or below the cap.
MODE_15W_RUNS = "MODE_15W: 4 cores, CPU 1190.4 MHz (asked 1200), GPU 624.75 MHz (asked 670), EMC 1331.2 MHz"


def test_a_preset_through_sysfs_pins_each_cap_at_the_step_at_or_below_it(xavier, capsys):
    """Not the nearest step: 675.75 MHz is nearer 670 but above the preset's cap; nvpmodel would run 624.75."""
    root, _ = xavier
    code, out, _ = run(capsys, "--mode", "MODE_15W", "--via", "sysfs", "--dry-run")
    assert code == 0 and f"would set {MODE_15W_RUNS}\n" in out and f"write 624750000 > {GPU}/max_freq" in out
    assert f"write 1190400 > {CPU0}/scaling_max_freq" in out
    code, out, _ = run(capsys, "--mode", "MODE_15W", "--via", "sysfs")
    assert code == 0 and f"applied {MODE_15W_RUNS}\n" in out
    assert root.read_int(f"{GPU}/max_freq") == 624750000 and root.read_int(f"{CPU0}/scaling_max_freq") == 1190400


@pytest.mark.parametrize("mode, via, said, pinned", [
    ("4c-1200-1000-1331.2", "nvpmodel", "4c-1200-1000-1331.2: 4 cores, CPU 1190.4 MHz (asked 1200), GPU 1032.75 MHz "
     "(asked 1000), EMC 1331.2 MHz", "CPU min = max = 1190400 kHz; GPU min = max = 1032750000 Hz"),
    ("4c-1200-1000-1331.2", "sysfs", "4c-1200-1000-1331.2: 4 cores, CPU 1190.4 MHz (asked 1200), GPU 1032.75 MHz "
     "(asked 1000), EMC 1331.2 MHz", "GPU min = max = 1032750000 Hz"),
    ("MODE_15W", "sysfs", MODE_15W_RUNS, "CPU min = max = 1190400 kHz; GPU min = max = 624750000 Hz"),
    ("MODE_15W", "nvpmodel", MODE_15W_RUNS, "nvpmodel -m 2"),
], ids=["custom-nvpmodel", "custom-sysfs", "preset-sysfs", "preset-nvpmodel"])
def test_a_dry_run_off_the_board_says_the_catalogue_steps_the_board_would_run(fake_root, capsys, mode, via, said,
                                                                              pinned):
    code, out, _ = run(capsys, "--mode", mode, "--board", "agx-xavier", "--via", via, "--dry-run")
    assert code == 0 and "steps from the catalogue" in out
    assert f"would set {said}\n" in out and pinned in out


def test_an_unwritable_state_folder_is_named_with_what_chose_it(xavier, capsys, monkeypatch, tmp_path):
    """It said only ``failed: [Errno 2] No such file or directory: '/x'``; nothing is switched."""
    root, _ = xavier
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("JETPREDICT_STATE_DIR", str(tmp_path / "a-file" / "state"))
    code, _, err = run(capsys, "--mode", "MODE_15W")
    assert code == 1 and "cannot write the power-mode state file" in err and "chosen by $JETPREDICT_STATE_DIR" in err
    assert root.read("/var/lib/nvpmodel/status") == "pmode:0000"


def test_a_refusal_before_switching_does_not_say_a_mode_was_put_back(xavier, capsys):
    """Another run holding the device (its lock, taken here): nothing was switched, so nothing was put back."""
    from jetpredict.profiler.powermode import state as state_file

    lock = state_file.ModeLock.take()
    try:
        code, _, err = run(capsys, "--mode", "MODE_15W")
    finally:
        lock.release()
    assert code == 1 and "another jetpredict run" in err and "put back" not in err


def test_status_names_the_custom_mode_apply_set(xavier, capsys):
    """It printed "id 8": the id is in the configuration `apply` left in the state dir, not the board's file."""
    from jetpredict.profiler.status import read_status

    assert run(capsys, "--mode", "4c-1190.4-675.75-1065.6")[0] == 0
    assert read_status().nvpmodel_mode == "JETPREDICT_CUSTOM (set by `jetpredict apply`)"
    assert main(["restore"]) == 0
    assert read_status().nvpmodel_mode == "MAXN"

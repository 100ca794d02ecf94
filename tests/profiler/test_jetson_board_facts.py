"""What a real Jetson refuses or reports, against fakes as strict as its kernel and tools: cpufreq writes to an
offline cluster, nvpmodel's NVPM ERROR, a root-only EMC rate, a configuration without EMC, ``jetson_clocks
--store`` over an existing file, and a preset cap between two steps of the board's table."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import pytest
from fakes import CPU_DIR, GPU_DIRS, emc_rate_path
from jetpredict.models.catalogue import PowerMode, load_device
from jetpredict.profiler.apply import apply_mode
from jetpredict.profiler.campaign import _caps_notes, _read_back_notes
from jetpredict.profiler.powermode import NvpmodelController, PrivilegedCommandError, parse_nvpmodel_conf
from jetpredict.profiler.powermode import state as state_file
from jetpredict.profiler.powermode.custom import emc_unknown_reason
from jetpredict.profiler.powermode.nvpmodel import CUSTOM_NAME, render_custom_model
from jetpredict.profiler.status import read_status

REAL_CONFS = Path(__file__).resolve().parent / "fixtures" / "nvpmodel"


@pytest.mark.parametrize("device_id, cores, kept, dropped", [
    ("orin-agx", 2, {"CPU_A78_0"}, {"CPU_A78_1", "CPU_A78_2"}),
    ("orin-agx", 5, {"CPU_A78_0", "CPU_A78_1"}, {"CPU_A78_2"}),
    ("agx-xavier", 2, {"CPU_DENVER_0"}, {"CPU_DENVER_1", "CPU_DENVER_2", "CPU_DENVER_3"}),
])
def test_a_custom_mode_sets_no_clock_of_a_cluster_it_takes_offline(device_id, cores, kept, dropped):
    """Once a cpufreq policy's CPUs are all offline its files refuse writes (EINVAL), as NVIDIA's own files
    know (the 2-core MLPerf mode sets CPU_DENVER_0 only)."""
    conf = parse_nvpmodel_conf((REAL_CONFS / f"{device_id}.conf").read_text())
    device = load_device(device_id)
    mode = PowerMode("custom", cores, device.cpu_steps_mhz[3], device.gpu_steps_mhz[2], device.emc_steps_mhz[-1])
    params = {line.split()[0] for line in render_custom_model(conf, mode, 99).splitlines()[1:]}
    assert kept <= params and not params & dropped


def test_a_two_core_custom_mode_switches_where_offline_cpufreq_files_refuse_writes(fake_root):
    device = load_device("agx-xavier")
    fake_root.add_jetson(device, preset_id=0)
    ctl = NvpmodelController(device)
    ctl.apply(PowerMode("custom", 2, 1190.4, 905.25, 1600.0))
    written = parse_nvpmodel_conf(Path(fake_root.calls()[-1][2]).read_text()).model(CUSTOM_NAME)
    assert {p for p, _, _ in written.settings if p.startswith("CPU_") and p != "CPU_ONLINE"} == {"CPU_0", "CPU_1"}
    assert ctl.read_back().knobs() == (2, 1190.4, 905.25, 1600.0)
    assert fake_root.read_int(f"{CPU_DIR}/cpu1/cpufreq/scaling_min_freq") == 1190400


def _broken_preset_conf(root, device, name: str) -> None:
    """``name``'s section also writes cpu7's clock, a core it takes offline, as a buggy file would."""
    head, tail = root.read("/etc/nvpmodel.conf").split(f"NAME={name} >", 1)
    root.write("/etc/nvpmodel.conf", head + f"NAME={name} >" + tail.replace(
        "GPU MIN_FREQ 0", "CPU_7 MAX_FREQ 1190400\nGPU MIN_FREQ 0", 1))


def test_a_switch_nvpmodel_reports_an_error_for_fails_and_the_mode_in_force_comes_back(fake_root):
    device = load_device("agx-xavier")
    fake_root.add_jetson(device, preset_id=0)
    _broken_preset_conf(fake_root, device, "MODE_15W")
    ctl = NvpmodelController(device)
    with pytest.raises(PrivilegedCommandError, match="NVPM ERROR.*cpu7/cpufreq/scaling_max_freq"), ctl:
        ctl.apply(device.preset("MODE_15W"))
    assert fake_root.read("/var/lib/nvpmodel/status") == "pmode:0000"
    assert [c[1:] for c in fake_root.calls() if c[:2] == ["nvpmodel", "-m"]] == [["-m", "2"], ["-m", "0"]]


def test_status_as_a_user_shows_the_emc_clock_unknown_and_its_cap_as_a_cap(fake_root, capsys):
    device = load_device("orin-agx")
    fake_root.add_jetson(device, preset_id=device.preset("MODE_15W").id)
    fake_root.write(emc_rate_path("T234"), 204_000_000)
    assert read_status().emc_mhz == 204.0  # as root: the rate running now
    fake_root.hide_debugfs()  # a user's status: /sys/kernel/debug is root-only
    status = read_status()
    assert status.emc_mhz is None and status.mode_label is None and status.emc_cap_mhz == 2133.0
    assert status.unknown["emc_mhz"] == "EMC rate needs root (debugfs); nvpmodel caps it at 2133 MHz"
    assert status.cpu_mhz is not None and status.gpu_mhz is not None
    line = next(x for x in status.lines() if x.startswith("clocks:"))
    assert "EMC unknown (EMC rate needs root (debugfs); nvpmodel caps it at 2133 MHz)" in line


def test_an_apply_whose_emc_rate_is_unreadable_warns_of_no_difference(fake_root, monkeypatch):
    monkeypatch.delenv(state_file.STATE_DIR_ENV, raising=False)
    device = load_device("orin-nx")
    fake_root.add_jetson(device)
    fake_root.hide_debugfs()
    out = io.StringIO()
    actual = apply_mode(device, device.preset("10W"), out=out)
    assert actual.emc_mhz != actual.emc_mhz  # NaN: unknown, not the cap
    text = out.getvalue()
    assert "warning" not in text and "EMC unknown" in text


def _without_emc(text: str) -> str:
    """An nvpmodel.conf with no EMC section nor lines, as L4T 34.0 (JetPack 5.0 DP) concord_nvpmodel.conf."""
    lines = text.splitlines()
    out, skip = [], False
    for line in lines:
        if line.startswith("<"):
            skip = "NAME=EMC" in line
        if not skip and not line.startswith("EMC "):
            out.append(line)
    return "\n".join(out) + "\n"


def test_a_custom_mode_on_a_conf_without_emc_records_the_top_emc_step_it_runs(fake_root):
    device = load_device("orin-agx")
    fake_root.add_jetson(device)
    fake_root.write("/etc/nvpmodel.conf", _without_emc(fake_root.read("/etc/nvpmodel.conf")))
    ctl = NvpmodelController(device, jetson_clocks=True)
    mode = PowerMode("m", 8, 1497.6, 828.75, 2133.0)
    top = max(device.emc_steps_mhz)
    assert ctl.caps_of(mode).knobs() == (8, 1497.6, 828.75, top)
    with ctl:
        ctl.apply(mode)
        assert ctl.current().emc_mhz == top and ctl.read_back().emc_mhz == top
    notes = _caps_notes(mode, ctl.caps_of(mode))
    assert len(notes) == 1 and f"emc_mhz to {top:g}, not the 2133 asked" in notes[0]


def test_a_leftover_clocks_store_does_not_block_a_locked_run(fake_root, monkeypatch):
    """A run killed between ``jetson_clocks --store`` and its state file leaves the store: the next run's store
    replaces it (L4T's jetson_clocks asks before overwriting and, without stdin, refuses)."""
    monkeypatch.delenv(state_file.STATE_DIR_ENV, raising=False)
    device = load_device("orin-nx")
    fake_root.add_jetson(device)
    stale = state_file.state_dir() / state_file.CLOCKS_STORE_NAME
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.write_text("/sys/devices/system/cpu/cpu0/cpufreq/scaling_min_freq:729600\n")
    refused = subprocess.run(["jetson_clocks", "--store", str(stale)], env=fake_root.env(), capture_output=True,
                             text=True, stdin=subprocess.DEVNULL)
    assert refused.returncode == 1 and "already exists" in refused.stdout
    gpu = GPU_DIRS["T234"]
    before = fake_root.read(f"{gpu}/min_freq")
    with NvpmodelController(device, jetson_clocks=True) as ctl:
        ctl.apply(device.preset("10W"))
    assert fake_root.read(f"{gpu}/min_freq") == before and fake_root.state_files() == []


def test_a_preset_cap_between_two_steps_reads_back_at_the_step_below_as_recorded(fake_root):
    """AGX Xavier MODE_15W caps the GPU at 670 MHz, between its 624.75 and 675.75 steps: the kernel runs 624.75."""
    device = load_device("agx-xavier")
    fake_root.add_jetson(device, preset_id=0)
    for lock in (False, True):
        ctl = NvpmodelController(device, jetson_clocks=lock)
        with ctl:
            ctl.apply(device.preset("MODE_15W"))
            caps, read_back = ctl.caps_of(device.preset("MODE_15W")), ctl.read_back()
        assert caps.gpu_mhz == read_back.gpu_mhz == 624.75 and caps.cpu_mhz == read_back.cpu_mhz == 1190.4
        assert _read_back_notes(caps, read_back) == []


def test_the_emc_reason_without_a_cap_says_so():
    assert emc_unknown_reason(None) == "EMC rate needs root (debugfs); nvpmodel sets no cap"


def test_a_readable_emc_rate_needs_no_reason(fake_root):
    device = load_device("orin-agx")
    fake_root.add_jetson(device)
    fake_root.write(emc_rate_path("T234"), 204_000_000)
    status = read_status()
    assert status.emc_mhz == 204.0 and "emc_mhz" not in status.unknown

"""Custom modes written straight to sysfs, per SoC family, and restored byte for byte."""

from __future__ import annotations

import shutil

import pytest
from fakes import EMC_CAP, GPU_DIRS, finish, start_python
from jetpredict.models.catalogue import PowerMode, load_device
from jetpredict.models.errors import InputError, ModeOutOfRangeError
from jetpredict.profiler.powermode import (
    PrivilegedCommandError,
    SysfsController,
    detect_controller,
    read_clocks,
)
from jetpredict.profiler.powermode.custom import SOC_PATHS, cpu_online, soc_paths
from jetpredict.profiler.powermode.privileged import write_sysfs

CPU = "/sys/devices/system/cpu"


@pytest.mark.parametrize("device_id", ["nano", "xavier-nx", "orin-nx"])
def test_pins_cores_and_clocks_and_reads_them_back(fake_root, device_id):
    device = load_device(device_id)
    fake_root.add_jetson(device)
    soc = device.specs.soc
    if soc == "T210":  # the Nano pins EMC through the clock-override debugfs files
        fake_root.write("/sys/kernel/debug/clk/override.emc/clk_state", 0)
        fake_root.write("/sys/kernel/debug/clk/override.emc/clk_update_rate", 0)
    else:
        fake_root.write("/sys/kernel/debug/bpmp/debug/clk/emc/mrq_rate_locked", 0)
    before = {str(p): p.read_text() for p in fake_root.path.rglob("*") if p.is_file()}
    ctl = detect_controller("jetson", device_id, custom="sysfs")
    assert isinstance(ctl, SysfsController)
    cpu, gpu, emc = device.cpu_steps_mhz[3], device.gpu_steps_mhz[2], device.emc_steps_mhz[1]
    mode = PowerMode("custom", 2, cpu, gpu, emc)
    with ctl:
        ctl.apply(mode)
        assert ctl.current() == mode
        assert fake_root.read("/sys/devices/system/cpu/cpu1/online") == "1"
        assert fake_root.read(f"{CPU}/cpu{device.cpu_cores_range[1] - 1}/online") == "0"
        g = GPU_DIRS[soc]
        assert fake_root.read_int(f"{g}/min_freq") == fake_root.read_int(f"{g}/max_freq") == round(gpu * 1e6)
        c0 = f"{CPU}/cpu0/cpufreq"
        assert fake_root.read_int(f"{c0}/scaling_min_freq") == fake_root.read_int(f"{c0}/scaling_max_freq")
        assert fake_root.read_int(EMC_CAP) == round(emc * 1e6)
        fake_root.settle(device)
        assert ctl.read_back().knobs() == (2, cpu, gpu, emc)
        lock = SOC_PATHS[soc].emc_lock
        assert fake_root.read(lock[0]) == "1" and fake_root.read_int(lock[1]) == round(emc * 1e6)
    fake_root.settle(device)
    after = {str(p): p.read_text() for p in fake_root.path.rglob("*") if p.is_file()}
    changed = {k for k in before if before[k] != after.get(k)}
    assert not changed, changed  # every knob (and so every clock) back as it was


def test_read_back_shows_what_the_hardware_runs_not_what_was_asked(fake_root):
    device = load_device("orin-nx")
    fake_root.add_jetson(device)
    fake_root.write(f"{CPU}/cpu3/online", 0)
    fake_root.write(f"{CPU}/cpu0/cpufreq/scaling_cur_freq", 729600)
    for c in range(1, device.cpu_cores_range[1]):
        fake_root.write(f"{CPU}/cpu{c}/cpufreq/scaling_cur_freq", 1113600)
    fake_root.write(f"{GPU_DIRS['T234']}/cur_freq", 306000000)
    got = read_clocks(soc_paths("T234"))
    assert got.cpu_cores == device.cpu_cores_range[1] - 1
    assert (got.cpu_mhz, got.gpu_mhz) == (1113.6, 306.0)


def test_off_table_clock_snaps_to_the_nearest_step(fake_root):
    device = load_device("xavier-nx")
    fake_root.add_jetson(device)
    ctl = SysfsController(device)
    ctl.apply(PowerMode("custom", 2, 1200.0, 500.0, device.emc_steps_mhz[0]))
    fake_root.settle(device)
    back = ctl.read_back()
    assert back.cpu_cores == 2 and back.emc_mhz == device.emc_steps_mhz[0]
    assert back.cpu_mhz == min(device.cpu_steps_mhz, key=lambda f: abs(f - 1200.0))
    assert back.gpu_mhz == min(device.gpu_steps_mhz, key=lambda f: abs(f - 500.0))


def test_the_caps_of_an_off_step_mode_are_the_steps_written(fake_root):
    """AGX Xavier has no 1200 MHz CPU, 1000 MHz GPU nor 1500 MHz EMC step: the caps the controller reports,
    before and after the switch, are the steps it writes (1190.4, 1032.75, 1600), not the clocks asked."""
    device = load_device("agx-xavier")
    fake_root.add_jetson(device)
    ctl = SysfsController(device)
    mode = PowerMode("off-step", 4, 1200.0, 1000.0, 1500.0)
    caps = ctl.caps_of(mode)
    assert caps == PowerMode("off-step", 4, 1190.4, 1032.75, 1600.0)
    ctl.apply(mode)
    assert fake_root.read_int(f"{CPU}/cpu0/cpufreq/scaling_max_freq") == 1190400
    assert fake_root.read_int(f"{GPU_DIRS['T194']}/max_freq") == 1032750000
    assert fake_root.read_int(EMC_CAP) == 1600000000
    assert ctl.current() == caps and ctl.caps_of(mode) == caps
    on_step = PowerMode("on-step", 4, 1190.4, 1032.75, 1600.0)
    assert ctl.caps_of(on_step) == on_step


def test_a_clock_without_a_frequency_table_keeps_the_value_asked(fake_root):
    device = load_device("agx-xavier")
    fake_root.add_jetson(device)
    fake_root.real(f"{GPU_DIRS['T194']}/available_frequencies").unlink()
    assert SysfsController(device).caps_of(PowerMode("m", 4, 1200.0, 1000.0, 1600.0)).gpu_mhz == 1000.0


def test_out_of_range_and_missing_gpu(fake_root):
    device = load_device("nano")
    fake_root.add_jetson(device)
    ctl = SysfsController(device)
    with pytest.raises(ModeOutOfRangeError) as err:
        ctl.apply(PowerMode("custom", 9, 921.6, 921.6, 1600.0))
    assert err.value.field == "cpu_cores"
    for f in ("available_frequencies", "min_freq", "max_freq", "cur_freq"):
        (fake_root.real(GPU_DIRS["T210"]) / f).unlink()
    fake_root.real(GPU_DIRS["T210"]).rmdir()
    with pytest.raises(PrivilegedCommandError, match="no GPU devfreq"):
        ctl.apply(PowerMode("custom", 2, device.cpu_steps_mhz[0], device.gpu_steps_mhz[0], 1600.0))


def test_unknown_soc_family():
    with pytest.raises(LookupError, match="T186"):
        soc_paths("T186")


def _move_gpu_devfreq(fake_root, soc: str, new_dir: str) -> None:
    """Move the fake board's GPU devfreq files from their default node to ``new_dir``."""
    old = fake_root.real(GPU_DIRS[soc])
    for f in sorted(old.iterdir()):
        fake_root.write(f"{new_dir}/{f.name}", f.read_text().strip())
        f.unlink()
    old.rmdir()


@pytest.mark.parametrize("device_id, gpu_dir", [
    # the GPU *_KNEXT paths of the L4T r35 Orin files (nvpmodel_p3701_0000.conf, nvpmodel_p3767_0000.conf)
    ("orin-nx", "/sys/devices/17000000.ga10b/devfreq_dev"),
    # the FREQ_TABLE_KNEXT node L4T's Nano file names (a gv11b, i.e. T194, GPU)
    ("xavier-nx", "/sys/devices/17000000.gv11b/devfreq/devfreq0"),
])
def test_clocks_are_read_back_and_pinned_through_other_gpu_devfreq_nodes(fake_root, device_id, gpu_dir):
    device = load_device(device_id)
    fake_root.add_jetson(device)
    soc = device.specs.soc
    _move_gpu_devfreq(fake_root, soc, gpu_dir)
    fake_root.write(f"{gpu_dir}/cur_freq", round(device.gpu_steps_mhz[1] * 1e6))
    assert read_clocks(soc_paths(soc)).gpu_mhz == device.gpu_steps_mhz[1]
    ctl = SysfsController(device)
    ctl.apply(PowerMode("custom", 2, device.cpu_steps_mhz[3], device.gpu_steps_mhz[2], device.emc_steps_mhz[0]))
    hz = round(device.gpu_steps_mhz[2] * 1e6)
    assert fake_root.read_int(f"{gpu_dir}/min_freq") == fake_root.read_int(f"{gpu_dir}/max_freq") == hz
    fake_root.write(f"{gpu_dir}/cur_freq", hz)  # what the devfreq governor does between min = max
    assert ctl.read_back().gpu_mhz == device.gpu_steps_mhz[2]


def test_a_mode_with_more_cores_than_the_board_has_is_refused(fake_root):
    """An Orin NX 8GB (6 CPUs) under the catalogue's 8-core Orin NX: 8 cores cannot be pinned."""
    device = load_device("orin-nx")
    fake_root.add_jetson(device)
    for c in (6, 7):
        shutil.rmtree(fake_root.real(f"{CPU}/cpu{c}"))
    with pytest.raises(InputError, match="6 CPUs") as err:
        SysfsController(device).apply(PowerMode("custom", 8, 1190.4, 612.0, 2133.0))
    assert err.value.field == "cpu_cores"
    assert fake_root.read(f"{CPU}/cpu5/online") == "1"  # nothing written


def test_a_preset_is_pinned_at_the_steps_its_caps_run_at(fake_root):
    """AGX Xavier MODE_15W caps GPU 670 MHz: the nearest step, 675.75, is above the cap; the kernel (and
    nvpmodel) run 624.75, the highest step at or below it, and the CPU's 1200 cap at 1190.4."""
    device = load_device("agx-xavier")
    fake_root.add_jetson(device)
    ctl = SysfsController(device)
    preset = device.preset("MODE_15W")
    runs = (4, 1190.4, 624.75, 1331.2)
    assert ctl.caps_of(preset).knobs() == runs
    with ctl:
        ctl.apply(preset)
        assert ctl.current().mode == "MODE_15W" and ctl.current().knobs() == runs
        assert fake_root.read_int(f"{GPU_DIRS['T194']}/max_freq") == 624750000
        assert {fake_root.read_int(f"{CPU}/cpu{c}/cpufreq/scaling_max_freq") for c in range(4)} == {1190400}


def test_the_fake_board_refuses_what_the_kernel_refuses(fake_root):
    """EINVAL, as from a Jetson kernel: a max below the min in force, a min above the max in force, any cpufreq
    file of an offline CPU; the same clocks written in an order the kernel takes go through."""
    device = load_device("orin-nx")
    fake_root.add_jetson(device)
    g, hz = GPU_DIRS["T234"], [round(f * 1e6) for f in device.gpu_steps_mhz]
    fake_root.write(f"{g}/min_freq", hz[1])
    fake_root.write(f"{g}/max_freq", hz[2])
    with pytest.raises(PrivilegedCommandError, match=f"Invalid argument \\(max_freq {hz[0]} below the min"):
        write_sysfs(f"{g}/max_freq", hz[0])
    with pytest.raises(PrivilegedCommandError, match=f"Invalid argument \\(min_freq {hz[3]} above the max"):
        write_sysfs(f"{g}/min_freq", hz[3])
    assert (fake_root.read_int(f"{g}/min_freq"), fake_root.read_int(f"{g}/max_freq")) == (hz[1], hz[2])
    write_sysfs(f"{g}/min_freq", hz[0])
    write_sysfs(f"{g}/max_freq", hz[0])
    assert fake_root.read_int(f"{g}/max_freq") == hz[0]
    khz = round(device.cpu_steps_mhz[0] * 1e3)
    with pytest.raises(PrivilegedCommandError, match="scaling_max_freq .* below the min"):
        write_sysfs(f"{CPU}/cpu1/cpufreq/scaling_max_freq", khz - 1)
    fake_root.write(f"{CPU}/cpu3/online", 0)
    with pytest.raises(PrivilegedCommandError, match="cpu3 is offline"):
        write_sysfs(f"{CPU}/cpu3/cpufreq/scaling_max_freq", khz)


_CHILD_WRITE = """
from jetpredict.profiler.powermode.privileged import PrivilegedCommandError, write_sysfs
try:
    write_sysfs("/sys/devices/system/cpu/cpu3/cpufreq/scaling_max_freq", 729600)
except PrivilegedCommandError as err:
    print(err)
"""


def test_a_jetpredict_child_process_meets_the_same_refusals(fake_root):
    fake_root.add_jetson(load_device("orin-nx"))
    fake_root.write(f"{CPU}/cpu3/online", 0)
    out, err = finish(start_python(fake_root, _CHILD_WRITE))
    assert "cpu3 is offline" in out, (out, err)


def test_a_lower_custom_mode_after_a_higher_one_widens_first(fake_root):
    """The higher mode pins min = max at the top: the lower one's max is below that min, so the min goes
    down first (the kernel refuses a max below the min in force)."""
    device = load_device("orin-nx")
    fake_root.add_jetson(device)
    ctl = SysfsController(device)
    high = PowerMode("high", 4, device.cpu_steps_mhz[-1], device.gpu_steps_mhz[-1], device.emc_steps_mhz[-1])
    low = PowerMode("low", 4, device.cpu_steps_mhz[1], device.gpu_steps_mhz[1], device.emc_steps_mhz[1])
    with ctl:
        ctl.apply(high)
        ctl.apply(low)
        assert ctl.current() == low
        g, c0 = GPU_DIRS["T234"], f"{CPU}/cpu0/cpufreq"
        assert fake_root.read_int(f"{g}/min_freq") == fake_root.read_int(f"{g}/max_freq") == round(low.gpu_mhz * 1e6)
        assert (fake_root.read_int(f"{c0}/scaling_min_freq") == fake_root.read_int(f"{c0}/scaling_max_freq")
                == round(low.cpu_mhz * 1e3))


def test_restore_brings_cores_online_before_their_clocks(fake_root):
    """A 2-core mode takes the other cores offline: their cpufreq files take the saved clocks only once the
    restore has brought them back online."""
    device = load_device("orin-nx")
    fake_root.add_jetson(device)
    last = f"{CPU}/cpu{device.cpu_cores_range[1] - 1}"
    saved = fake_root.read(f"{last}/cpufreq/scaling_max_freq")
    with SysfsController(device) as ctl:
        ctl.apply(PowerMode("two", 2, device.cpu_steps_mhz[3], device.gpu_steps_mhz[2], device.emc_steps_mhz[1]))
        assert not cpu_online(device.cpu_cores_range[1] - 1)
    assert cpu_online(device.cpu_cores_range[1] - 1) and fake_root.read(f"{last}/cpufreq/scaling_max_freq") == saved


def test_restore_lowers_the_min_first_when_the_original_cap_is_below_the_pinned_clock(fake_root):
    """The original mode caps the GPU low (a 10W preset); the pinned one runs above that cap: the min comes
    down before the max (the kernel refuses a max below the min in force)."""
    device = load_device("orin-nx")
    fake_root.add_jetson(device)
    g = GPU_DIRS["T234"]
    bottom, low = (round(f * 1e6) for f in device.gpu_steps_mhz[:2])
    fake_root.write(f"{g}/min_freq", bottom)
    fake_root.write(f"{g}/max_freq", low)
    with SysfsController(device) as ctl:
        ctl.apply(PowerMode("high", 4, device.cpu_steps_mhz[3], device.gpu_steps_mhz[-1], device.emc_steps_mhz[1]))
        assert fake_root.read_int(f"{g}/min_freq") > low
    assert (fake_root.read_int(f"{g}/min_freq"), fake_root.read_int(f"{g}/max_freq")) == (bottom, low)


def test_restore_raises_the_max_first_when_the_original_pin_is_above_the_pinned_clock(fake_root):
    """The original mode pins the GPU and CPU at their top (``jetson_clocks``); the custom mode pins them low:
    the max goes up before the min (the kernel refuses a min above the max in force)."""
    device = load_device("orin-nx")
    fake_root.add_jetson(device)
    g, c0 = GPU_DIRS["T234"], f"{CPU}/cpu0/cpufreq"
    gpu_top, cpu_top = round(device.gpu_steps_mhz[-1] * 1e6), round(device.cpu_steps_mhz[-1] * 1e3)
    for knob in ("min_freq", "max_freq"):
        fake_root.write(f"{g}/{knob}", gpu_top)
    for knob in ("scaling_min_freq", "scaling_max_freq"):
        fake_root.write(f"{c0}/{knob}", cpu_top)
    with SysfsController(device) as ctl:
        ctl.apply(PowerMode("low", 4, device.cpu_steps_mhz[1], device.gpu_steps_mhz[1], device.emc_steps_mhz[1]))
        assert fake_root.read_int(f"{g}/max_freq") < gpu_top
    assert (fake_root.read_int(f"{g}/min_freq"), fake_root.read_int(f"{g}/max_freq")) == (gpu_top, gpu_top)
    assert (fake_root.read_int(f"{c0}/scaling_min_freq"), fake_root.read_int(f"{c0}/scaling_max_freq")) \
        == (cpu_top, cpu_top)


def test_a_knob_the_restore_cannot_write_fails_it_and_keeps_the_state_file(fake_root):
    """A refused write is a failed restore, not a quiet one: the state file stays for `jetpredict restore`,
    which puts the knob back once it takes writes again."""
    from jetpredict.profiler.powermode.base import RestoreFailedError
    from jetpredict.profiler.powermode.recovery import restore_unfinished

    device = load_device("orin-nx")
    fake_root.add_jetson(device)
    saved = fake_root.read_int(EMC_CAP)
    cap = fake_root.real(EMC_CAP)
    with pytest.raises(RestoreFailedError, match="emc_iso_cap"), SysfsController(device) as ctl:
        ctl.apply(PowerMode("low", 2, device.cpu_steps_mhz[1], device.gpu_steps_mhz[1], device.emc_steps_mhz[0]))
        cap.unlink()
        cap.mkdir()  # the restore's write to it fails (EISDIR)
    assert fake_root.state_files() and cpu_online(device.cpu_cores_range[1] - 1)  # the other knobs went back
    cap.rmdir()
    fake_root.write(EMC_CAP, 0)
    assert restore_unfinished().restored
    assert fake_root.read_int(EMC_CAP) == saved and not fake_root.state_files()


def test_a_preset_cap_nearer_the_step_above_still_pins_each_cpu_at_the_step_below(fake_root):
    """A board whose CPU table has a step just above MODE_15W's 1200 MHz cap (1203.2): the nearest step would
    run above the cap; every CPU pins 1190.4, the step the cap runs at, as the record (caps_of) says."""
    device = load_device("agx-xavier")
    fake_root.add_jetson(device)
    for c in range(device.cpu_cores_range[1]):
        table = f"{CPU}/cpu{c}/cpufreq/scaling_available_frequencies"
        fake_root.write(table, " ".join(sorted({*fake_root.read(table).split(), "1203200"}, key=int)))
    ctl = SysfsController(device)
    preset = device.preset("MODE_15W")
    assert ctl.caps_of(preset).cpu_mhz == 1190.4
    with ctl:
        ctl.apply(preset)
        # every CPU the preset puts online (the others keep their own clocks)
        assert {fake_root.read_int(f"{CPU}/cpu{c}/cpufreq/scaling_max_freq")
                for c in range(preset.cpu_cores)} == {1190400}

"""nvpmodel: configuration and query parsing, preset and custom switching against a fake nvpmodel."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes import EMC_CAP, GPU_DIRS
from jetpredict.models.catalogue import PowerMode, load_device
from jetpredict.models.errors import InputError, ModeOutOfRangeError
from jetpredict.profiler.powermode import (
    NvpmodelController,
    PrivilegedCommandError,
    detect_controller,
    jetson_board,
    parse_nvpmodel_conf,
    parse_nvpmodel_query,
)
from jetpredict.profiler.powermode.nvpmodel import (
    CUSTOM_NAME,
    custom_caps,
    full_power_model,
    render_custom_model,
)

#: Excerpts of real L4T nvpmodel files (CPU/GPU/EMC parts only), one per board family.
REAL_CONFS = Path(__file__).resolve().parent / "fixtures" / "nvpmodel"


@pytest.mark.parametrize("output, expected", [
    ("NV Power Mode: MAXN\n0\n", ("MAXN", 0)),
    ("NV Fan Mode:quiet\nNV Power Mode: MODE_15W\n2\n", ("MODE_15W", 2)),
    ("NVPM WARN: fan mode is not set!\nNV Power Mode: 15W\n1", ("15W", 1)),
    ("NV Power Mode:MAXN_SUPER", ("MAXN_SUPER", None)),
])
def test_query_output_of_each_jetpack(output, expected):
    assert parse_nvpmodel_query(output) == expected


def test_query_garbage_is_rejected():
    with pytest.raises(ValueError, match="unexpected"):
        parse_nvpmodel_query("nvpmodel: command failed\n")


CONF = """
# comment
<PARAM TYPE=FILE NAME=CPU_ONLINE >
CORE_0 /sys/devices/system/cpu/cpu0/online
CORE_1 /sys/devices/system/cpu/cpu1/online
< PARAM TYPE=CLOCK NAME=CPU_A57 >
MAX_FREQ /sys/devices/system/cpu/cpu0/cpufreq/scaling_max_freq
< PARAM TYPE=CLOCK NAME=GPU >
MAX_FREQ /sys/gpu/max_freq
< PARAM TYPE=CLOCK NAME=EMC >
MAX_FREQ /sys/kernel/nvpmodel_emc_cap/emc_iso_cap
< POWER_MODEL ID=0 NAME=MAXN >
CPU_ONLINE CORE_0 1
CPU_ONLINE CORE_1 1
CPU_A57 MAX_FREQ -1
GPU MAX_FREQ -1
EMC MAX_FREQ 0
< POWER_MODEL ID=1 NAME=5W >
CPU_ONLINE CORE_0 1
CPU_ONLINE CORE_1 0
CPU_A57 MAX_FREQ  918000
GPU MAX_FREQ 640000000
EMC MAX_FREQ 1600000000
< PM_CONFIG DEFAULT=1 >
"""


def test_conf_sections_caps_and_units():
    conf = parse_nvpmodel_conf(CONF)
    assert conf.default_id == 1 and set(conf.models) == {0, 1}
    assert conf.params["CPU_ONLINE"].args["CORE_1"] == "/sys/devices/system/cpu/cpu1/online"
    nano = load_device("nano")
    five = conf.to_mode(conf.model("5w"), nano)
    assert (five.mode, five.cpu_cores, five.cpu_mhz, five.gpu_mhz, five.emc_mhz) == ("5W", 1, 918.0, 640.0, 1600.0)
    maxn = conf.to_mode(conf.model(0), nano)
    assert maxn.knobs() == (2, max(nano.cpu_steps_mhz), max(nano.gpu_steps_mhz), max(nano.emc_steps_mhz))
    with pytest.raises(InputError, match="valid: 0=MAXN, 1=5W"):
        conf.model("MODE_99W")


def test_conf_without_power_models_is_an_input_error():
    with pytest.raises(InputError) as err:
        parse_nvpmodel_conf("< PARAM TYPE=FILE NAME=CPU_ONLINE >\nCORE_0 /x\n")
    assert err.value.field == "nvpmodel_conf"


@pytest.mark.parametrize("device_id", ["agx-xavier", "xavier-nx", "orin-agx", "orin-nx"])
def test_real_l4t_configurations_parse_to_the_catalogue_presets(device_id):
    path = REAL_CONFS / f"{device_id}.conf"
    device = load_device(device_id)
    conf = parse_nvpmodel_conf(path.read_text())
    parsed = {m.name.upper(): conf.to_mode(m, device) for m in conf.models.values()}
    checked = 0
    for preset in device.presets:
        got = parsed.get(preset.mode.upper())
        if got is None:
            continue
        checked += 1
        assert got.cpu_cores == preset.cpu_cores, preset.mode
        for knob in ("cpu_mhz", "gpu_mhz", "emc_mhz"):
            assert getattr(got, knob) == pytest.approx(getattr(preset, knob), abs=1.0), (preset.mode, knob)
    assert checked >= 2


# The MAXN's GPU gating and power control per board (real L4T values), and which model is the "MAXN".
@pytest.mark.parametrize("device_id, maxn, gating", [
    ("orin-nx", "MAXN", ["FBP_POWER_GATING FBP_PG_MASK 2", "TPC_POWER_GATING TPC_PG_MASK 240"]),
    ("orin-agx", "MAXN", ["TPC_POWER_GATING TPC_PG_MASK 0"]),
    ("agx-xavier", "MAXN", ["TPC_POWER_GATING TPC_PG_MASK 0"]),
    ("xavier-nx", "MODE_20W_6CORE", ["TPC_POWER_GATING TPC_PG_MASK 1"]),  # no MAXN: the highest caps
])
def test_a_custom_mode_carries_the_maxn_gpu_gating_and_power_control(device_id, maxn, gating):
    conf = parse_nvpmodel_conf((REAL_CONFS / f"{device_id}.conf").read_text())
    device = load_device(device_id)
    assert full_power_model(conf).name == maxn
    mode = PowerMode("custom", 2, device.cpu_steps_mhz[0], device.gpu_steps_mhz[0], device.emc_steps_mhz[-1])
    section = render_custom_model(conf, mode, 99).splitlines()
    assert [ln for ln in section if "POWER_GATING" in ln] == gating
    # Power control "on" before any clock is written, back to "auto" right after the GPU's.
    enable = section.index("GPU_POWER_CONTROL_ENABLE GPU_PWR_CNTL_EN on")
    disable = section.index("GPU_POWER_CONTROL_DISABLE GPU_PWR_CNTL_DIS auto")
    first_clock = next(i for i, ln in enumerate(section) if "_FREQ" in ln)
    gpu_max = section.index(f"GPU MAX_FREQ {round(mode.gpu_mhz * 1e6)}")
    assert enable < first_clock and disable == gpu_max + 1
    custom = parse_nvpmodel_conf(conf.text + "\n" + "\n".join(section)).model(CUSTOM_NAME)
    assert conf.to_mode(custom, device).knobs() == mode.knobs()


def test_a_conf_without_gpu_gating_lines_gets_none_in_its_custom_mode():
    conf = parse_nvpmodel_conf(CONF)
    section = render_custom_model(conf, PowerMode("custom", 1, 918.0, 640.0, 1600.0), 2)
    assert "POWER_GATING" not in section and "POWER_CONTROL" not in section


def test_a_custom_mode_after_a_gating_preset_runs_on_the_full_gpu(fake_root):
    """Orin NX 15W gates 6 of 8 TPCs (mask 252); a custom mode must ungate them as MAXN does (mask 240)."""
    device = load_device("orin-nx")
    fake_root.add_jetson(device, preset_id=2)
    fake_root.write("/etc/nvpmodel.conf", (REAL_CONFS / "orin-nx.conf").read_text())
    fake_root.write("/sys/devices/gpu.0/tpc_pg_mask", 240)
    fake_root.write("/sys/devices/gpu.0/power/control", "auto")
    ctl = detect_controller("jetson", "orin-nx")
    ctl.apply(device.preset("15W"))
    assert fake_root.read_int("/sys/devices/gpu.0/tpc_pg_mask") == 252
    ctl.apply(PowerMode("custom", 4, 1190.4, 612.0, 3199.0))
    assert fake_root.calls()[-1][:2] == ["nvpmodel", "-f"]
    assert fake_root.read_int("/sys/devices/gpu.0/tpc_pg_mask") == 240
    assert fake_root.read("/sys/devices/gpu.0/power/control") == "auto"
    assert ctl.read_back().gpu_mhz == 612.0


@pytest.fixture
def xavier(fake_root):
    device = load_device("agx-xavier")
    fake_root.add_jetson(device, preset_id=0)
    return fake_root, device


def test_preset_switch_and_read_back(xavier):
    root, device = xavier
    ctl = detect_controller("jetson")
    assert isinstance(ctl, NvpmodelController) and ctl.device.id == "agx-xavier"
    assert ctl.current().mode == "MAXN"
    ctl.apply(device.preset("MODE_15W"))
    assert ["nvpmodel", "-m", "2"] in root.calls()
    assert ctl.read_back().knobs() == (4, 1190.4, 624.75, 1331.2)  # the steps below the caps 1200 / 670
    assert root.read("/var/lib/nvpmodel/status") == "pmode:0002"


@pytest.mark.parametrize("device_id, preset, resolved", [
    ("agx-xavier", "MODE_15W", (4, 1190.4, 624.75, 1331.2)),  # caps 1200 / 670: steps 1190.4, 624.75|675.75
    ("orin-agx", "MODE_15W", (4, 1113.6, 318.75, 2133.0)),    # GPU cap 408: steps 318.75 | 420.75
    ("nano", "5W", (2, 825.6, 614.4, 1600.0)),                # caps 918 / 640: steps 825.6, 614.4
    ("agx-xavier", "MAXN", (8, 2265.6, 1377.0, 2133.0)),      # on the steps: as the board file caps them
])
def test_a_preset_records_the_step_its_caps_resolve_to(fake_root, device_id, preset, resolved):
    """The kernel runs a max cap at the highest step of the board's table at or below it (jetson_clocks pins
    min = max there): the caps a preset reports, and its mode after the switch, are those steps."""
    device = load_device(device_id)
    fake_root.add_jetson(device)
    ctl = NvpmodelController(device)
    asked = device.preset(preset)
    assert ctl.caps_of(asked).knobs() == resolved and ctl.caps_of(asked).mode == preset
    ctl.apply(asked)
    assert ctl.current().knobs() == resolved
    assert NvpmodelController(device).current().knobs() == resolved  # the preset in force, from nvpmodel -q


def test_a_preset_cap_off_every_table_keeps_the_cap_or_takes_the_lowest_step(xavier):
    """A clock with no table on the board keeps the file's cap, as does the EMC (no board table: the BPMP
    resolves its cap); a cap below the lowest step runs at the lowest step."""
    root, device = xavier
    root.real(f"{GPU_DIRS['T194']}/available_frequencies").unlink()
    conf = root.read("/etc/nvpmodel.conf")
    head, tail = conf.split("NAME=MODE_15W >", 1)
    section, rest = tail.split("< POWER_MODEL", 1)
    section = section.replace("MAX_FREQ 1200000", "MAX_FREQ 100000").replace("EMC MAX_FREQ 1331200000",
                                                                             "EMC MAX_FREQ 1500000000")
    root.write("/etc/nvpmodel.conf", head + "NAME=MODE_15W >" + section + "< POWER_MODEL" + rest)
    caps = NvpmodelController(device).caps_of(device.preset("MODE_15W"))
    assert caps.knobs() == (4, min(device.cpu_steps_mhz), 670.0, 1500.0)


def test_custom_mode_goes_through_a_custom_power_model(xavier):
    root, device = xavier
    ctl = detect_controller("jetson", "agx-xavier")
    mode = PowerMode("custom", 6, 1497.6, 905.25, 1600.0)
    ctl.apply(mode)
    call = root.calls()[-1]
    assert call[:2] == ["nvpmodel", "-f"] and call[3:] == ["-m", str(max(ctl.conf.models) + 1)]
    assert ctl.current() == mode
    assert ctl.read_back().knobs() == (6, 1497.6, 905.25, 1600.0)
    gpu = GPU_DIRS["T194"]
    assert root.read_int(f"{gpu}/min_freq") == root.read_int(f"{gpu}/max_freq") == 905250000
    assert root.read_int(EMC_CAP) == 1600000000
    ctl.restore()  # nothing remembered: no-op
    assert ctl.read_back().cpu_cores == 6


def test_an_off_step_custom_mode_is_written_and_recorded_at_the_boards_steps(xavier):
    """AGX Xavier has no 1200 MHz CPU, 1000 MHz GPU nor 1500 MHz EMC step: the custom POWER_MODEL pins the
    steps the kernel would settle on (1190.4, 1032.75, 1600), and the caps reported are those steps."""
    root, device = xavier
    ctl = NvpmodelController(device)
    mode = PowerMode("off-step", 4, 1200.0, 1000.0, 1500.0)
    steps = PowerMode("off-step", 4, 1190.4, 1032.75, 1600.0)
    assert ctl.caps_of(mode) == steps
    section = render_custom_model(ctl.conf, custom_caps(ctl.conf, device, mode), 99).splitlines()
    assert "GPU MAX_FREQ 1032750000" in section and "GPU MIN_FREQ 1032750000" in section
    assert "CPU_0 MAX_FREQ 1190400" in section and "EMC MAX_FREQ 1600000000" in section
    ctl.apply(mode)
    written = parse_nvpmodel_conf(Path(root.calls()[-1][2]).read_text()).model(CUSTOM_NAME)
    assert written.values("GPU", "MAX_FREQ") == written.values("GPU", "MIN_FREQ") == ["1032750000"]
    assert written.values("CPU_3", "MAX_FREQ") == ["1190400"] and written.values("EMC", "MAX_FREQ") == ["1600000000"]
    assert root.read_int(f"{GPU_DIRS['T194']}/max_freq") == 1032750000
    assert ctl.current() == steps and ctl.caps_of(mode) == steps
    assert ctl.read_back().knobs() == steps.knobs()


def test_an_on_step_custom_mode_is_written_as_asked(xavier):
    _, device = xavier
    ctl = NvpmodelController(device)
    mode = PowerMode("on-step", 4, 1190.4, 1032.75, 1600.0)
    assert ctl.caps_of(mode) == mode
    section = render_custom_model(ctl.conf, custom_caps(ctl.conf, device, mode), 99)
    assert "GPU MAX_FREQ 1032750000" in section and "MAX_FREQ 1190400" in section


def test_a_clock_without_a_frequency_table_is_written_as_asked(xavier):
    root, device = xavier
    root.real(f"{GPU_DIRS['T194']}/available_frequencies").unlink()
    ctl = NvpmodelController(device)
    mode = PowerMode("m", 4, 1200.0, 1000.0, 1600.0)
    caps = ctl.caps_of(mode)
    assert (caps.cpu_mhz, caps.gpu_mhz) == (1190.4, 1000.0)
    assert "GPU MAX_FREQ 1000000000" in render_custom_model(ctl.conf, custom_caps(ctl.conf, device, mode), 99)


def test_out_of_range_custom_mode_is_refused_before_any_switch(xavier):
    root, _ = xavier
    ctl = detect_controller("jetson")
    with pytest.raises(ModeOutOfRangeError) as err:
        ctl.apply(PowerMode("custom", 4, 3000.0, 905.25, 1600.0))
    assert err.value.field == "cpu_mhz"
    assert not any("-m" in c for c in root.calls())


def test_failed_switch_is_a_clear_error(xavier, monkeypatch):
    _, device = xavier
    monkeypatch.setenv("FAKE_NVPMODEL_FAIL", "3")
    ctl = detect_controller("jetson")
    with pytest.raises(PrivilegedCommandError, match="nvpmodel -m 3 failed with exit 1.*failed to set"):
        ctl.apply(device.preset("MODE_30W_ALL"))


def test_jetson_clocks_is_stored_locked_and_restored(xavier):
    root, device = xavier
    ctl = detect_controller("jetson", jetson_clocks=True)
    gpu = GPU_DIRS["T194"]
    with ctl:
        ctl.apply(device.preset("MODE_10W"))
        assert root.read_int(f"{gpu}/min_freq") == root.read_int(f"{gpu}/max_freq") == 520000000
    tools = [c[:2] for c in root.calls() if c[0] == "jetson_clocks"]
    assert tools == [["jetson_clocks", "--store"], ["jetson_clocks"], ["jetson_clocks", "--restore"]]
    assert root.read_int(f"{gpu}/min_freq") == round(min(device.gpu_steps_mhz) * 1e6)
    assert ctl.read_back().knobs() == (8, 2265.6, 1377.0, 2133.0)


def test_not_a_jetson_or_unknown_kind(fake_root):
    assert jetson_board() is None
    with pytest.raises(InputError, match="not a recognised Jetson") as err:
        detect_controller("jetson")
    assert err.value.field == "device"
    with pytest.raises(InputError) as err:
        detect_controller("tpu")
    assert err.value.field == "device"


def _conf(cores: int, models: list[tuple[int, str, int, int, int, int]], default: int) -> str:
    """A minimal nvpmodel.conf: ``cores`` CPU_ONLINE entries and ``(id, name, cores on, CPU kHz, GPU Hz,
    EMC Hz)`` models (-1 / 0 = uncapped), in L4T's section format."""
    out = ["< PARAM TYPE=FILE NAME=CPU_ONLINE >"]
    out += [f"CORE_{c} /sys/devices/system/cpu/cpu{c}/online" for c in range(cores)]
    out += ["< PARAM TYPE=CLOCK NAME=CPU_A78_0 >", "MAX_FREQ /sys/devices/system/cpu/cpu0/cpufreq/scaling_max_freq",
            "< PARAM TYPE=CLOCK NAME=GPU >", f"MAX_FREQ {GPU_DIRS['T234']}/max_freq",
            "< PARAM TYPE=CLOCK NAME=EMC >", f"MAX_FREQ {EMC_CAP}"]
    for mid, name, on, cpu_khz, gpu_hz, emc_hz in models:
        out.append(f"< POWER_MODEL ID={mid} NAME={name} >")
        out += [f"CPU_ONLINE CORE_{c} {1 if c < on else 0}" for c in range(cores)]
        out += [f"CPU_A78_0 MAX_FREQ {cpu_khz}", f"GPU MAX_FREQ {gpu_hz}", f"EMC MAX_FREQ {emc_hz}"]
    out.append(f"< PM_CONFIG DEFAULT={default} >")
    return "\n".join(out) + "\n"


#: Orin NX 8GB (P3767-0001): 6 cores; caps of nvpmodel_p3767_0001.conf (L4T r35) MAXN, 10W, 15W, 20W.
ORIN_NX_8GB = _conf(6, [(0, "MAXN", 6, -1, -1, 0), (1, "10W", 4, 1190400, 612000000, 2133000000),
                        (2, "15W", 4, 1420800, 612000000, 0), (3, "20W", 6, 1497600, 408000000, 0)], 2)
#: Orin Nano 8GB on JetPack 6.2 "Super": caps of nvpmodel_p3767_0003_super.conf (L4T r36.4).
ORIN_NANO_SUPER = _conf(6, [(0, "15W", 6, 1497600, 612000000, 2133000000),
                            (1, "25W", 6, 1344000, 918000000, 3199000000), (2, "MAXN_SUPER", 6, -1, -1, -1)], 1)
#: Orin Nano 8GB on JetPack 5: caps of nvpmodel_p3767_0003.conf (L4T r35): 15W uncapped, 7W.
ORIN_NANO_JP5 = _conf(6, [(0, "15W", 6, -1, -1, 0), (1, "7W", 4, 960000, 408000000, 2133000000)], 0)


def test_a_custom_mode_with_more_cores_than_the_board_lists_is_refused():
    """The catalogue's Orin NX is the 16GB 8-core module; on the 8GB one (6 cores) an 8-core mode would
    lose two CPU_ONLINE lines and run on 6 cores under an 8-core label."""
    conf = parse_nvpmodel_conf(ORIN_NX_8GB)
    device = load_device("orin-nx")
    mode = PowerMode("custom", 8, device.cpu_steps_mhz[5], device.gpu_steps_mhz[2], device.emc_steps_mhz[-1])
    with pytest.raises(InputError, match="lists 6 cores") as err:
        render_custom_model(conf, mode, 9)
    assert err.value.field == "cpu_cores"
    six = render_custom_model(conf, PowerMode("custom", 6, *mode.knobs()[1:]), 9)
    assert six.count("CPU_ONLINE") == 6 and "CPU_ONLINE CORE_5 1" in six


def test_apply_refuses_the_extra_cores_before_calling_nvpmodel(fake_root):
    device = load_device("orin-nx")
    fake_root.add_jetson(device)
    fake_root.write("/etc/nvpmodel.conf", ORIN_NX_8GB)
    ctl = NvpmodelController(device)
    with pytest.raises(InputError) as err:
        ctl.apply(PowerMode("custom", 7, device.cpu_steps_mhz[5], device.gpu_steps_mhz[2], device.emc_steps_mhz[-1]))
    assert err.value.field == "cpu_cores"
    assert not [c for c in fake_root.calls() if c[0] == "nvpmodel"]


def test_uncapped_presets_of_a_board_within_the_catalogue_are_its_top_steps():
    conf = parse_nvpmodel_conf(ORIN_NANO_JP5)
    device = load_device("orin-nano")
    assert conf.beyond_catalogue(device) == {}
    assert conf.to_mode(conf.model("15W"), device).knobs() == (6, 1510.4, 625.0, 2133.0)
    assert conf.to_mode(conf.model("7W"), device).knobs() == (4, 960.0, 408.0, 2133.0)


@pytest.mark.parametrize("preset, message", [
    ("25W", "'25W' caps gpu_mhz=918 > 625, emc_mhz=3199 > 2133"),
    ("MAXN_SUPER", "'MAXN_SUPER' leaves cpu_mhz, gpu_mhz, emc_mhz uncapped"),
])
def test_super_presets_outside_the_catalogue_are_refused_not_substituted(preset, message):
    """MAXN_SUPER runs the Orin Nano at up to 1020 MHz GPU / 3199 MHz EMC (jetson_specs.csv): recording it
    as the JetPack 5 catalogue's 625 / 2133 MHz top steps would be wrong clocks, so it is an input error."""
    conf = parse_nvpmodel_conf(ORIN_NANO_SUPER)
    device = load_device("orin-nano")
    with pytest.raises(InputError, match="outside the catalogue") as err:
        conf.to_mode(conf.model(preset), device)
    assert message in str(err.value) and err.value.field == "mode"
    # A Super preset whose caps all lie inside the catalogue's range is still what its file says.
    assert conf.to_mode(conf.model("15W"), device).knobs() == (6, 1497.6, 612.0, 2133.0)


def test_a_super_board_refuses_its_maxn_super_preset_through_the_controller(fake_root, caplog):
    device = load_device("orin-nano")
    fake_root.add_jetson(device)
    fake_root.write("/etc/nvpmodel.conf", ORIN_NANO_SUPER)
    ctl = NvpmodelController(device)
    assert [p.mode for p in ctl.presets()] == ["15W"]  # the others are logged, not substituted
    assert "MAXN_SUPER" in caplog.text and "25W" in caplog.text
    with pytest.raises(InputError, match="MAXN_SUPER"):
        ctl.caps_of(PowerMode("MAXN_SUPER", 6, 1510.4, 625.0, 2133.0))
    with pytest.raises(InputError, match="MAXN_SUPER"):
        ctl.apply(PowerMode("MAXN_SUPER", 6, 1510.4, 625.0, 2133.0))
    assert not [c for c in fake_root.calls() if c[0] == "nvpmodel"]


def test_tx2_modes_count_the_core_its_conf_never_names_as_online():
    """NVIDIA's TX2 file (nvpmodel_t186.conf) declares CORE_0-5 but no POWER_MODEL names CORE_0: cpu0 is never
    taken offline, so MAXN and MAXP_CORE_ALL run 6 cores and MAXQ and MAXP_CORE_ARM (Denver cpu1-2 off) 4."""
    conf = parse_nvpmodel_conf((REAL_CONFS / "tx2.conf").read_text())
    cores = {m.name: conf.to_mode(m).cpu_cores for m in conf.models.values()}
    assert cores == {"MAXN": 6, "MAXQ": 4, "MAXP_CORE_ALL": 6, "MAXP_CORE_ARM": 4}
    assert full_power_model(conf).name == "MAXN"


def test_cores_declared_above_every_named_core_are_not_counted():
    """AGX Orin 32GB's nvpmodel_p3701_0004.conf (L4T r35/r36) declares CORE_0-11 (the 64GB module's layout)
    but its modes name only CORE_0-7, the 8 cores the module has: CORE_8-11 are not there to be online."""
    declared = "\n".join(f"CORE_{c} /sys/devices/system/cpu/cpu{c}/online" for c in range(12))

    def named(on: int) -> str:
        return "\n".join(f"CPU_ONLINE CORE_{c} {int(c < on)}" for c in range(8))

    conf = parse_nvpmodel_conf(f"< PARAM TYPE=FILE NAME=CPU_ONLINE >\n{declared}\n"
                               f"< POWER_MODEL ID=0 NAME=MAXN >\n{named(8)}\n"
                               f"< POWER_MODEL ID=1 NAME=MODE_15W >\n{named(4)}\n< PM_CONFIG DEFAULT=0 >\n")
    assert [conf.to_mode(conf.model(i)).cpu_cores for i in (0, 1)] == [8, 4]

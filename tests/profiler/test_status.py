"""``jetpredict status`` against fake Jetson trees: mode, cores, clocks and module power; off a Jetson a
message and its own exit status. And ``apply --dry-run --board B`` away from the board."""

from __future__ import annotations

import json

import pytest
from fakes import GPU_DIRS
from jetpredict.models.catalogue import load_device
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
    # a real switch away from the board still fails with a message, not a traceback
    assert main(["apply", "--mode", mode, "--board", "agx-xavier", "--via", via]) in (1, 2)

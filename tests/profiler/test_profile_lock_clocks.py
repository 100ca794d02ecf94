"""``jetpredict profile`` passes ``--no-lock-clocks`` through to the campaign (clocks locked by default), refuses
it off a Jetson, and puts the clocks in force before back when a signal comes mid-switch. What locking does
to each mode's clocks is test_campaign.py's."""

from __future__ import annotations

import json
import signal

import pytest
from fake_tools import GATED_NVPMODEL
from fakes import signal_inside_switch

from jetpredict.cli import main

GPU = "/sys/devices/17000000.ga10b/devfreq/17000000.ga10b"
PROFILE = ("profile", "--device", "jetson", "--workload", "lenet5-mnist", "--modes", "7W", "--batch-size", "2",
           "--workers", "0", "--warmup", "0", "--minibatches", "1", "--settle-s", "0", "--no-progress")


def _tools(root) -> list[list[str]]:
    return [c[:2] for c in root.calls() if c[0] == "jetson_clocks" or c[:2] == ["nvpmodel", "-m"]]


@pytest.mark.parametrize("flags, locked", [((), True), (("--no-lock-clocks",), False)])
def test_the_lock_clocks_flag_reaches_the_campaign(orin_nano, tmp_path, torch_one_thread, flags, locked):
    assert main([*PROFILE, *flags, "--out", str(tmp_path / "p.csv")]) == 0
    assert json.loads((tmp_path / "p.csv.json").read_text())["config"]["lock_clocks"] is locked


def test_no_lock_clocks_elsewhere_is_refused_naming_the_flag(tmp_path, capsys):
    rc = main(["profile", "--device", "sim:orin-nano", "--workload", "lenet5-mnist", "--no-lock-clocks",
               "--out", str(tmp_path / "p.csv")])
    assert rc != 0 and "--no-lock-clocks applies to --device jetson" in capsys.readouterr().err


@pytest.mark.slow
def test_a_signal_during_the_switch_restores_the_stored_clocks(orin_nano, tmp_path):
    orin_nano.install_tool("nvpmodel", GATED_NVPMODEL.replace("@SOC@", "T234"))
    before = (orin_nano.read(f"{GPU}/min_freq"), orin_nano.read(f"{GPU}/max_freq"))
    child, _, err = signal_inside_switch(orin_nano, signal.SIGTERM, *PROFILE, "--out", str(tmp_path / "p.csv"))
    assert child.returncode == 128 + signal.SIGTERM, err
    tools = _tools(orin_nano)
    assert tools[0] == ["jetson_clocks", "--store"] and tools[-1] == ["jetson_clocks", "--restore"]
    assert (orin_nano.read(f"{GPU}/min_freq"), orin_nano.read(f"{GPU}/max_freq")) == before
    assert orin_nano.state_files() == []  # the store is gone with the state file

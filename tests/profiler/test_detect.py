"""Board detection from the device tree: real ``compatible`` and ``model`` strings of each catalogued Jetson."""

from __future__ import annotations

import logging

import pytest
from fakes import DEVICE_TREES
from jetpredict.models.catalogue import load_device
from jetpredict.profiler.powermode import NvpmodelController, detect_controller, jetson_board
from jetpredict.profiler.powermode.detect import detect_board


@pytest.mark.parametrize("device_id", sorted(DEVICE_TREES))
def test_each_catalogued_board_is_found_by_its_compatible_string(fake_root, device_id):
    fake_root.set_device_tree(*DEVICE_TREES[device_id])
    info = detect_board()
    assert (info.board, info.source, info.warnings) == (device_id, "compatible", ())
    assert jetson_board() == device_id


@pytest.mark.parametrize("model, board", [
    ("Jetson-AGX", "agx-xavier"),       # AGX Xavier, L4T 32.2+ (Adafruit_Python_PlatformDetect#37)
    ("jetson-xavier", "agx-xavier"),    # AGX Xavier, L4T 32.1 (same source)
    ("NVIDIA Jetson AGX Orin Developer Kit", "orin-agx"),  # "jetson-agx" must not take the Orin
    ("NVIDIA Jetson Xavier NX Developer Kit", "xavier-nx"),
    ("NVIDIA Jetson Orin Nano Developer Kit", "orin-nano"),
    ("NVIDIA Jetson Nano Developer Kit", "nano"),
])
def test_without_a_compatible_string_the_model_string_decides(fake_root, model, board):
    fake_root.set_device_tree(model, None)
    assert detect_board().source == "model"
    assert jetson_board() == board


def test_the_agx_xavier_seed_device_gets_its_controller(fake_root, monkeypatch):
    """L4T 32.2+ names the AGX Xavier "Jetson-AGX": ``profile --device jetson`` must still find it."""
    device = load_device("agx-xavier")
    fake_root.add_jetson(device)
    fake_root.set_device_tree("Jetson-AGX", None)  # the model string alone, no compatible strings
    monkeypatch.setenv("PATH", fake_root.env()["PATH"])
    assert detect_board().source == "model"
    ctl = detect_controller("jetson")
    assert isinstance(ctl, NvpmodelController) and ctl.device.id == "agx-xavier"


@pytest.mark.parametrize("compatible, board, variant", [
    # Orin NX 8GB (6 cores) on the reference carrier, as jetson-gpio's compats_jetson_orins_nx lists it
    (("nvidia,p3768-0000+p3767-0001", "nvidia,p3767-0001", "nvidia,tegra234"), "orin-nx", "Orin NX 8GB"),
    (("nvidia,p3737-0000+p3701-0004", "nvidia,p3701-0004", "nvidia,tegra234", "nvidia,tegra23x"),
     "orin-agx", "AGX Orin 32GB"),
    (("nvidia,p3768-0000+p3767-0004", "nvidia,p3767-0004", "nvidia,tegra234"), "orin-nano", "Orin Nano 4GB"),
    # AGX Xavier 8GB (6 cores) and Industrial: any p2888 was taken for the 8-core catalogue entry without a word
    (("nvidia,p2822-0000+p2888-0006", "nvidia,tegra194"), "agx-xavier", "AGX Xavier 8GB"),
    (("nvidia,p2822-0000+p2888-0008", "nvidia,tegra194"), "agx-xavier", "AGX Xavier Industrial"),
])
def test_a_variant_the_catalogue_lacks_is_named_in_a_warning(fake_root, caplog, compatible, board, variant):
    fake_root.set_device_tree(None, compatible)
    with caplog.at_level(logging.WARNING, logger="jetpredict.profiler.powermode.detect"):
        assert jetson_board() == board
    assert variant in caplog.text and "does not describe" in caplog.text


def test_a_jetpack_6_2_super_device_tree_is_named_in_a_warning(fake_root, caplog):
    # An Orin Nano devkit on JetPack 6.2 (L4T r36.4): model and compatible as the board prints them.
    fake_root.set_device_tree("NVIDIA Jetson Orin Nano Engineering Reference Developer Kit Super",
                              ("nvidia,p3768-0000+p3767-0005-super", "nvidia,p3767-0005", "nvidia,tegra234"))
    with caplog.at_level(logging.WARNING, logger="jetpredict.profiler.powermode.detect"):
        assert jetson_board() == "orin-nano"
    assert "Super" in caplog.text and "JetPack 5" in caplog.text


@pytest.mark.parametrize("module", ["p2888-0001", "p2888-0004", "p2888-0005", "p3701-0000"])
def test_a_module_of_the_catalogued_compute_gets_no_warning(fake_root, caplog, module):
    carrier = "p2822-0000" if module.startswith("p2888") else "p3737-0000"
    fake_root.set_device_tree(None, (f"nvidia,{carrier}+{module}", f"nvidia,{module}"))
    with caplog.at_level(logging.WARNING, logger="jetpredict.profiler.powermode.detect"):
        assert jetson_board() in ("agx-xavier", "orin-agx")
    assert "does not describe" not in caplog.text

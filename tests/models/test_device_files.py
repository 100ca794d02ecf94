"""A catalogue file written by hand (``models/devices/<id>.toml``, README "Adding a Jetson type") is checked when it
is read: each mistake a contributor makes is one :class:`DeviceFileError` naming the file, the field and the rule,
not a Python error far from the file (a ``TypeError`` from a constructor, a ``KeyError``, a preset found missing
only when a command asks for it, a fitted model later called damaged).

Each bad file is a shipped file (Nano's) with one mistake typed into its text, written under ``tmp_path``.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from jetpredict.models import catalogue
from jetpredict.models.catalogue import DEVICES_DIR, device_ids, list_devices, load_device, load_device_file
from jetpredict.models.device_toml import DeviceFileError
from jetpredict.models.errors import InputError

NANO_TEXT = (DEVICES_DIR / "nano.toml").read_text()


def typed(old: str, new: str, text: str = NANO_TEXT) -> str:
    """``text`` with the one line (or run of lines) ``old`` changed to ``new``: a contributor's edit."""
    pattern = re.compile(old, re.MULTILINE)
    assert len(pattern.findall(text)) == 1, f"{old!r} must occur once in nano.toml"
    return pattern.sub(new, text)


def write(folder: Path, text: str, name: str = "nano") -> Path:
    path = folder / f"{name}.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("device_id", sorted(p.stem for p in DEVICES_DIR.glob("*.toml")))
def test_every_shipped_file_loads_as_the_catalogue_holds_it(device_id):
    assert load_device_file(DEVICES_DIR / f"{device_id}.toml") == load_device(device_id)


#: (the mistake: regex of nano.toml's text -> replacement, the field named, words of the rule)
MISTAKES = {
    "spec left out": (r"^cuda_cores = 128\n", "", "specs.cuda_cores", "is missing"),
    "step list left out": (r"^gpu_mhz = \[.*\]\n", "", "steps.gpu_mhz", "is missing"),
    "key misspelt": (r"^tensor_cores = 0", "tensor_core = 0", "specs.tensor_core",
                     "not a key of [specs]; did you mean 'tensor_cores'"),
    "spec as text": (r"^cuda_cores = 128", 'cuda_cores = "128"', "specs.cuda_cores", "must be a whole number"),
    "spec zero": (r"^module_power_w = 10.0", "module_power_w = 0.0", "specs.module_power_w",
                  "must be a number above 0"),
    "space size off": (r"^space_size = 5040", "space_size = 5000", "steps.space_size",
                       "5000 must equal the number of custom modes, 4 cores x 15 CPU x 12 GPU x 7 EMC steps = 5040"),
    "steps descending": (r"^emc_mhz = \[204.0, 408.0", "emc_mhz = [408.0, 204.0", "steps.emc_mhz",
                         "must rise from step to step (MHz, lowest first); 408 is followed by 204"),
    "core range past the module": (r"^cpu_cores_max = 4", "cpu_cores_max = 5", "steps.cpu_cores_max",
                                   "5 must be at most specs.cpu_cores (4)"),
    "preset with more cores than the board": (r"^cpu_cores = 2$", "cpu_cores = 8", "presets[1].cpu_cores",
                                              "preset '5W': 8 must be in steps.cpu_cores_min..cpu_cores_max (1..4)"),
    "preset cap past the steps": (r"^cpu_mhz = 918.0", "cpu_mhz = 9180.0", "presets[1].cpu_mhz",
                                  "preset '5W': cpu_mhz=9180 is outside device 'nano': must be in 102..1479 MHz"),
    "preset clock as a word": (r"^gpu_mhz = 640.0", 'gpu_mhz = "top"', "presets[1].gpu_mhz",
                               "must be a number (MHz) or \"max\""),
    "preset key misspelt": (r"^power_budget_w = 5.0", "power_budget = 5.0", "presets[1].power_budget",
                            "did you mean 'power_budget_w'"),
    "preset id twice": (r"^id = 1$", "id = 0", "presets[1].id", "0 is also the id of preset 'MAXN'"),
    "preset name twice": (r'^name = "5W"', 'name = "maxn"', "presets[1].name",
                          "'maxn' is also a preset's name (names are matched ignoring case)"),
    "unknown default preset": (r'^default_preset = "MAXN"', 'default_preset = "MAXP"', "default_preset",
                               "'MAXP' is not the name of a preset; presets: MAXN, 5W"),
    "more SMs than the GPU": (r"^power_budget_w = 5.0", "power_budget_w = 5.0\ngpu_sms_online = 2",
                              "presets[1].gpu_sms_online", "2 must be in 1..1 (specs.gpu_sms)"),
    "no presets": (r"(?s)^# NVIDIA modes.*(?=^\[sources\])", "", "presets", "is missing"),
    "id not the file's name": (r'^id = "nano"', 'id = "nano-4gb"', "id",
                               "'nano-4gb' must be the file's name, 'nano'"),
    "unknown section": (r"^\[sources\]", "[source]", "source", "not a key of the file; did you mean 'sources'"),
    "spec as a boolean": (r"^cuda_cores = 128", "cuda_cores = true", "specs.cuda_cores",
                          "True must be a whole number"),
    "core range upside down": (r"^cpu_cores_min = 1\ncpu_cores_max = 4", "cpu_cores_min = 3\ncpu_cores_max = 2",
                               "steps.cpu_cores_max", "2 must be at least 3"),
    "preset GPU steps descending": (r"^space_size = 5040", "space_size = 5040\npreset_gpu_mhz = [921.6, 76.8]",
                                    "steps.preset_gpu_mhz", "must rise from step to step"),
    "preset budget zero": (r"^power_budget_w = 5.0", "power_budget_w = 0", "presets[1].power_budget_w",
                           "preset '5W': 0 must be a number of W above 0"),
}


@pytest.mark.parametrize(("old", "new", "field", "rule"), MISTAKES.values(), ids=MISTAKES.keys())
def test_a_mistake_in_a_device_file_names_the_file_the_field_and_the_rule(tmp_path, old, new, field, rule):
    path = write(tmp_path, typed(old, new))
    with pytest.raises(DeviceFileError) as err:
        load_device_file(path)
    assert isinstance(err.value, InputError) and err.value.field == field and err.value.path == path
    assert err.value.message == f"device file {path}: {field}: {err.value.rule}"
    assert rule in err.value.rule


def test_an_id_that_cannot_be_a_url_segment_is_refused_though_it_is_the_files_name(tmp_path):
    path = write(tmp_path, typed(r'^id = "nano"', 'id = "Nano_4GB"'), "Nano_4GB")
    with pytest.raises(DeviceFileError) as err:
        load_device_file(path)
    assert err.value.field == "id" and str(path) in err.value.message
    assert "'Nano_4GB' must be lowercase letters and digits, words joined by '-'" in err.value.rule

def test_a_file_that_is_not_toml_is_named_with_the_line(tmp_path):
    path = write(tmp_path, typed(r"^cuda_cores = 128", "cuda_cores = 128 cores"))
    with pytest.raises(DeviceFileError) as err:
        load_device_file(path)
    assert err.value.field is None and str(path) in err.value.message
    assert "is not valid TOML" in err.value.message and "line 14" in err.value.message


@pytest.mark.parametrize(("text", "said"), [
    ("# 0-70 \u00b0C\n", "is not UTF-8 text (byte 0xb0"),  # a comment saved as Latin-1
    ("deep = " + "[" * 100_000 + "]" * 100_000 + "\n", "nests arrays or tables too deeply"),
])
def test_a_file_python_cannot_read_as_toml_is_named_not_a_traceback(tmp_path, text, said):
    path = write(tmp_path, NANO_TEXT)
    path.write_bytes(text.encode("latin-1") + path.read_bytes())
    with pytest.raises(DeviceFileError) as err:
        load_device_file(path)
    assert err.value.field is None and str(path) in err.value.message and said in err.value.message

# --- the folder: what list_devices and every command read ---------------------------------------------------

@pytest.fixture
def devices_dir(tmp_path, monkeypatch) -> Iterator[Path]:
    """A catalogue folder holding copies of the shipped files; the catalogue reads it until the test ends."""
    folder = tmp_path / "devices"
    shutil.copytree(DEVICES_DIR, folder)
    monkeypatch.setattr(catalogue, "DEVICES_DIR", folder)
    catalogue._load_all.cache_clear()
    yield folder
    catalogue._load_all.cache_clear()  # the next test reads the shipped folder again


def test_a_new_board_in_the_folder_is_listed_in_id_order(devices_dir):
    write(devices_dir, typed(r'^id = "nano"', 'id = "nano-2"'), "nano-2")
    assert len(list_devices()) == len(list(devices_dir.glob("*.toml")))
    # By id, as list_devices says: "nano-2.toml" sorts before "nano.toml", its id after "nano".
    assert [d.id for d in list_devices()] == device_ids() == sorted(device_ids())
    assert device_ids().index("nano-2") == device_ids().index("nano") + 1
    assert len(load_device("nano-2").modes()) == 5040


def test_a_file_claiming_another_boards_id_is_refused_not_taken_for_it(devices_dir):
    """``id = "nano"`` in tx2.toml replaced the Nano in every command, silently."""
    path = write(devices_dir, NANO_TEXT, "tx2")
    with pytest.raises(DeviceFileError) as err:
        list_devices()
    assert err.value.path == path and err.value.field == "id"
    assert "'nano' must be the file's name, 'tx2'" in err.value.message


def test_a_broken_file_stops_the_catalogue_with_its_name(devices_dir):
    path = write(devices_dir, typed(r"^cuda_cores = 128\n", ""), "nano")
    with pytest.raises(DeviceFileError, match=re.escape(f"device file {path}: specs.cuda_cores: is missing")):
        load_device("orin-agx")

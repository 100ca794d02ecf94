"""``profile --modes`` given a file that is not there says so, as ``predict`` does, not "no preset"."""

from __future__ import annotations

import pytest
from jetpredict.models.catalogue import load_device
from jetpredict.models.errors import InputError
from jetpredict.profiler.mode_lists import modes_to_profile

from jetpredict.cli import main

XAVIER = load_device("agx-xavier")


@pytest.mark.parametrize("value", ["nofile.csv", "NOFILE.JSON", "sub/modes", "./MAXN"])
def test_a_missing_modes_file_is_said_not_to_exist(tmp_path, monkeypatch, value):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match=f"--modes file {value} does not exist") as err:
        modes_to_profile(XAVIER, value)
    assert err.value.field == "modes" and "preset" not in err.value.message


def test_a_folder_given_as_modes_is_not_taken_for_a_preset(tmp_path):
    with pytest.raises(InputError, match="is not a regular file") as err:
        modes_to_profile(XAVIER, f"{tmp_path}/")
    assert err.value.field == "modes"


def test_presets_and_labels_are_still_names(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert [m.mode for m in modes_to_profile(XAVIER, "MAXN,mode_10w")] == ["MAXN", "MODE_10W"]
    with pytest.raises(InputError, match="has no preset 'NOPE'"):
        modes_to_profile(XAVIER, "NOPE")


def test_the_command_line_says_the_file_does_not_exist(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["profile", "--device", "sim:agx-xavier", "--workload", "resnet18-cifar10",
                 "--modes", "nofile.csv", "--out", "p.csv"]) == 2
    err = capsys.readouterr().err
    assert "--modes file nofile.csv does not exist" in err and "no preset" not in err
    assert not (tmp_path / "p.csv").exists()

"""``recommend --plot``: the page's picture as SVG or PNG from the command line."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from jetpredict.cli import main

pytest.importorskip("matplotlib", reason="--plot needs the [plot] extra (in [dev])")



@pytest.fixture(scope="module")
def model(resnet_cli_fit) -> Path:
    return resnet_cli_fit() / "resnet.json"


def test_svg_shows_every_mode_the_front_and_the_chosen_mode(model, tmp_path, capsys):
    out = tmp_path / "pareto.svg"
    code = main(["recommend", "--model", str(model), "--objective", "min-time", "--max-power-w", "15",
                 "--confidence", "0.999", "--format", "json", "--plot", str(out)])
    assert code == 0
    best = json.loads(capsys.readouterr().out)["best"]
    svg = out.read_text()
    ET.fromstring(svg)  # well-formed
    assert f"chosen: {best['mode']}" in svg
    assert "(99.9% upper ends)" in svg and "100%" not in svg  # the title's level, not rounded up
    assert "within the cap (" in svg and "over the cap (" in svg and "Pareto front (" in svg
    within, over = (int(svg.split(f"{k} the cap (")[1].split(" modes")[0].replace(",", "")) for k in ("within", "over"))
    assert within + over == 29232


def test_png_and_bad_extension(model, tmp_path, capsys):
    out = tmp_path / "pareto.PNG"
    assert main(["recommend", "--model", str(model), "--objective", "min-energy", "--plot", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    capsys.readouterr()
    assert main(["recommend", "--model", str(model), "--objective", "min-energy", "--plot",
                 str(tmp_path / "pareto.pdf")]) == 2
    assert "must end in .svg or .png" in capsys.readouterr().err
    assert not (tmp_path / "pareto.pdf").exists()


def test_a_plot_that_cannot_be_written_fails_as_every_out_does(model, tmp_path, capsys, monkeypatch):
    """A full disk is a failure to write (exit 1), a path that cannot take a file bad input (exit 2), as for --out."""
    import errno

    from jetpredict.predictor import plots

    def full(path, data) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    argv = ["recommend", "--model", str(model), "--objective", "min-energy", "--plot"]
    monkeypatch.setattr(plots, "write_out_file", full)
    assert main([*argv, str(tmp_path / "p.svg")]) == 1
    assert f"cannot write --plot {tmp_path / 'p.svg'}: No space left on device" in capsys.readouterr().err
    monkeypatch.undo()
    (tmp_path / "a-file").write_text("")
    assert main([*argv, str(tmp_path / "a-file" / "p.svg")]) == 2
    assert f"cannot write --plot {tmp_path / 'a-file' / 'p.svg'}:" in capsys.readouterr().err


@pytest.mark.slow
def test_without_matplotlib_the_plot_says_what_to_install(model, tmp_path):
    import subprocess
    import sys

    block = ("import importlib.abc, sys\n"
             "class B(importlib.abc.MetaPathFinder):\n"
             "    def find_spec(self, name, path=None, target=None):\n"
             "        if name.split('.')[0] == 'matplotlib':\n"
             "            raise ModuleNotFoundError(name=name)\n"
             "sys.meta_path.insert(0, B())\n"
             "from jetpredict.cli import main\n"
             "sys.exit(main(sys.argv[1:]))\n")
    out = tmp_path / "p.svg"
    proc = subprocess.run([sys.executable, "-c", block, "recommend", "--model", str(model), "--objective",
                           "min-time", "--plot", str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "pip install 'jetpredict[plot]'" in proc.stderr and not out.exists()


def test_the_presets_are_marked_and_the_compared_one_ringed(model, tmp_path, capsys):
    from jetpredict.models.catalogue import load_device

    out = tmp_path / "presets.svg"
    assert main(["recommend", "--model", str(model), "--objective", "min-time", "--max-power-w", "15",
                 "--format", "json", "--plot", str(out)]) == 0
    comparison = json.loads(capsys.readouterr().out)["preset_comparison"]
    svg = out.read_text()
    presets = load_device("agx-xavier").presets
    assert "nvpmodel presets (" in svg and f" of {len(presets)} within the cap)" in svg
    assert all(p.mode in svg for p in presets)  # each preset labelled by name
    assert comparison["preset"] and f"compared preset: {comparison['preset']}" in svg


@pytest.mark.parametrize("suffix", [".svg", ".png"])
def test_the_same_question_draws_the_same_bytes(model, tmp_path, capsys, suffix):
    """Two identical runs wrote SVGs that differed in their date and in matplotlib's random element ids
    (clip-path="url(#pc5f166d9bb)"): a script comparing outputs saw a change where there was none."""
    import matplotlib

    salt = matplotlib.rcParams["svg.hashsalt"]
    drawn = []
    for run in ("a", "b"):
        out = tmp_path / f"{run}{suffix}"
        assert main(["recommend", "--model", str(model), "--objective", "min-energy", "--plot", str(out)]) == 0
        drawn.append(out.read_bytes())
    capsys.readouterr()
    assert drawn[0] == drawn[1]
    if suffix == ".svg":
        assert b"<dc:date>" not in drawn[0] and b"clip-path=" in drawn[0]
    assert matplotlib.rcParams["svg.hashsalt"] == salt  # set for the picture only, not for the process

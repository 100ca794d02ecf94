"""Every verb that writes ``--out`` treats a missing folder alike: it creates it (``profile``, the verb a user
runs first, always did; ``predict``, ``plan`` and ``recommend`` refused it), and a folder that is a file is bad
input (exit 2) naming ``--out``."""

from __future__ import annotations

from pathlib import Path

import pytest

from jetpredict.cli import main


@pytest.fixture(scope="module")
def model(work) -> Path:
    return work / "resnet.json"


def _verbs(model: Path, out: Path) -> dict[str, list[str]]:
    return {
        "profile": ["profile", "--device", "sim:agx-xavier", "--workload", "lenet5-mnist", "--modes", "MAXN",
                    "--minibatches", "5", "--no-progress", "--out", str(out.with_suffix(".json"))],
        "fit": ["fit", "--device", "agx-xavier", "--profiles", str(model.with_name("resnet.csv")),
                "--out", str(out.with_suffix(".json"))],
        "predict": ["predict", "--model", str(model), "--presets", "--out", str(out)],
        "plan": ["plan", "--device", "agx-xavier", "--budget", "2", "--out", str(out)],
        "recommend": ["recommend", "--model", str(model), "--objective", "min-time", "--out", str(out)],
    }


@pytest.mark.parametrize("verb", ["profile", "fit", "predict", "plan", "recommend"])
def test_out_in_a_missing_folder_creates_it(model, tmp_path, verb, capsys):
    out = tmp_path / "new" / "deeper" / "answer.csv"
    assert main(_verbs(model, out)[verb]) == 0, capsys.readouterr().err
    written = [p for p in out.parent.iterdir() if not p.name.endswith(".json.json")]
    assert [p.stem for p in written] == ["answer"] and written[0].stat().st_size > 0


@pytest.mark.parametrize("verb", ["profile", "fit", "predict", "plan", "recommend"])
def test_out_under_a_file_is_bad_input_naming_out(model, tmp_path, verb, capsys):
    (tmp_path / "notes.txt").write_text("mine\n")
    out = tmp_path / "notes.txt" / "answer.csv"
    assert main(_verbs(model, out)[verb]) == 2
    assert "--out" in capsys.readouterr().err and (tmp_path / "notes.txt").read_text() == "mine\n"


def test_plot_in_a_missing_folder_creates_it(model, tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="--plot needs the [plot] extra (in [dev])")
    plot = tmp_path / "figures" / "front.svg"
    assert main(["recommend", "--model", str(model), "--objective", "min-time", "--plot", str(plot)]) == 0, \
        capsys.readouterr().err
    assert plot.read_text().lstrip().startswith("<?xml")

"""The real CLI verbs fit / predict / plan / recommend, in process and through the console script."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys

import pandas as pd
import pytest
from jetpredict.models.catalogue import load_device
from jetpredict.predictor.limits import DEFAULT_CONFIDENCE
from jetpredict.predictor.model import MODEL_VERSION
from jetpredict.predictor.service import MODE_COLUMNS, PREDICTION_COLUMNS, PROVENANCE_COLUMNS

from jetpredict.cli import main


def _csv(text: str) -> pd.DataFrame:
    assert not text.startswith("#")
    return pd.read_csv(io.StringIO(text))


def test_fit_writes_model_and_manifest(work):
    assert (work / "resnet.json").is_file() and (work / "resnet.json.json").is_file()


def test_fit_says_when_the_reference_holds_the_workloads_own_sweep(tmp_path, capsys):
    from jetpredict.models.profile_files import read_profile_csv
    from jetpredict.predictor.reference import REFERENCE_DIR

    ref = read_profile_csv(REFERENCE_DIR / "agx-xavier-published.csv")
    lenet = ref[(ref.workload == "lenet5-mnist") & ref["mode"].isin(list("efij"))]
    lenet.to_csv(tmp_path / "lenet.csv", index=False)
    assert main(["fit", "--device", "agx-xavier", "--profiles", str(tmp_path / "lenet.csv"),
                 "--out", str(tmp_path / "m.json")]) == 0
    err = capsys.readouterr().err
    assert "holds lenet5-mnist's own sweep: the prior comes from its other workloads" in err
    assert ("what the alias costs: cpu_mhz with gpu_mhz: one more mode that keeps them together leaves time "
            "intervals 1.0") in err
    others = ref[ref.workload != "lenet5-mnist"]
    others.to_csv(tmp_path / "others.csv", index=False)
    assert main(["fit", "--device", "agx-xavier", "--profiles", str(tmp_path / "lenet.csv"),
                 "--reference", str(tmp_path / "others.csv"), "--out", str(tmp_path / "m2.json")]) == 0
    assert "own sweep" not in capsys.readouterr().err
    # predict names the aliased pair for a mode inside the ranges (none flagged extrapolated) ...
    (tmp_path / "q.csv").write_text("mode,cpu_cores,cpu_mhz,gpu_mhz,emc_mhz\nq,5,2265.6,905.25,1600\n")
    assert main(["predict", "--model", str(tmp_path / "m.json"), "--modes", str(tmp_path / "q.csv")]) == 0
    err = capsys.readouterr().err
    assert "outside the profiled knob ranges" not in err and "aliased knobs" in err and "cpu_mhz" in err
    # ... and recommend says what its answer rests on, as predict does.
    assert main(["recommend", "--model", str(tmp_path / "m.json"), "--objective", "min-time"]) == 0
    assert ("from 4 profiled mode(s) on agx-xavier; reference: published, workload rows: published"
            in capsys.readouterr().err)
    assert main(["recommend", "--model", str(tmp_path / "m.json"), "--objective", "min-time",
                 "--device", "orin-nano"]) == 0
    assert "profiled mode(s) on agx-xavier (cross-device); reference: simulated" in capsys.readouterr().err


def test_predict_presets_csv_is_only_csv(work, capsys):
    assert main(["predict", "--model", str(work / "resnet.json"), "--presets", "--format", "csv"]) == 0
    out = capsys.readouterr().out
    df = _csv(out)
    assert list(df.columns[:5]) == list(MODE_COLUMNS)
    for col in (*PREDICTION_COLUMNS, *PROVENANCE_COLUMNS):
        assert col in df.columns
    assert len(df) == len(load_device("agx-xavier").presets)
    assert set(df["reference_source"]) == {"published"} and set(df["profiled_modes"]) == {4}


def test_predict_modes_file_ignores_extra_columns_and_adds_epochs(work, capsys):
    modes = work / "modes.csv"
    pd.DataFrame([{"mode": "b", "cpu_cores": 8, "cpu_mhz": 1200, "gpu_mhz": 670, "emc_mhz": 1333,
                   "epoch_time_s": 660.2, "comment": "published"}]).to_csv(modes, index=False)
    out_file = work / "pred.csv"
    assert main(["predict", "--model", str(work / "resnet.json"), "--modes", str(modes), "--epochs", "150",
                 "--format", "csv", "--out", str(out_file)]) == 0
    assert capsys.readouterr().out == ""
    df = pd.read_csv(out_file)
    assert df["mode"].tolist() == ["b"]
    assert df["time_to_accuracy_s"].iloc[0] == pytest.approx(150 * df["epoch_time_s"].iloc[0], rel=1e-5)
    assert "energy_to_accuracy_j" in df.columns


def test_predict_all_json(work, capsys):
    assert main(["predict", "--model", str(work / "resnet.json"), "--all", "--device", "orin-nano",
                 "--format", "json"]) == 0
    captured = capsys.readouterr()
    records = json.loads(captured.out)
    assert len(records) == len(load_device("orin-nano").modes())
    assert all(r["cross_device"] is True for r in records[:10])
    # Orin Nano's lowest clocks lie below the share of AGX Xavier's tops that the model was profiled at.
    flagged = sum(r["extrapolated"] for r in records)
    assert 0 < flagged < len(records)
    assert f"{flagged} mode(s) lie outside the profiled knob ranges, taken at the same share of each knob's top " \
           "(snapped inward to its steps) on orin-nano (column extrapolated_knobs): their intervals are wider (time intervals" in captured.err


def test_recommend_under_20_w_holds_for_the_upper_bound(work, capsys):
    assert main(["recommend", "--model", str(work / "resnet.json"), "--objective", "min-time",
                 "--max-power-w", "20", "--format", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["best"]["avg_power_w_high"] <= 20 and result["confidence"] == DEFAULT_CONFIDENCE
    assert main(["recommend", "--model", str(work / "resnet.json"), "--objective", "min-time",
                 "--max-power-w", "20", "--confidence", "0.99", "--format", "json"]) == 0
    strict = json.loads(capsys.readouterr().out)
    assert strict["confidence"] == 0.99 and strict["best"]["avg_power_w_high"] <= 20
    assert strict["best"]["avg_power_w"] <= result["best"]["avg_power_w"]


def test_recommend_csv_marks_best_row(work, capsys):
    assert main(["recommend", "--model", str(work / "resnet.json"), "--objective", "min-energy",
                 "--max-epoch-time-s", "500", "--format", "csv"]) == 0
    df = _csv(capsys.readouterr().out)
    assert df["role"].iloc[0] == "best" and (df["role"].iloc[1:] == "pareto").all()
    assert df["epoch_time_s"].iloc[0] <= 500


def test_recommend_out_writes_the_answer_in_the_format_of_its_extension(work, tmp_path, capsys):
    argv = ["recommend", "--model", str(work / "resnet.json"), "--objective", "min-energy",
            "--max-epoch-time-s", "500"]
    assert main([*argv, "--format", "json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert main([*argv, "--out", str(tmp_path / "best.json")]) == 0
    assert capsys.readouterr().out == "" and json.loads((tmp_path / "best.json").read_text()) == printed
    assert main([*argv, "--out", str(tmp_path / "best.csv")]) == 0
    df = pd.read_csv(tmp_path / "best.csv")
    assert df["role"].iloc[0] == "best" and df["mode"].iloc[0] == printed["best"]["mode"]
    model = (work / "resnet.json").read_bytes()
    assert main([*argv, "--out", str(work / "resnet.json")]) == 2
    assert "which --model reads" in capsys.readouterr().err and (work / "resnet.json").read_bytes() == model


def test_recommend_says_the_outside_note_only_for_a_mode_outside_the_ranges(work, capsys):
    """Mutation audit: the note was said for every recommendation and no test failed."""
    assert main(["recommend", "--model", str(work / "resnet.json"), "--objective", "min-energy",
                 "--max-epoch-time-s", "500", "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["best"]["extrapolated_knobs"] == ""
    assert "best for min-energy" in captured.err and "outside the profiled range" not in captured.err


def test_recommend_infeasible_exits_1_with_reason(work, capsys):
    assert main(["recommend", "--model", str(work / "resnet.json"), "--objective", "min-time",
                 "--max-power-w", "0.5"]) == 1
    assert "lowest upper bound of power at 90%" in capsys.readouterr().err


def test_confidence_is_printed_as_given_not_rounded_to_100_percent(work, capsys):
    """Audit 4: `:.0%` printed 0.999 as "100%", a level no interval has; every line says 99.9%."""
    model = str(work / "resnet.json")
    assert main(["recommend", "--model", model, "--objective", "min-time", "--max-power-w", "0.5",
                 "--confidence", "0.999"]) == 1
    err = capsys.readouterr().err
    assert "lowest upper bound of power at 99.9%" in err and "100%" not in err
    assert main(["recommend", "--model", model, "--objective", "min-time", "--confidence", "0.999"]) == 0
    err = capsys.readouterr().err
    assert "(99.9% intervals; caps hold for their upper ends)" in err and "100%" not in err
    assert main(["predict", "--model", model, "--presets", "--confidence", "0.999"]) == 0
    err = capsys.readouterr().err
    assert "8 mode(s), 99.9% intervals" in err and "100%" not in err
    assert main(["predict", "--model", model, "--presets"]) == 0
    assert "8 mode(s), 90% intervals" in capsys.readouterr().err


def test_confidence_out_of_range_exits_2(work, capsys):
    assert main(["recommend", "--model", str(work / "resnet.json"), "--objective", "min-time",
                 "--confidence", "90"]) == 2
    assert "confidence must be between 0.5 and 0.999" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:  # not a number: argparse's exit 2, with the flag and the rule
        main(["recommend", "--model", str(work / "resnet.json"), "--objective", "min-time", "--confidence", "90%"])
    assert exited.value.code == 2
    assert "argument --confidence: must be a number such as 0.9, got '90%'" in capsys.readouterr().err


def test_plan_csv_and_what_stays_extrapolated(work, capsys):
    assert main(["plan", "--device", "orin-nano", "--budget", "4", "--format", "csv"]) == 0
    captured = capsys.readouterr()
    df = _csv(captured.out)
    # The time estimate is a prediction of the simulated reference workloads, and says so (DESIGN.md).
    provenance = ["reference_source", "profiled_modes", "model_version", "cross_device"]
    assert list(df.columns) == [*MODE_COLUMNS, "est_profile_s", *provenance] and len(df) == 4
    assert set(df["reference_source"]) == {"simulated"} and set(df["model_version"]) == {MODEL_VERSION}
    assert (df["profiled_modes"] > 4).all() and not df["cross_device"].any()
    assert all(df[k].nunique() == 2 for k in MODE_COLUMNS[1:])
    assert "modes outside it extrapolate" in captured.err
    presets = work / "presets.csv"
    pd.DataFrame([p.as_dict() for p in load_device("agx-xavier").presets]).to_csv(presets, index=False)
    assert main(["plan", "--device", "agx-xavier", "--budget", "2", "--candidates", str(presets),
                 "--format", "csv"]) == 0
    captured = capsys.readouterr()
    assert len(_csv(captured.out)) == 2 and set(_csv(captured.out)["reference_source"]) == {"published"}
    n = len(load_device("agx-xavier").presets)
    assert f"the {n} candidate modes" in captured.err and "profiled range" in captured.err


def test_the_planning_region_is_stated_from_its_constants(capsys):
    """``plan --help`` and its run-time note give the default candidates' bounds from the one definition."""
    from jetpredict.predictor.limits import MIN_CLOCK_SHARE, MIN_CORES

    region = f"every clock >= {MIN_CLOCK_SHARE:.0%} of its maximum, >= {MIN_CORES} cores"
    with pytest.raises(SystemExit):
        main(["plan", "--help"])
    assert region in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize(("argv", "words"), [
    (["plan", "--device", "jetson-tx9", "--budget", "4"], "unknown device 'jetson-tx9'"),
    (["plan", "--device", "nano", "--budget", "0"], "--budget (modes to profile) must be a whole number between 1"),
    (["plan", "--device", "agx-xavier", "--after", "/nonexistent.csv"], "--after file /nonexistent.csv does not"),
    (["fit", "--device", "agx-xavier", "--profiles", "/nonexistent.json", "--out", "/tmp/x.json"],
     "--profiles file /nonexistent.json does not exist"),
    (["plan", "--device", "nano", "--budget", "2", "--candidates", "/nonexistent.csv"], "does not exist"),
    (["predict", "--model", "/nonexistent.json", "--presets"], "does not exist"),
])
def test_bad_input_exits_2(argv, words, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err


def test_bad_modes_file_exits_2(work, capsys):
    missing = work / "missing.csv"
    pd.DataFrame([{"mode": "x", "cpu_cores": 8, "cpu_mhz": 2000, "gpu_mhz": 900}]).to_csv(missing, index=False)
    outside = work / "outside.csv"
    pd.DataFrame([{"mode": "hot", "cpu_cores": 8, "cpu_mhz": 2000, "gpu_mhz": 2500, "emc_mhz": 1600}]).to_csv(
        outside, index=False)
    model = str(work / "resnet.json")
    assert main(["predict", "--model", model, "--modes", str(missing), "--format", "csv"]) == 2
    assert "missing column(s) emc_mhz" in capsys.readouterr().err
    assert main(["predict", "--model", model, "--modes", str(outside)]) == 2
    assert "gpu_mhz=2500 is outside device 'agx-xavier'" in capsys.readouterr().err
    nano = work / "nano.csv"
    pd.DataFrame([{"device": "nano", **load_device("nano").maxn.as_dict()}]).to_csv(nano, index=False)
    assert main(["predict", "--model", model, "--modes", str(nano)]) == 2
    assert "modes are for device 'nano'" in capsys.readouterr().err
    assert main(["predict", "--model", model, "--modes", str(nano), "--device", "nano", "--format", "csv"]) == 0
    assert _csv(capsys.readouterr().out)["cross_device"].tolist() == [True]


def test_a_bad_row_of_a_mode_file_is_named_by_its_flag_file_and_line(work, capsys):
    """Not by the service's ``modes[i]``: a CSV row by its line (blank lines counted), a JSON item by its
    index."""
    bad = work / "bad-row.csv"
    bad.write_text("mode,cpu_cores,cpu_mhz,gpu_mhz,emc_mhz\n\nok,8,2265.6,1377,2133\n"
                   "hot,8,2265.6,1377,9999\n")
    text = work / "text-knob.csv"
    text.write_text("mode,cpu_cores,cpu_mhz,gpu_mhz,emc_mhz\nfast,8,fast,1377,2133\n")
    listed = work / "bad-row.json"
    knobs = {"cpu_cores": 8, "cpu_mhz": 2265.6, "gpu_mhz": 1377, "emc_mhz": 2133}
    listed.write_text(json.dumps([{"mode": "ok", **knobs}, {"mode": "many", **knobs, "cpu_cores": 9}]))
    unlabelled = work / "unlabelled.json"  # a missing label is missing, not the label "nan"
    unlabelled.write_text(json.dumps([{"mode": "ok", **knobs}, knobs]))
    model = str(work / "resnet.json")
    outside = "emc_mhz=9999 is outside device 'agx-xavier'"
    for argv, words in [
        (["predict", "--model", model, "--modes", str(bad)], f"--modes {bad} line 4 (hot): {outside}"),
        (["predict", "--model", model, "--modes", str(text)], f"--modes {text} line 2 (fast): cpu_mhz must be a "
                                                              "number, got 'fast'"),
        (["predict", "--model", model, "--modes", str(listed)], f"--modes {listed} item 1 (many): cpu_cores=9 is outside"),
        (["predict", "--model", model, "--modes", str(unlabelled)], f"--modes {unlabelled} item 1: mode is required"),
        (["plan", "--device", "agx-xavier", "--budget", "1", "--candidates", str(bad)],
         f"--candidates {bad} line 4 (hot): {outside}"),
        (["plan", "--device", "agx-xavier", "--after", str(work / "resnet.csv"), "--candidates", str(bad)],
         f"--candidates {bad} line 4 (hot): {outside}"),
    ]:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert words in err and "modes[" not in err, err


def test_fit_rejects_too_few_rows_and_wrong_device(work, capsys):
    header_only = work / "empty.csv"
    header_only.write_text((work / "resnet.csv").read_text().splitlines()[0] + "\n")
    assert main(["fit", "--device", "agx-xavier", "--profiles", str(header_only),
                 "--out", str(work / "x.json")]) == 2
    assert "no data rows" in capsys.readouterr().err
    assert main(["fit", "--device", "nano", "--profiles", str(work / "resnet.csv"),
                 "--out", str(work / "x.json")]) == 2
    assert "does not match" in capsys.readouterr().err
    assert not (work / "x.json").exists()


@pytest.mark.slow
def test_console_script_predict_csv(work):
    exe = shutil.which("jetpredict")
    cmd = [exe] if exe else [sys.executable, "-c", "import sys; from jetpredict.cli import main; sys.exit(main())"]
    proc = subprocess.run([*cmd, "predict", "--model", str(work / "resnet.json"), "--presets",
                           "--format", "csv"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert proc.returncode == 0, proc.stderr
    df = _csv(proc.stdout)
    assert "MAXN" in set(df["mode"]) and (df["epoch_time_s"] > 0).all()


def test_fit_names_the_reference_flag_for_a_bad_reference_file(work, capsys):
    assert main(["fit", "--device", "agx-xavier", "--profiles", str(work / "resnet.csv"), "--reference",
                 "/dev/null", "--out", str(work / "ref.json")]) == 2
    err = capsys.readouterr().err
    assert "--reference /dev/null is not a regular file" in err and "--profiles" not in err
    assert not (work / "ref.json").exists()


@pytest.mark.parametrize("after", [False, True])
def test_a_huge_budget_is_refused_before_any_work_with_or_without_after(work, after, capsys, monkeypatch):
    from jetpredict.models import profile_files
    from jetpredict.predictor import planning
    from jetpredict.predictor.limits import MAX_PLAN_BUDGET

    def no_work(*args, **kwargs):
        raise AssertionError("the budget is checked before rows are read or modes planned")

    # With --after it once read, fitted and searched for hours; refused now before any of it.
    monkeypatch.setattr(profile_files, "read_profile_rows", no_work)
    monkeypatch.setattr(planning, "plan", no_work)
    argv = ["plan", "--device", "agx-xavier", "--budget", "100000000"]
    assert main([*argv, "--after", str(work / "resnet.csv")] if after else argv) == 2
    err = capsys.readouterr().err
    assert (f"--budget (modes to profile) must be a whole number between 1 and {MAX_PLAN_BUDGET}, got 100000000"
            in err)


def test_recommend_csv_without_a_feasible_mode_is_still_a_header(work, capsys):
    assert main(["recommend", "--model", str(work / "resnet.json"), "--objective", "min-time",
                 "--max-epoch-time-s", "1", "--format", "csv"]) == 1
    captured = capsys.readouterr()
    df = _csv(captured.out)
    assert df.empty and list(df.columns[:6]) == ["role", *MODE_COLUMNS]
    for col in (*PREDICTION_COLUMNS, *PROVENANCE_COLUMNS):
        assert col in df.columns
    assert "no mode meets max_epoch_time_s=1" in captured.err
    # With no row to carry them, the reason states the provenance columns (the model was fitted on 4 modes).
    assert "from 4 profiled mode(s) on agx-xavier; reference: published, workload rows: published" in captured.err
    assert main(["recommend", "--model", str(work / "resnet.json"), "--objective", "min-time", "--device", "nano",
                 "--max-epoch-time-s", "1", "--format", "csv"]) == 1
    assert "on agx-xavier (cross-device); reference: simulated" in capsys.readouterr().err
    # the same columns as a feasible answer's (with --epochs too)
    for extra in ([], ["--epochs", "3"]):
        assert main(["recommend", "--model", str(work / "resnet.json"), "--objective", "min-time",
                     "--format", "csv", *extra]) == 0
        feasible = _csv(capsys.readouterr().out).columns
        assert main(["recommend", "--model", str(work / "resnet.json"), "--objective", "min-time",
                     "--max-epoch-time-s", "1", "--format", "csv", *extra]) == 1
        assert list(_csv(capsys.readouterr().out).columns) == list(feasible)


def test_predict_table_summary_states_the_provenance(work, capsys):
    assert main(["predict", "--model", str(work / "resnet.json"), "--presets"]) == 0
    err = capsys.readouterr().err
    assert ("from 4 profiled mode(s) on agx-xavier; reference: published, workload rows: published, model mech-"
            in err)
    assert main(["predict", "--model", str(work / "resnet.json"), "--presets", "--device", "xavier-nx"]) == 0
    err = capsys.readouterr().err
    assert "resnet18-cifar10 on xavier-nx:" in err and "on agx-xavier (cross-device); reference: simulated" in err


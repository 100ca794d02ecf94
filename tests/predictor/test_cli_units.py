"""A newcomer's slips at the command line: a cap in milliwatts, rows in milliseconds, a profile CSV given as
the model; honestly named ``--epochs`` columns; tables that fit a terminal."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import pytest
from jetpredict.models.errors import InputError
from jetpredict.models.profile_files import read_profile_csv, rows_to_records, write_profile_csv
from jetpredict.models.tables import TABLE_WIDTH
from jetpredict.predictor.cli import FOR_EPOCHS

from jetpredict.cli import main


def test_a_cap_in_milliwatts_is_an_error_not_no_cap(work, capsys):
    code = main(["recommend", "--model", str(work / "resnet.json"), "--objective", "min-time",
                 "--max-power-w", "7000"])
    err = capsys.readouterr().err
    assert code == 2 and "--max-power-w 7000 W" in err and "looks like milliwatts (7 W)" in err
    # above the target device's range, though fine for the model's own device
    code = main(["recommend", "--model", str(work / "resnet.json"), "--objective", "min-time",
                 "--max-power-w", "45", "--device", "nano"])
    err = capsys.readouterr().err
    # 45 mW would be below any module: no milliwatt hint for a watt figure just over the top
    assert code == 2 and "Jetson Nano" in err and "milliwatts" not in err
    # below what any module draws no mode can meet it: an error, not an infeasible answer
    code = main(["recommend", "--model", str(work / "resnet.json"), "--objective", "min-time",
                 "--max-power-w", "0.05"])
    assert code == 2 and "below the 0.1 W any powered Jetson module draws" in capsys.readouterr().err
    assert main(["recommend", "--model", str(work / "resnet.json"), "--objective", "min-time",
                 "--max-power-w", "45"]) == 0


def test_a_cap_whose_milliwatt_reading_no_mode_meets_gets_no_milliwatt_hint(work, capsys):
    """100 on AGX Xavier read as milliwatts is 0.1 W, the floor no mode meets: refused with the device's rule
    and no hint that would send the user there."""
    code = main(["recommend", "--model", str(work / "resnet.json"), "--objective", "min-time",
                 "--max-power-w", "100"])
    err = capsys.readouterr().err
    assert code == 2 and "--max-power-w 100 W is above what a Jetson AGX Xavier" in err, err
    assert "leave the cap out for no cap" in err and "milliwatts" not in err, err


def test_rows_in_milliseconds_are_refused_with_the_unit_named(work, tmp_path, capsys):
    rows = read_profile_csv(work / "resnet.csv")
    rows["epoch_time_s"] *= 1000
    rows[["epoch_energy_j", "avg_power_w", "base_power_w", "stall_time_s", "compute_time_s"]] = float("nan")
    write_profile_csv(rows, tmp_path / "ms.csv")
    code = main(["fit", "--device", "agx-xavier", "--profiles", str(tmp_path / "ms.csv"),
                 "--out", str(tmp_path / "m.json")])
    err = capsys.readouterr().err
    assert code == 2 and "epoch_time_s looks like milliseconds" in err and "line 2" in err


@pytest.mark.parametrize("given, hint", [("resnet.csv", "fit it first: jetpredict fit"),
                                         ("modes.csv", "give it as --modes")])
def test_a_table_given_as_model_says_what_it_is(work, capsys, given, hint):
    if given == "modes.csv":
        assert main(["devices", "agx-xavier", "--format", "csv"]) == 0
        (work / given).write_text(capsys.readouterr().out)
    code = main(["predict", "--model", str(work / given), "--presets"])
    err = capsys.readouterr().err
    assert code == 2 and hint in err and "manifest" not in err


def test_epochs_columns_are_named_for_what_they_are(work, capsys):
    assert main(["predict", "--model", str(work / "resnet.json"), "--presets", "--epochs", "30",
                 "--format", "csv"]) == 0
    df = pd.read_csv(io.StringIO(capsys.readouterr().out))
    for base, name in (("epoch_time_s", "time_for_epochs_s"), ("epoch_energy_j", "energy_for_epochs_j")):
        assert df[name].to_numpy() == pytest.approx(30 * df[base].to_numpy(), rel=1e-9)
        assert (df[f"{name}_low"] <= df[name]).all() and (df[name] <= df[f"{name}_high"]).all()
    # the contract's names stay, with the same numbers, interval ends included (each end its own column,
    # not the central figure copied: mutation audit)
    for contract, name in FOR_EPOCHS.items():
        for end in ("", "_low", "_high"):
            assert df[contract + end].to_numpy() == pytest.approx(df[name + end].to_numpy(), rel=1e-12)
        assert (df[f"{name}_low"] < df[name]).all() and (df[name] < df[f"{name}_high"]).all()
    columns = list(df.columns)
    assert columns.index("time_for_epochs_s") < columns.index("time_to_accuracy_s")


@pytest.mark.parametrize("argv", [
    ["predict", "--presets", "--epochs", "30"], ["predict", "--presets"],
    ["recommend", "--objective", "min-energy", "--max-power-w", "20"],
], ids=["predict-epochs", "predict", "recommend"])
def test_tables_fit_a_terminal_and_csv_keeps_every_column(work, capsys, argv):
    assert main([argv[0], "--model", str(work / "resnet.json"), *argv[1:]]) == 0
    out = capsys.readouterr()
    widths = [len(line) for line in out.out.splitlines()]
    assert widths and max(widths) <= TABLE_WIDTH
    assert "epoch_time_s" in out.out.splitlines()[0] and "--format csv or json" in out.err
    assert main([argv[0], "--model", str(work / "resnet.json"), *argv[1:], "--format", "csv"]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert "model_version" in header and len(header) > TABLE_WIDTH


@pytest.mark.parametrize("out", ["resnet.csv", "resnet.csv.json"])
def test_fit_refuses_to_write_its_model_over_the_rows_it_reads(work, tmp_path, capsys, out):
    rows = tmp_path / "resnet.csv"
    rows.write_bytes((work / "resnet.csv").read_bytes())
    (tmp_path / "resnet.csv.json").write_text('{"raw": "the profiler sidecar"}')
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    code = main(["fit", "--device", "agx-xavier", "--profiles", str(rows), "--out", str(tmp_path / out)])
    assert code == 2 and f"would overwrite {tmp_path / out}, which --profiles reads" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # nothing written, nothing lost


def test_fit_refuses_an_out_whose_manifest_would_overwrite_the_rows_it_reads(work, tmp_path, capsys):
    """``--out rows`` writes ``rows`` and its manifest ``rows.json``: with ``--profiles rows.json`` the manifest
    would replace the measured rows (mutation audit: fit checked ``--out`` alone and no test failed)."""
    rows = tmp_path / "rows.json"
    rows.write_text(json.dumps(rows_to_records(read_profile_csv(work / "resnet.csv"))))
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    code = main(["fit", "--device", "agx-xavier", "--profiles", str(rows), "--out", str(tmp_path / "rows")])
    assert code == 2 and f"would overwrite {rows}, which --profiles reads" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # nothing written, nothing lost


@pytest.mark.parametrize("looped", ["profiles", "out"])
def test_a_symlink_loop_in_a_file_flag_is_bad_input_naming_the_flag(work, tmp_path, capsys, looped):
    """Path.resolve raises RuntimeError on a loop (Python 3.11): it was reported as a failure (exit 1)."""
    (tmp_path / "loop1.csv").symlink_to(tmp_path / "loop2.csv")
    (tmp_path / "loop2.csv").symlink_to(tmp_path / "loop1.csv")
    loop = str(tmp_path / "loop1.csv")
    paths = {"profiles": str(work / "resnet.csv"), "out": str(tmp_path / "m.json"), looped: loop}
    code = main(["fit", "--device", "agx-xavier", "--profiles", paths["profiles"], "--out", paths["out"]])
    err = capsys.readouterr().err
    assert code == 2 and f"--{looped} {loop}: too many levels of symbolic links" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loop1.csv", "loop2.csv"]  # nothing written


def test_recommend_and_predict_with_files_in_a_symlink_loop_are_bad_input(work, tmp_path, capsys):
    (tmp_path / "loop1.csv").symlink_to(tmp_path / "loop2.csv")
    (tmp_path / "loop2.csv").symlink_to(tmp_path / "loop1.csv")
    code = main(["recommend", "--model", str(work / "resnet.json"), "--objective", "min-time",
                 "--out", str(tmp_path / "loop1.csv"), "--plot", str(tmp_path / "loop2.csv")])
    err = capsys.readouterr().err
    assert code == 2 and "too many levels of symbolic links" in err, err
    code = main(["predict", "--model", str(tmp_path / "loop1.csv"), "--presets"])  # not "does not exist"
    assert code == 2 and f"--model {tmp_path / 'loop1.csv'}: too many levels" in capsys.readouterr().err


def test_a_plan_written_as_json_is_read_back_as_modes(work, tmp_path, capsys):
    plan = tmp_path / "plan.json"
    assert main(["plan", "--device", "agx-xavier", "--budget", "2", "--out", str(plan)]) == 0
    capsys.readouterr()
    assert main(["predict", "--model", str(work / "resnet.json"), "--modes", str(plan), "--format", "csv"]) == 0
    out = pd.read_csv(io.StringIO(capsys.readouterr().out), dtype={"mode": str})
    assert list(out["mode"]) == [m["mode"] for m in json.loads(plan.read_text())]
    code = main(["predict", "--model", str(work / "resnet.json"), "--modes", str(plan), "--out", str(plan)])
    assert code == 2 and "which --modes reads" in capsys.readouterr().err


def test_a_misspelt_column_is_named_when_fit_ignores_it(work, tmp_path, capsys):
    rows = read_profile_csv(work / "resnet.csv").rename(columns={"avg_power_w": "avg_pwer_w"})
    rows.to_csv(tmp_path / "typo.csv", index=False)
    assert main(["fit", "--device", "agx-xavier", "--profiles", str(tmp_path / "typo.csv"),
                 "--out", str(tmp_path / "m.json")]) == 0
    err = capsys.readouterr().err
    assert "unknown column 'avg_pwer_w'" in err and "did you mean 'avg_power_w'?" in err


def test_a_mode_file_without_a_column_and_an_empty_profile_file_are_named(work, tmp_path, capsys):
    modes = tmp_path / "m.csv"
    modes.write_text("mode,cpu_cores,cpu_mhz\nx,8,2265\n")
    assert main(["predict", "--model", str(work / "resnet.json"), "--modes", str(modes)]) == 2
    assert f"--modes {modes}: modes is missing column(s) gpu_mhz, emc_mhz" in capsys.readouterr().err
    empty = tmp_path / "e.csv"
    empty.write_text("")
    assert main(["fit", "--device", "agx-xavier", "--profiles", str(empty), "--out", str(tmp_path / "x.json")]) == 2
    assert f"1 problem(s) in {empty}: file: is empty: expected a CSV header" in capsys.readouterr().err


@pytest.fixture(scope="module")
def host_profile(tmp_path_factory):
    """``host.csv`` of one host row and its sidecar ``host.csv.json`` holding the rows as ``{"rows": [...]}``,
    as ``jetpredict profile --device host`` leaves them (the code under test reads only the rows)."""
    out = tmp_path_factory.mktemp("host") / "host.csv"
    write_profile_csv([{"device": "host", "workload": "lenet5-mnist", "mode": "custom", "cpu_cores": 8,
                        "batch_size": 2, "minibatches_per_epoch": 2, "epoch_time_s": 0.5}], out)
    Path(f"{out}.json").write_text(json.dumps({"rows": rows_to_records(read_profile_csv(out))}))
    return out


@pytest.mark.parametrize("suffix", ["", ".json"], ids=["csv", "sidecar"])
def test_a_host_profile_given_as_model_gets_fits_own_refusal(host_profile, capsys, suffix):
    """It was told 'fit it first: jetpredict fit --device DEVICE --profiles host.csv', which fit then refuses for
    host rows; the sidecar was told only that it 'has no manifest'."""
    from jetpredict.predictor.terms import check_device

    given = f"{host_profile}{suffix}"
    with pytest.raises(InputError) as refusal:  # fit's own words for host rows
        check_device(read_profile_csv(host_profile))
    code = main(["predict", "--model", given, "--presets"])
    err = capsys.readouterr().err
    assert code == 2 and f"--model {given}" in err and str(refusal.value) in err, err
    assert "fit it first" not in err and "manifest" not in err, err


def test_a_jetson_profile_sidecar_given_as_model_is_told_to_fit_it(work, tmp_path, capsys):
    rows = read_profile_csv(work / "resnet.csv")
    sidecar = tmp_path / "resnet.csv.json"
    sidecar.write_text(json.dumps({"rows": rows_to_records(rows)}))
    code = main(["predict", "--model", str(sidecar), "--presets"])
    err = capsys.readouterr().err
    assert code == 2 and f"fit it first: jetpredict fit --device agx-xavier --profiles {sidecar}" in err, err
    assert "manifest" not in err, err


@pytest.mark.parametrize("argv", [["predict", "--presets"], ["recommend", "--objective", "min-time"]],
                         ids=["predict", "recommend"])
def test_a_profile_csv_whose_rows_cannot_be_read_is_told_to_fit_it_naming_no_device(work, tmp_path, capsys, argv):
    """A profile CSV given as the model whose rows cannot be read (a byte past its header is not UTF-8): its
    header says what it is, but no row says on which device it ran, so the fit command leaves DEVICE to fill."""
    given = tmp_path / "resnet.csv"
    given.write_bytes((work / "resnet.csv").read_bytes().rstrip(b"\n") + b"\xff\n")
    code = main([argv[0], "--model", str(given), *argv[1:]])
    err = capsys.readouterr().err
    assert code == 2 and (f"--model {given} looks like a profile CSV (its header has device, workload, "
                          f"epoch_time_s); fit it first: jetpredict fit --device DEVICE --profiles {given} --out "
                          "model.json, then --model model.json") in err, err
    assert "fit refuses them" not in err and "manifest" not in err, err

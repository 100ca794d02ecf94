"""Hand-edited model and reference files (manifest recomputed) holding values no fit writes are refused at
load with an InputError naming the field and the rule: each of these loaded before and predicted wrong
numbers (narrower or wider intervals, no base power, reference power reported as measured)."""

from __future__ import annotations

import copy
import json

import pytest
from jetpredict.models.errors import InputError
from jetpredict.models.profile_files import read_profile_csv
from jetpredict.predictor.bundled import fit_workload, load_model
from jetpredict.predictor.features import POWER_TERMS
from jetpredict.predictor.model import MODEL_VERSION
from jetpredict.predictor.reference import REFERENCE_DIR
from jetpredict.predictor.serialization import MAX_MAXIMUM, MODEL_SCHEMA, model_to_dict
from model_files import assert_refused_at_load, forge

REF = read_profile_csv(REFERENCE_DIR / "agx-xavier-published.csv")
#: This version's model form, ``mech-N``: its prefix and N.
_PREFIX, _NUMBER = MODEL_VERSION.rpartition("-")[0], int(MODEL_VERSION.rpartition("-")[2])
#: The schema after this version's (a file of a newer jetpredict).
_NEXT_SCHEMA = f"{MODEL_SCHEMA.rpartition('/')[0]}/{int(MODEL_SCHEMA.rpartition('/')[2]) + 1}"


@pytest.fixture(scope="module")
def doc() -> dict:
    rows = REF[(REF.workload == "resnet18-cifar10") & REF["mode"].isin(list("efij"))]
    return model_to_dict(fit_workload(rows))


def _write(path, doc: dict, kind: str = "workload-model") -> None:
    forge(path, json.dumps(doc).encode(), kind=kind)


def _cov_edit(i: int, j: int, value: float):
    def edit(fit: dict) -> None:
        fit["cov"][i][j] = value
    return edit


def _coef_edit(i: int, value: float):
    # A negative term took time or power away: 56.3 s for a fitted 124.7 s, and power clipped to the base.
    def edit(fit: dict) -> None:
        fit["coef"][i] = value
    return edit


def _first_time_fit(d: dict) -> dict:
    return d["time_fits"][next(iter(d["time_fits"]))]


def _edits() -> list[tuple[str, object, str]]:
    """(label, edit of a document in place, what the error says after the file's name)."""
    def top(**values):
        return lambda d: d.update(values)

    def scales(**values):
        return lambda d: d["interval_scales"].update(values)

    def in_fit(where, change):
        return lambda d: change(where(d))

    def drop_power(d):
        for row in d["training_rows"]:
            row.update(avg_power_w=None, epoch_energy_j=None, base_power_w=None)
        d["has_power"] = True

    def drop_base(d):
        for row in d["training_rows"]:
            row["base_power_w"] = None

    def drop_power_term(d):
        # A power fit without its constant term, coefficient and covariance cut to match (22.32 W at MAXN
        # against 31.28 W when it loaded).
        fit = d["power_fit"]
        k = fit["terms"].index("one")
        fit["terms"].pop(k)
        fit["coef"].pop(k)
        fit["cov"] = [[v for j, v in enumerate(row) if j != k] for i, row in enumerate(fit["cov"]) if i != k]

    return [
        ("made-up model form", top(model_version="hello"), ".model_version must be mech-N with N from 1 to"),
        ("a form newer than this version", top(model_version="mech-999"), ".model_version must be mech-N"),
        ("the form after this version", top(model_version=f"{_PREFIX}-{_NUMBER + 1}"),
         f".model_version must be {_PREFIX}-N with N from 1 to {_NUMBER} (the model form a fit records), "
         f"not '{_PREFIX}-{_NUMBER + 1}'"),
        ("power flag off with power rows", top(has_power=False), ".has_power must be true: it says whether"),
        ("power flag on without power rows", drop_power, ".has_power must be false"),
        ("no base power", top(base_ratio=0), ".base_ratio must be a finite number > 0"),
        ("base ratio without base rows", drop_base, ".base_ratio must be 1 when no training row measured"),
        ("time scale 0", scales(time=0), ".interval_scales.time must be a number in 0.3..3"),
        ("energy scale 0", scales(energy=0), ".interval_scales.energy must be a number in 0.3..3"),
        ("power scale 1e3", scales(power=1e3), ".interval_scales.power must be a number in 0.3..3"),
        ("out-of-regime factor below 1", scales(extrapolation=0.5), ".interval_scales.extrapolation must be a "
                                                                    "number in 1..2.88"),
        ("negative variance of a time fit", in_fit(_first_time_fit, _cov_edit(0, 0, -1.0)),
         ".time_fits.compute.cov must have a diagonal of variances >= 0"),
        ("negative variance of the power fit", in_fit(lambda d: d["power_fit"], _cov_edit(1, 1, -1e-3)),
         ".power_fit.cov must have a diagonal of variances >= 0"),
        ("negative variance of a variant", in_fit(lambda d: d["variants"][1]["fits"]["rest"], _cov_edit(0, 0, -5.0)),
         ".variants[1].fits.rest.cov must have a diagonal of variances >= 0"),
        ("negative coefficient of a time fit", in_fit(_first_time_fit, _coef_edit(0, -200.0)),
         ".time_fits.compute.coef must hold coefficients >= 0"),
        ("negative coefficient of the power fit", in_fit(lambda d: d["power_fit"], _coef_edit(0, -50.0)),
         ".power_fit.coef must hold coefficients >= 0"),
        ("negative coefficient of a variant", in_fit(lambda d: d["variants"][1]["fits"]["rest"], _coef_edit(0, -1.0)),
         ".variants[1].fits.rest.coef must hold coefficients >= 0"),
        ("asymmetric covariance", in_fit(lambda d: d["power_fit"], _cov_edit(0, 1, 1e6)),
         ".power_fit.cov must be symmetric"),
        ("correlation beyond 1", lambda d: [_cov_edit(*ij, 1e6)(d["power_fit"]) for ij in ((0, 1), (1, 0))],
         ".power_fit.cov must have |cov[i][j]| <= sqrt(cov[i][i] * cov[j][j])"),
        ("power fit without a term", drop_power_term,
         f".power_fit.terms must be the term names {list(POWER_TERMS)}"),
        ("cross-device flag alone", top(cross_device=True), ".source_device_id must be a string when cross_device"),
        ("a source device on a model of its own device", top(source_device_id="nano"),
         ".source_device_id must be null when cross_device is false"),
        ("a made-up transfer", top(cross_device=True, source_device_id="nano", transfer_method="magic"),
         ".transfer_method must be one of ['reference-workloads', 'physics']"),
        # A newer or absent schema, a form with a suffix, a field left out: each loaded under a looser reader.
        ("a newer schema", top(schema=_NEXT_SCHEMA), f" has schema {_NEXT_SCHEMA!r}, this jetpredict reads "
                                                     f"{MODEL_SCHEMA!r}: refit it"),
        ("no schema", lambda d: d.pop("schema"), f" has schema None, this jetpredict reads {MODEL_SCHEMA!r}"),
        ("a form with a suffix", top(model_version=f"{MODEL_VERSION}x"), ".model_version must be mech-N"),
        ("time scale missing", lambda d: d["interval_scales"].pop("time"), ".interval_scales.time is missing"),
        ("a knob maximum beyond MAX_MAXIMUM", lambda d: d["maxima"].update(gpu_mhz=2 * MAX_MAXIMUM),
         f".maxima.gpu_mhz must be at most {MAX_MAXIMUM:g} (cores or MHz)"),
        ("a range nested one level deeper", lambda d: d["profiled_ranges"].update(
            cpu_cores=[d["profiled_ranges"]["cpu_cores"]]), ".profiled_ranges.cpu_cores must be a list of 2 finite"),
    ]


@pytest.mark.parametrize(("label", "edit", "message"), _edits(), ids=[e[0] for e in _edits()])
def test_an_edited_value_no_fit_writes_is_refused_naming_field_and_rule(tmp_path, doc, label, edit, message, capsys):
    bad = copy.deepcopy(doc)
    edit(bad)
    path = tmp_path / "edited.json"
    _write(path, bad)
    assert_refused_at_load(path, message, label, capsys)


@pytest.mark.parametrize("base_ratio", [1e-300, "2% high"])
def test_a_base_ratio_other_than_the_rows_give_is_refused(tmp_path, doc, base_ratio, capsys):
    """The ratio is the fit's arithmetic on the training rows' base readings and ``base_coef``: a vanishing
    one dropped the base power from every prediction, a nudged one moved it."""
    fitted = doc["base_ratio"]
    assert fitted != 1.0  # the rows measured base power
    _write(tmp_path / "m.json", {**doc, "base_ratio": fitted * 1.02 if base_ratio == "2% high" else base_ratio})
    assert_refused_at_load(tmp_path / "m.json", f".base_ratio must be {fitted!r}, the ratio the training rows' "
                                                f"base_power_w and base_coef give", str(base_ratio), capsys)


def test_the_unedited_document_and_older_forms_still_load(tmp_path, doc):
    """The rules refuse edits only: the fitted document loads, as do the forms of earlier releases."""
    for version in ("mech-1", "mech-14", doc["model_version"]):
        _write(tmp_path / "m.json", {**doc, "model_version": version})
        assert load_model(tmp_path / "m.json").model_version == version


def test_a_profile_file_at_the_column_limit_fits_into_a_model_that_loads(tmp_path):
    """A file of MAX_COLUMNS columns (a few fields, the rest a user's own) is read; its fitted model's
    training rows carry every field besides, and must load back (they were refused, counted as the file)."""
    import csv

    from jetpredict.models.reader_limits import MAX_COLUMNS

    from jetpredict.cli import main

    with open(REFERENCE_DIR / "agx-xavier-published.csv") as f:
        published = [r for r in csv.DictReader(f) if r["workload"] == "resnet18-cifar10"][:4]
    keep = ["device", "workload", "mode", "cpu_cores", "cpu_mhz", "gpu_mhz", "emc_mhz", "batch_size",
            "minibatches_per_epoch", "epoch_time_s", "avg_power_w"]
    notes = [f"note{j}" for j in range(MAX_COLUMNS - len(keep))]
    with open(tmp_path / "p.csv", "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(keep + notes)
        out.writerows([[r[k] for k in keep] + ["x"] * len(notes) for r in published])
    assert main(["fit", "--device", "agx-xavier", "--profiles", str(tmp_path / "p.csv"), "--out",
                 str(tmp_path / "m.json")]) == 0
    assert load_model(tmp_path / "m.json").profiled_modes == 4


def test_training_rows_with_a_different_key_each_are_refused_naming_the_limit(tmp_path, doc, capsys):
    """The table of a model's training rows is rows x distinct columns: rows of a key each (30,000 x 30,000
    took 12 GB) are refused before it is built, as a profile file's rows are."""
    from jetpredict.models.profile_rows import COLUMNS
    from jetpredict.models.reader_limits import MAX_COLUMNS
    from jetpredict.predictor.terms import ProfileArrays

    most = MAX_COLUMNS + len(COLUMNS)  # what a profile file may hold, and every field a checked row carries
    rows = doc["training_rows"]
    spread = [{**rows[i % len(rows)], f"k{i}": 1} for i in range(most)]
    with pytest.raises(InputError, match=f"more than {most} distinct columns") as e:
        ProfileArrays.from_records(spread)
    assert e.value.field == "model" and "training_rows" in e.value.message
    _write(tmp_path / "m.json", {**doc, "training_rows": spread})
    with pytest.raises(InputError, match=f"training_rows hold more than {most} distinct columns"):
        load_model(tmp_path / "m.json")
    from jetpredict.cli import main

    assert main(["predict", "--model", str(tmp_path / "m.json"), "--presets"]) == 2
    err = capsys.readouterr().err
    assert f"more than {most} distinct columns" in err and "Traceback" not in err
    assert len(ProfileArrays.from_records(spread[:MAX_COLUMNS - len(set().union(*rows))])) == len(rows)


@pytest.mark.parametrize("cut", ["last digit", "first 16 digits"])
def test_a_manifest_sha256_equal_only_in_part_is_refused(tmp_path, doc, cut, capsys):
    """The whole SHA-256 is compared: a manifest whose digest differs in its last hex digit, or holds only
    its first 16, describes other bytes."""
    from jetpredict.predictor.artifacts import manifest_path

    path, manifest = _saved(tmp_path, doc)
    digest = manifest["sha256"]
    forged = digest[:-1] + ("1" if digest[-1] == "0" else "0") if cut == "last digit" else digest[:16]
    manifest_path(path).write_text(json.dumps({**manifest, "sha256": forged}))
    assert_refused_at_load(path, " does not match its manifest: the file was changed or corrupted", cut, capsys)


# -- a model relabelled to another device or workload ------------------------------------------------------
def _saved(tmp_path, doc: dict) -> tuple:
    """The fitted document saved as ``save_model`` writes it: (path, its manifest as a dict)."""
    from jetpredict.predictor.artifacts import manifest_path
    from jetpredict.predictor.bundled import save_model
    from jetpredict.predictor.serialization import model_from_dict

    path = tmp_path / "m.json"
    save_model(model_from_dict(doc), path)
    return path, json.loads(manifest_path(path).read_text())


@pytest.mark.parametrize(("key", "value", "body_key"), [
    ("device_id", "orin-nano", "device"), ("workload_id", "lenet5-mnist", "workload_id"),
    ("schema", "jetpredict-model/99", "schema")])
def test_a_manifest_that_disagrees_with_its_model_file_is_refused(tmp_path, doc, key, value, body_key, capsys):
    """The manifest describes its file: one naming another device, workload or schema than the file holds
    was ignored (the file loaded and predicted under its own labels)."""
    path, manifest = _saved(tmp_path, doc)
    forge(path, json.dumps(doc).encode(), manifest={**manifest, key: value})
    assert_refused_at_load(path, f": its manifest m.json.json has {key} {value!r} but the file has {body_key} "
                                 f"{doc[body_key]!r}: they must be equal", key, capsys)


def test_a_model_relabelled_to_another_device_is_refused(tmp_path, doc, capsys):
    """The auditor's file: an agx-xavier fit whose ``device`` was edited to orin-nano (SHA-256 recomputed)
    predicted Orin Nano's presets as its own device (cross_device false) from Xavier's rows. With its
    manifest left as written, the manifest names the edit; relabelled too, the training rows do."""
    path, manifest = _saved(tmp_path, doc)
    relabelled = {**doc, "device": "orin-nano"}
    forge(path, json.dumps(relabelled).encode(), manifest=manifest)
    assert_refused_at_load(path, ": its manifest m.json.json has device_id 'agx-xavier' but the file has device "
                                 "'orin-nano'", "manifest kept", capsys)
    forge(path, json.dumps(relabelled).encode(), manifest={**manifest, "device_id": "orin-nano"})
    assert_refused_at_load(path, ".training_rows[0].device must be 'orin-nano' (the model's device, where its "
                                 "rows ran), not 'agx-xavier'", "manifest relabelled", capsys)


def test_training_rows_relabelled_with_their_model_are_refused(tmp_path, doc, capsys):
    """Rows relabelled with their model still hold their device's knobs: Xavier's 8 cores are beyond Orin
    Nano's 6, so no fit on Orin Nano wrote them."""
    rows = [{**row, "device": "orin-nano"} for row in doc["training_rows"]]
    _write(tmp_path / "d.json", {**doc, "device": "orin-nano", "training_rows": rows})
    assert_refused_at_load(tmp_path / "d.json", ".training_rows.cpu_cores must lie in the knob ranges of "
                                                "'orin-nano', where the rows ran (a fit there refuses others): "
                                                "cpu_cores=8 is outside device 'orin-nano': must be in 1..6",
                           "rows relabelled", capsys)


def test_a_moved_model_holds_its_source_devices_rows(tmp_path, doc, capsys):
    """A cross-device model keeps the rows of the device it was moved from (``source_device_id``): it loads,
    and naming another source is refused."""
    from jetpredict.models.catalogue import load_device
    from jetpredict.predictor.bundled import on_device, save_model
    from jetpredict.predictor.serialization import model_from_dict

    save_model(on_device(model_from_dict(doc), load_device("nano")), tmp_path / "m.json")
    moved = load_model(tmp_path / "m.json")
    assert moved.cross_device and moved.device_id == "nano" and moved.source_device_id == "agx-xavier"
    body = json.loads((tmp_path / "m.json").read_text())
    _write(tmp_path / "s.json", {**body, "source_device_id": "xavier-nx"})
    assert_refused_at_load(tmp_path / "s.json", ".training_rows[0].device must be 'xavier-nx' (the model's "
                                                "source_device_id, where its rows ran), not 'agx-xavier'",
                           "source relabelled", capsys)


@pytest.mark.parametrize("point", ["epoch_time_s", "avg_power_w", "epoch_energy_j"])
def test_a_lower_bound_above_its_point_is_refused_as_damage(tmp_path, doc, point, monkeypatch, capsys):
    """Load refuses a model whose predictions on the probe modes put a lower bound above its point (the
    upper bound still above both). No edit of a file's numbers reaches this rule: predict takes every lower
    bound as max(point x e^-half, a floor at most the point), so the real fitted model's predict is wrapped
    to lift that one bound to 1.5x the point and the upper to 2x."""
    from dataclasses import replace

    from jetpredict.predictor.model import WorkloadModel

    fitted = WorkloadModel.predict

    def lifted(self, *args, **kwargs):
        pred = fitted(self, *args, **kwargs)
        mid = getattr(pred, point)
        return replace(pred, **{f"{point}_low": mid * 1.5, f"{point}_high": mid * 2.0})

    path, _ = _saved(tmp_path, doc)
    monkeypatch.setattr(WorkloadModel, "predict", lifted)
    assert_refused_at_load(path, f": it predicts {point} = ", point, capsys)

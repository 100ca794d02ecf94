"""Model files and bundled artifacts are JSON data: manifests, SHA-256, schema checks, refit on mismatch,
and nothing in a file is ever executed (pickles are refused)."""

from __future__ import annotations

import json
import os
import pickle
import re
import subprocess
import sys
import threading
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from jetpredict.models.catalogue import SAME_CLOCK_REL, ModeArrays
from jetpredict.models.errors import InputError
from jetpredict.models.profile_files import read_profile_csv
from jetpredict.predictor import artifacts, bundled, reference
from jetpredict.predictor.bundled import fit_workload, load_model, save_model
from jetpredict.predictor.features import POWER_TERMS
from jetpredict.predictor.reference import REFERENCE_DIR, build_reference
from jetpredict.predictor.serialization import MAX_TRAINING_ROWS, MODEL_SCHEMA, model_from_dict, model_to_dict
from model_files import assert_refused_at_load, forge

from tools.build_bundled import build_all

REF = read_profile_csv(REFERENCE_DIR / "agx-xavier-published.csv")
MODES = ModeArrays([8, 4, 2], [2265.6, 1200, 1500], [1377, 670, 420.75], [2133, 1333, 800])


@pytest.fixture(scope="module")
def model():
    rows = REF[(REF.workload == "resnet18-cifar10") & REF["mode"].isin(list("efij"))]
    return fit_workload(rows)


def test_save_and_load_round_trip_is_json_with_a_manifest(tmp_path, model):
    path = tmp_path / "resnet.joblib"  # `fit --out` keeps the path it is given; the content is JSON
    save_model(model, path)
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert doc["schema"] == MODEL_SCHEMA and doc["workload_id"] == "resnet18-cifar10"
    manifest = json.loads((tmp_path / "resnet.joblib.json").read_text())
    assert manifest["sha256"] == artifacts.file_sha256(path) and manifest["format"] == artifacts.FORMAT
    assert manifest["kind"] == "workload-model" and manifest["schema"] == MODEL_SCHEMA
    loaded = load_model(path)
    a, b = model.predict(MODES), loaded.predict(MODES)
    for key in ("epoch_time_s", "epoch_time_s_low", "epoch_time_s_high", "avg_power_w_high", "epoch_energy_j_low"):
        np.testing.assert_allclose(getattr(a, key), getattr(b, key), rtol=1e-12)
    assert loaded.training_rows == model.training_rows and loaded.profiled_ranges == model.profiled_ranges
    assert model_to_dict(loaded) == model_to_dict(model)


def test_cross_device_model_round_trips(tmp_path, model):
    from jetpredict.models.catalogue import load_device

    nano = load_device("nano")
    moved = bundled.on_device(model, nano)
    save_model(moved, tmp_path / "m.json")
    loaded = load_model(tmp_path / "m.json")
    assert loaded.cross_device and loaded.device_id == "nano" and loaded.profiled_ranges == moved.profiled_ranges
    knobs = ModeArrays(*nano.maxn.knobs())
    np.testing.assert_allclose(loaded.predict(knobs).epoch_time_s_high, moved.predict(knobs).epoch_time_s_high)


def test_tampered_or_foreign_model_file_is_refused(tmp_path, model):
    path = tmp_path / "m.json"
    save_model(model, path)
    data = bytearray(path.read_bytes())
    data[-5] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(InputError, match="SHA-256"):
        load_model(path)
    save_model(model, path)
    mpath = tmp_path / "m.json.json"
    manifest = json.loads(mpath.read_text())
    mpath.write_text(json.dumps({**manifest, "kind": "device-reference"}))
    with pytest.raises(InputError, match="expected a 'workload-model'"):
        load_model(path)
    mpath.unlink()
    with pytest.raises(InputError, match="no manifest"):
        load_model(path)
    with pytest.raises(InputError, match="does not exist"):
        load_model(tmp_path / "missing.json")


def test_a_model_path_that_is_a_fifo_is_refused_not_read(tmp_path, model):
    """Reading a FIFO waits for a writer that may never come: a saved model replaced by one (its manifest
    kept) is refused from its stat. The load runs in a thread so that a read that blocks fails the test
    after 5 s instead of hanging it; the FIFO is then opened for writing so the read ends."""
    path = tmp_path / "m.json"
    save_model(model, path)
    path.unlink()
    os.mkfifo(path)
    errors: list[InputError] = []

    def load() -> None:
        try:
            load_model(path)
        except InputError as exc:
            errors.append(exc)

    reader = threading.Thread(target=load, daemon=True)
    reader.start()
    reader.join(5)
    if reader.is_alive():
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))  # a writer that closes: the read gets EOF
        reader.join(5)
        pytest.fail(f"loading the FIFO {path} blocked instead of refusing it")
    assert [(e.field, e.message) for e in errors] == [("model", f"model file {path} is not a regular file")]


@pytest.mark.parametrize(("text", "said"), [
    ('{"schema": ' + "9" * 5000 + "}", "Exceeds the limit (4300 digits)"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ('{"schema": "jetpredict-model/1",', "Expecting property name enclosed in double quotes: line 1 column 33"),
])
def test_a_model_file_that_json_cannot_read_says_why(tmp_path, text, said, capsys):
    """With the manifest matching, a body Python's JSON reader refuses is named with its reason."""
    path = tmp_path / "m.json"
    forge(path, text.encode())
    assert_refused_at_load(path, f" is not a JSON model file ({said}", said, capsys)


@pytest.mark.parametrize("key", ["device_id", "workload_id"])
def test_a_model_manifest_without_its_device_or_workload_is_refused_naming_the_field(tmp_path, model, key,
                                                                                    capsys):
    """save_model states both in every manifest; one without either was written by hand, so the check that
    the pair belongs together (artifacts.MANIFEST_MATCHES) would be skipped: refused, saying how to refit."""
    path = tmp_path / "m.json"
    save_model(model, path)
    mpath = artifacts.manifest_path(path)
    mpath.write_text(json.dumps({k: v for k, v in json.loads(mpath.read_text()).items() if k != key}))
    assert_refused_at_load(path, f": its manifest m.json.json must state {key}", key, capsys)
    with pytest.raises(InputError, match=re.escape(artifacts.REFIT_HINT)):
        load_model(path)


def test_a_reference_manifest_must_state_its_device_and_states_no_workload(tmp_path):
    """A reference spans workloads: its manifest has no workload_id (the bundled ones were written so) and
    loads; one without its device_id is refused (a warning, and the reference refitted in memory)."""
    ref = replace(build_reference(REF), training_sha256=artifacts.file_sha256(REFERENCE_DIR / "agx-xavier-published.csv"))
    path = bundled.save_bundled_reference(ref, tmp_path)
    mpath = artifacts.manifest_path(path)
    manifest = json.loads(mpath.read_text())
    assert "workload_id" not in manifest and "workload_id" not in json.loads(path.read_text())
    assert bundled.load_bundled_reference("agx-xavier", tmp_path) is not None
    mpath.write_text(json.dumps({k: v for k, v in manifest.items() if k != "device_id"}))
    with pytest.warns(RuntimeWarning, match="manifest agx-xavier-reference.json.json must state device_id.*"
                                            "refitting it in memory"):
        assert bundled.load_bundled_reference("agx-xavier", tmp_path) is None


@pytest.mark.parametrize("data", [
    b"", b"\x00\xff" * 1000, bytes(range(256)) * 40, b'{"schema": "jetpredict-model/3"', b"[1, 2, 3]",
    b"{" * 100_000, b'{"schema": "jetpredict-model/1"}', b'{"schema": "jetpredict-model/3"}',
    b'{"schema": "jetpredict-model/3", "device": "tx9"}'])
def test_random_or_truncated_bytes_with_a_forged_manifest_give_a_clean_error(tmp_path, data):
    path = tmp_path / "forged.json"
    forge(path, data)
    with pytest.raises(InputError) as e:
        load_model(path)
    assert e.value.field == "model"


def test_a_valid_document_with_corrupt_fields_gives_a_clean_error(tmp_path, model):
    doc = model_to_dict(model)
    bad_docs = []
    for key, value in (("time_fits", {"compute": doc["time_fits"]["compute"]}), ("base_coef", [1.0, "x", 0, 0]),
                       ("profiled_ranges", {"cpu_cores": [2, 8]}), ("device", "tx9"), ("num_workers", -1),
                       ("power_fit", {**doc["power_fit"], "terms": ["gpu", "os.system", "cpu", "one"]}),
                       ("variants", [{"kappa_cpu": 1, "kappa_pipe": 1, "fits": {"total": {"terms": ["gpu"]}}}])):
        bad_docs.append({**doc, key: value})
    cov = doc["time_fits"]["compute"]["cov"]
    bad_docs.append({**doc, "time_fits": {**doc["time_fits"], "compute": {**doc["time_fits"]["compute"],
                                                                          "cov": cov[:-1]}}})
    for i, bad in enumerate(bad_docs):
        path = tmp_path / f"bad{i}.json"
        forge(path, json.dumps(bad).encode())
        with pytest.raises(InputError):
            load_model(path)


#: A JSON integer beyond float range: json.loads reads it as a Python int, which float() overflows.
BEYOND = 10**400


def _first_fit(doc: dict, **values) -> dict:
    """``doc`` with its first time fit's fields replaced by ``values``."""
    name = next(iter(doc["time_fits"]))
    return {**doc, "time_fits": {**doc["time_fits"], name: {**doc["time_fits"][name], **values}}}


def _coef(doc: dict, value: object) -> dict:
    return _first_fit(doc, coef=[value] * len(next(iter(doc["time_fits"].values()))["coef"]))


#: (label, edit): documents whose shapes and types are right but whose numbers make no physical sense.
NUMBER_EDITS = [
    ("zero maxima", lambda d: {**d, "maxima": dict.fromkeys(d["maxima"], 0)}),
    ("denormal maximum", lambda d: {**d, "maxima": {**d["maxima"], "gpu_mhz": 5e-324}}),
    ("huge interval scales", lambda d: {**d, "interval_scales": dict.fromkeys(d["interval_scales"], 1e300)}),
    ("huge coefficients", lambda d: _coef(d, 1e300)),
    ("negative coefficients", lambda d: _coef(d, -1e3)),
    ("huge kappa", lambda d: {**d, "kappa_cpu": 1e308, "kappa_pipe": 1e308}),
    ("rows of lists", lambda d: {**d, "training_rows": [{"source": ["x"]}]}),
    ("base power 1e300", lambda d: {**d, "base_coef": [1e300] * len(d["base_coef"])}),
    ("10**400 workers", lambda d: {**d, "num_workers": BEYOND}),
    ("10**400 coefficients", lambda d: _coef(d, BEYOND)),
    ("10**400 maximum", lambda d: {**d, "maxima": {**d["maxima"], "gpu_mhz": BEYOND}}),
    ("10**400 profiled range", lambda d: {**d, "profiled_ranges": {**d["profiled_ranges"], "gpu_mhz": [1, BEYOND]}}),
    ("10**400 profiled modes", lambda d: {**d, "profiled_modes": BEYOND}),
    ("10**400 complexity", lambda d: {**d, "complexity": {**d["complexity"], "flops_train": BEYOND}}),
    ("10**400 training row", lambda d: {**d, "training_rows": [{**d["training_rows"][0], "epoch_time_s": BEYOND},
                                                               *d["training_rows"][1:]]}),
]


@pytest.mark.parametrize(("label", "edit"), NUMBER_EDITS, ids=[label for label, _ in NUMBER_EDITS])
def test_edited_numbers_with_a_recomputed_manifest_never_reach_predict(tmp_path, model, label, edit, capsys):
    """Issue 19: numbers edited in a model file (and its SHA-256 recomputed) are an InputError at load,
    and `jetpredict predict` exits 2 with a message, never a traceback or infinite/negative times."""
    path = tmp_path / "edited.json"
    forge(path, json.dumps(edit(model_to_dict(model))).encode())
    assert_refused_at_load(path, "", label, capsys)


def _without_gpu_clock(row: dict) -> dict:
    return {k: v for k, v in row.items() if k != "gpu_mhz"}


def _rows(doc: dict, rows: list) -> dict:
    return {**doc, "training_rows": rows}


#: (label, edit, what the error must say after the file's name) for provenance no fit writes.
PROVENANCE_EDITS = [
    ("unknown reference source", lambda d: {**d, "reference_source": "xyz"},
     lambda d: ".reference_source must be one of published, measured, simulated"),
    ("no profiled modes", lambda d: {**d, "profiled_modes": 0},
     lambda d: f".profiled_modes must be the number of distinct modes in training_rows ({d['profiled_modes']}), not 0"),
    ("one mode too many", lambda d: {**d, "profiled_modes": d["profiled_modes"] + 1},
     lambda d: ".profiled_modes must be the number of distinct modes in training_rows"),
    ("no training rows", lambda d: _rows(d, []), lambda d: ".training_rows must be a list of 1 to"),
    ("made-up row source",
     lambda d: _rows(d, [{**d["training_rows"][0], "source": "totally-made-up"}, *d["training_rows"][1:]]),
     lambda d: ".training_rows[0].source must start with one of published, measured, simulated"),
    ("numeric row source", lambda d: _rows(d, [*d["training_rows"][:-1], {**d["training_rows"][-1], "source": 7}]),
     lambda d: f".training_rows[{len(d['training_rows']) - 1}].source must start with one of"),
    ("row without a knob",
     lambda d: _rows(d, [_without_gpu_clock(d["training_rows"][0]), *d["training_rows"][1:]]),
     lambda d: ".training_rows[0].gpu_mhz must be a positive number"),
]


@pytest.mark.parametrize(("label", "edit", "message"), PROVENANCE_EDITS, ids=[e[0] for e in PROVENANCE_EDITS])
def test_edited_provenance_is_refused_naming_the_field_and_rule(tmp_path, model, label, edit, message, capsys):
    """Provenance a fit never writes (an unknown reference source, a profiled-mode count other than the
    rows', no rows, a row source no kind starts) is an InputError at load, and `predict` exits 2 with it."""
    doc = model_to_dict(model)
    path = tmp_path / "edited.json"
    forge(path, json.dumps(edit(doc)).encode())
    assert_refused_at_load(path, message(doc), label, capsys)


def test_profiled_modes_are_counted_on_load_as_the_fit_counts_them(tmp_path):
    """Repeated rows are one mode, and clocks equal within SAME_CLOCK_REL one setting, on load as in the
    fit; row sources the readers know (none, ``simulated: ...``, ``published: ...``) load."""
    rows = REF[(REF.workload == "resnet18-cifar10") & REF["mode"].isin(list("efij"))]
    repeated = pd.concat([rows, rows.assign(source=None)], ignore_index=True)
    fitted = fit_workload(repeated)
    assert fitted.profiled_modes == 4 and len(fitted.training_rows) == 8
    save_model(fitted, tmp_path / "m.json")
    assert load_model(tmp_path / "m.json").profiled_modes == 4
    doc = model_to_dict(fitted)
    # Without its base reading an added row leaves the base-power ratio the file holds as the rows give it.
    first = {**doc["training_rows"][0], "base_power_w": None}
    nudged = {**first, "gpu_mhz": first["gpu_mhz"] * (1 + SAME_CLOCK_REL / 2), "source": "simulated: a twin"}
    assert model_from_dict({**doc, "training_rows": [*doc["training_rows"], nudged]}).profiled_modes == 4
    apart = {**first, "gpu_mhz": first["gpu_mhz"] * (1 + 3 * SAME_CLOCK_REL)}
    with pytest.raises(InputError, match=r"distinct modes in training_rows \(5\), not 4"):
        model_from_dict({**doc, "training_rows": [*doc["training_rows"], apart]})


def _file_state(path: Path) -> tuple[bytes | None, bytes | None]:
    """The bytes of a model file and of its manifest (None where absent)."""
    return tuple(p.read_bytes() if p.exists() else None for p in (path, artifacts.manifest_path(path)))


def test_save_refuses_more_training_rows_than_load_reads_and_keeps_the_old_file(tmp_path, model):
    """Issue (audit 1): fit wrote files of up to 200,000 rows that load refused above MAX_TRAINING_ROWS."""
    path = tmp_path / "m.json"
    save_model(model, path)
    before = _file_state(path)
    many = replace(model, training_rows=model.training_rows * (MAX_TRAINING_ROWS // len(model.training_rows) + 1))
    with pytest.raises(InputError, match=f"at most {MAX_TRAINING_ROWS:,} .MAX_TRAINING_ROWS.") as e:
        save_model(many, path)
    assert e.value.field == "training_rows" and "merge repeated rows" in e.value.message
    assert _file_state(path) == before and load_model(path).training_rows == model.training_rows
    with pytest.raises(InputError):
        save_model(many, tmp_path / "new" / "m.json")
    assert not (tmp_path / "new").exists()


def test_save_refuses_a_file_larger_than_load_reads_and_keeps_the_old_file(tmp_path, model, monkeypatch):
    """The writer checks the reader's MAX_ARTIFACT_BYTES (the same constant) before writing anything."""
    path = tmp_path / "m.json"
    save_model(model, path)
    before = _file_state(path)
    monkeypatch.setattr(artifacts, "MAX_ARTIFACT_BYTES", len(before[0]) - 1)
    with pytest.raises(InputError, match="MAX_ARTIFACT_BYTES") as e:
        save_model(model, path)
    assert "fewer profile rows" in e.value.message and _file_state(path) == before
    with pytest.raises(InputError, match="larger than"):  # what the loader says of such a file
        load_model(path)
    monkeypatch.undo()
    assert load_model(path).training_rows == model.training_rows


def test_save_refuses_a_real_model_file_over_the_byte_limit(tmp_path, model):
    """At full size: 70,000 rows (under MAX_TRAINING_ROWS) make a ~40 MB document, over 32 MiB."""
    many = replace(model, training_rows=model.training_rows * (70_000 // len(model.training_rows)))
    path = tmp_path / "m.json"
    with pytest.raises(InputError, match="MAX_ARTIFACT_BYTES"):
        save_model(many, path)
    assert _file_state(path) == (None, None)


def test_save_refuses_a_model_load_would_refuse(tmp_path, model):
    """Any rule of the reader holds for what is written: a 1,001-character workload id is refused."""
    path = tmp_path / "m.json"
    with pytest.raises(InputError, match="cannot be read back: model.workload_id must be a string"):
        save_model(replace(model, workload_id="w" * 1001), path)
    assert _file_state(path) == (None, None)


def _set_reference(*keys, value):
    """An edit of a reference document that sets the value at ``keys`` (object keys, list indexes)."""
    def edit(doc: dict) -> None:
        for key in keys[:-1]:
            doc = doc[key]
        doc[keys[-1]] = value
    return edit


#: (edit of a reference document in place, what the warning says of the field).
REFERENCE_EDITS = [
    (_set_reference("kappa_cpu", value=BEYOND), "kappa_cpu must "),
    (_set_reference("anchor", value=[BEYOND, 1, 1, 1]), "anchor must "),
    (_set_reference("power_mean", value=[BEYOND] * 3), "power_mean must "),
    (_set_reference("source", value="xyz"), "source must "),
    (_set_reference("power_sd", 0, value=-1.0), "power_sd must hold standard deviations >= 0"),
    (_set_reference("shape", "sd", "total", 0, value=-0.5), "sd.total must hold standard deviations >= 0"),
    (_set_reference("power_mean", 1, value=float("nan")),
     f"power_mean must be a list of {len(POWER_TERMS)} finite numbers"),
    (_set_reference("workload_shapes", "lenet5-mnist", "rest", value=[0.1]),
     "lenet5-mnist.rest must be a list of 3 finite numbers"),
]


@pytest.mark.parametrize(("edit", "said"), REFERENCE_EDITS, ids=[said.split()[0] for _, said in REFERENCE_EDITS])
def test_bundled_reference_with_an_edited_number_or_source_is_refit_with_a_warning(tmp_path, edit, said):
    """A bundled reference holding 10**400, a made-up source or a negative SD (manifest recomputed) is an
    InputError, which the loader turns into a warning and an in-memory refit, never an OverflowError."""
    ref = replace(build_reference(REF), training_sha256=artifacts.file_sha256(REFERENCE_DIR / "agx-xavier-published.csv"))
    path = bundled.save_bundled_reference(ref, tmp_path)
    doc = json.loads(path.read_text())
    edit(doc)
    forge(path, json.dumps(doc).encode(), kind="device-reference")
    with pytest.warns(RuntimeWarning, match=rf"{re.escape(said)}.*refitting it in memory"):
        assert bundled.load_bundled_reference("agx-xavier", tmp_path) is None


class _Payload:
    """A pickle that, when unpickled, writes a marker file (what an attacker's model file would run)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (self.marker, "pwned"))


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["jetpredict-artifact/1", artifacts.FORMAT])
def test_forged_pickle_runs_nothing_and_exits_2(tmp_path, fmt):
    """Issue 13: a pickle with a recomputed manifest, given to `jetpredict predict --model`, runs nothing."""
    marker = tmp_path / "marker"
    path = tmp_path / "evil.joblib"
    forge(path, pickle.dumps(_Payload(marker)), fmt)
    proc = subprocess.run([sys.executable, "-m", "jetpredict", "predict", "--model", str(path), "--presets"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert not marker.exists()
    assert "refit it" in proc.stderr and "Traceback" not in proc.stderr
    if fmt == "jetpredict-artifact/1":
        assert "pickled model file of an older jetpredict" in proc.stderr


def test_bundled_reference_mismatch_refits_with_warning(tmp_path):
    ref = replace(build_reference(REF), training_sha256=artifacts.file_sha256(REFERENCE_DIR / "agx-xavier-published.csv"))
    bundled.save_bundled_reference(ref, tmp_path)
    loaded = bundled.load_bundled_reference("agx-xavier", tmp_path)
    assert loaded is not None and loaded.kappa_cpu == ref.kappa_cpu
    np.testing.assert_allclose(loaded.shape.mean["compute"], ref.shape.mean["compute"])
    stale = build_reference(REF)  # fingerprint of other data than the bundled CSV's bytes
    bundled.save_bundled_reference(stale, tmp_path / "stale")
    with pytest.warns(RuntimeWarning, match="other reference sweeps"):
        assert bundled.load_bundled_reference("agx-xavier", tmp_path / "stale") is None
    path = bundled.bundled_reference_path("agx-xavier", tmp_path)
    doc = json.loads(path.read_text())
    forge_doc = json.dumps({**doc, "schema": "jetpredict-reference/1"}).encode()
    path.write_bytes(forge_doc)
    mpath = artifacts.manifest_path(path)
    mpath.write_text(json.dumps({**json.loads(mpath.read_text()), "sha256": artifacts.sha256_bytes(forge_doc)}))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert bundled.load_bundled_reference("agx-xavier", tmp_path) is None
    assert any("refitting it in memory" in str(w.message) for w in caught)


def test_shipped_bundle_is_json_and_matches_this_installation():
    assert not list(bundled.FITTED_DIR.glob("*.joblib"))
    for path in bundled.FITTED_DIR.glob("*-reference.json"):
        doc, manifest = artifacts.read_artifact(path, "device-reference")
        assert manifest["training_data_sha256"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a bundle fitted on other sweeps than models/reference holds warns
        refs = {p.name.removesuffix("-reference.json"): bundled.load_bundled_reference(p.name.removesuffix(
            "-reference.json")) for p in bundled.FITTED_DIR.glob("*-reference.json")}
    assert len(refs) >= 2 and all(ref is not None for ref in refs.values())
    assert refs["agx-xavier"].source == "published"


def test_build_bundled_writes_one_artifact_per_device_with_sweeps(tmp_path):
    """agx-xavier, the one device with published sweeps, hashes the published CSV (not the simulated one beside
    it) and carries the simulated sweeps as its transfer reference; nano has simulated sweeps only."""
    written = build_all(tmp_path, devices=["agx-xavier", "nano"])
    assert sorted(p.name for p in written) == ["agx-xavier-reference.json", "nano-reference.json"]
    for p in written:
        assert artifacts.read_artifact(p, "device-reference")[1]["training_data_sha256"]
    published = reference.reference_csvs("agx-xavier")[0]
    assert published.name == "agx-xavier-published.csv"
    manifest = artifacts.read_artifact(written[0], "device-reference")[1]
    assert manifest["source"] == "published"
    assert manifest["training_data_sha256"] == artifacts.file_sha256(published)
    assert json.loads(written[0].read_text())["transfer"]["source"] == "simulated"
    # The shipped artifacts are what the build writes now (a stale bundle would be refitted at run time).
    # Equal up to the last bits: BLAS builds sum in other orders (3e-16 apart on one machine).
    for p, device in zip(written, ("agx-xavier", "nano"), strict=True):
        _assert_close(json.loads(p.read_text()), json.loads(bundled.bundled_reference_path(device).read_text()))


def _assert_close(got: object, want: object, path: str = "$") -> None:
    """``got == want`` for nested JSON values, floats to 1e-9 relative."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys(), path
        for k in want:
            _assert_close(got[k], want[k], f"{path}.{k}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            _assert_close(g, w, f"{path}[{i}]")
    elif isinstance(want, float) and not isinstance(got, bool):
        assert got == pytest.approx(want, rel=1e-9, abs=1e-12), path
    else:
        assert got == want, path


def test_a_loaded_reference_predicts_the_same_whatever_the_hash_seed():
    """Loading a bundled reference keeps its document's component order: in a set's order (which
    PYTHONHASHSEED changes) sums ran in another order, and a cross-device energy bound moved 0.06% between
    runs (a count of posterior draws crossed its threshold)."""
    code = ("from jetpredict.models.catalogue import ModeArrays, load_device;"
            "from jetpredict.predictor.bundled import fit_workload, predict_modes;"
            "from jetpredict.models.profile_files import read_profile_csv;"
            "rows = read_profile_csv('bench/data/published_cross_device.csv');"
            "rows = rows[(rows.device == 'xavier-nx') & (rows.workload == 'mobilenetv3-gld23k')];"
            "p = predict_modes(fit_workload(rows.reset_index(drop=True)), "
            "ModeArrays(*load_device('agx-xavier').maxn.knobs()), load_device('agx-xavier'));"
            "print(repr(float(p.epoch_energy_j_low[0])), repr(float(p.epoch_energy_j_high[0])))")
    root = Path(__file__).resolve().parents[2]
    out = {subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "3")}
    assert len(out) == 1, out


def _fail_on_call(monkeypatch, name: str, call: int, error: BaseException) -> None:
    """Make ``os.<name>`` (as atomic_files calls it for artifacts) raise ``error`` on its ``call``-th call (1-based)."""
    real = getattr(os, name)
    calls = []

    def failing(*args, **kwargs):
        calls.append(args)
        if len(calls) == call:
            raise error
        return real(*args, **kwargs)

    monkeypatch.setattr(os, name, failing)


ENOSPC = OSError(28, "No space left on device")


@pytest.mark.parametrize(("step", "name", "call", "error"), [
    ("writing the file", "fsync", 1, ENOSPC), ("writing the manifest", "fsync", 2, ENOSPC),
    ("renaming the file", "replace", 1, ENOSPC), ("renaming the manifest", "replace", 2, ENOSPC),
    ("an interrupt at the manifest's rename", "replace", 2, KeyboardInterrupt())])
def test_a_save_failing_at_any_step_leaves_the_previous_model_loadable(tmp_path, model, monkeypatch, step, name,
                                                                      call, error):
    """Files are replaced through fsynced temporary files and renames: a failure at any step leaves the
    previous file and manifest byte-identical, no temporary file behind, and an error naming the files."""
    path = tmp_path / "m.json"
    save_model(model, path)
    os.chmod(path, 0o640)
    before = _file_state(path)
    other = replace(model, workload_id="another-workload")
    _fail_on_call(monkeypatch, name, call, error)
    with pytest.raises(type(error)) as e:
        save_model(other, path)
    if isinstance(error, OSError):
        assert e.value.errno == 28 and "m.json and its manifest m.json.json" in e.value.strerror, step
        assert "previous files (if any) are unchanged" in e.value.strerror, step
    monkeypatch.undo()
    assert _file_state(path) == before, step
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json", "m.json.json"], step
    assert model_to_dict(load_model(path)) == model_to_dict(model), step
    save_model(other, path)  # and the next save goes through, keeping the file's permissions
    assert load_model(path).workload_id == "another-workload" and (path.stat().st_mode & 0o777) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json", "m.json.json"]


def test_a_first_save_failing_at_the_manifest_leaves_no_file(tmp_path, model, monkeypatch):
    """Without a previous pair, a failed manifest rename takes the new file away again (it would have no
    manifest that matches it)."""
    path = tmp_path / "m.json"
    _fail_on_call(monkeypatch, "replace", 2, ENOSPC)
    with pytest.raises(OSError, match="unchanged"):
        save_model(model, path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
def test_a_disk_filling_up_mid_write_keeps_the_previous_model(tmp_path, model):
    """A real short write (no mock): a process limited (RLIMIT_FSIZE) to files smaller than the model
    saves over it. A plain write truncated the old file first, leaving a file its SHA-256 refused."""
    path = tmp_path / "m.json"
    save_model(model, path)
    before = _file_state(path)
    code = ("import json, resource, signal, sys\n"
            "from jetpredict.predictor import artifacts\n"
            "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG, not a kill, past the limit\n"
            "path = sys.argv[1]\n"
            "doc = {**json.load(open(path)), 'workload_id': 'another-workload'}\n"
            "resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]), resource.RLIM_INFINITY))\n"
            "try:\n"
            "    artifacts.write_artifact(doc, path, 'workload-model')\n"
            "except OSError as exc:\n"
            "    print(exc.errno, exc.strerror)\n")
    proc = subprocess.run([sys.executable, "-c", code, str(path), str(len(before[0]) // 2)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "unchanged" in proc.stdout, proc.stdout
    assert _file_state(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json", "m.json.json"]
    assert model_to_dict(load_model(path)) == model_to_dict(model)


@pytest.mark.parametrize("manifest", [b"[" * 60_000, b'{"a":' * 12_000], ids=["arrays", "objects"])
def test_a_manifest_nested_too_deeply_is_an_input_error_naming_it(tmp_path, model, manifest, capsys):
    """A manifest of nested brackets exhausts the JSON reader's recursion: refused as the model document
    is, naming the manifest, and ``predict`` exits 2 (not 1 with "maximum recursion depth exceeded")."""
    from jetpredict.cli import main

    path = tmp_path / "m.json"
    save_model(model, path)
    artifacts.manifest_path(path).write_bytes(manifest)
    with pytest.raises(InputError, match="m.json.json is not valid JSON") as e:
        load_model(path)
    assert e.value.field == "model"
    assert main(["predict", "--model", str(path), "--presets"]) == 2
    err = capsys.readouterr().err
    assert "m.json.json is not valid JSON" in err and "recursion" not in err and "Traceback" not in err

"""Model files and bundled artifacts: manifests, SHA-256, version checks, refit on mismatch."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from jetpredict.models.errors import InputError
from jetpredict.models.profile_rows import read_profile_csv
from jetpredict.predictor import artifacts
from jetpredict.predictor.model import fit_workload, load_model, save_model
from jetpredict.predictor.reference import REFERENCE_DIR, build_reference

from tools.build_bundled import build_all

REF = read_profile_csv(REFERENCE_DIR / "agx-xavier-published.csv")


@pytest.fixture(scope="module")
def model():
    rows = REF[(REF.workload == "resnet18-cifar10") & REF["mode"].isin(list("efij"))]
    return fit_workload(rows)


def test_save_and_load_round_trip_with_manifest(tmp_path, model):
    path = tmp_path / "resnet.joblib"
    save_model(model, path)
    manifest = json.loads((tmp_path / "resnet.joblib.json").read_text())
    assert manifest["sha256"] == artifacts.file_sha256(path)
    assert manifest["versions"]["scikit-learn"] and manifest["workload_id"] == "resnet18-cifar10"
    loaded = load_model(path)
    a = model.predict_arrays([8, 4], [2265.6, 1200], [1377, 670], [2133, 1333])
    b = loaded.predict_arrays([8, 4], [2265.6, 1200], [1377, 670], [2133, 1333])
    np.testing.assert_allclose(a["epoch_time_s"], b["epoch_time_s"])


def test_tampered_or_foreign_model_file_is_refused(tmp_path, model):
    path = tmp_path / "m.joblib"
    save_model(model, path)
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(InputError, match="SHA-256"):
        load_model(path)
    save_model(model, path)
    mpath = tmp_path / "m.joblib.json"
    manifest = json.loads(mpath.read_text())
    manifest["versions"]["scikit-learn"] = "0.0.1"
    mpath.write_text(json.dumps(manifest))
    with pytest.raises(InputError, match="scikit-learn 0.0.1"):
        load_model(path)
    mpath.unlink()
    with pytest.raises(InputError, match="no manifest"):
        load_model(path)
    with pytest.raises(InputError, match="does not exist"):
        load_model(tmp_path / "missing.joblib")


def test_bundled_reference_mismatch_refits_with_warning(tmp_path):
    ref = build_reference(REF)
    ref.training_sha256 = artifacts.file_sha256(REFERENCE_DIR / "agx-xavier-published.csv")
    artifacts.save_bundled_reference(ref, tmp_path)
    loaded = artifacts.load_bundled_reference("agx-xavier", tmp_path)
    assert loaded is not None and loaded.kappa_cpu == ref.kappa_cpu and loaded.rows is None
    stale = build_reference(REF)  # fingerprint of other data than the bundled CSV
    artifacts.save_bundled_reference(stale, tmp_path / "stale")
    with pytest.warns(RuntimeWarning, match="other reference sweeps"):
        assert artifacts.load_bundled_reference("agx-xavier", tmp_path / "stale") is None
    mpath = artifacts.manifest_path(artifacts.bundled_reference_path("agx-xavier", tmp_path))
    manifest = json.loads(mpath.read_text())
    manifest["versions"]["numpy"] = "0.1"
    mpath.write_text(json.dumps(manifest))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert artifacts.load_bundled_reference("agx-xavier", tmp_path) is None
    assert any("refitting it in memory" in str(w.message) for w in caught)


def test_shipped_bundle_matches_this_installation():
    path = artifacts.bundled_reference_path("agx-xavier")
    manifest = artifacts.check_artifact(path, "device-reference")
    assert manifest["source"] == "published"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert artifacts.load_bundled_reference("agx-xavier") is not None


def test_build_bundled_writes_one_artifact_per_device_with_sweeps(tmp_path):
    written = build_all(tmp_path, devices=["agx-xavier", "nano"])
    names = sorted(p.name for p in written)
    assert "agx-xavier-reference.joblib" in names
    for p in written:
        assert artifacts.check_artifact(p, "device-reference")["training_data_sha256"]

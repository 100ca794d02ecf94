"""Model files: joblib + a JSON manifest (package versions, SHA-256 of the file and of the training data).

A file is only unpickled after its manifest checks out. A *user* model file that fails the check is
refused with :class:`InputError`; a *bundled* reference artifact that does not match this installation
(other scikit-learn/numpy/jetpredict version, or reference CSV changed) is refitted in memory from the
bundled CSV with a warning instead.
"""

from __future__ import annotations

import hashlib
import json
import platform
import warnings
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import joblib
import numpy as np
import pandas as pd
import sklearn
from jetpredict.models.errors import InputError

FORMAT = "jetpredict-artifact/1"
FITTED_DIR = Path(__file__).resolve().parent.parent / "models" / "fitted"


def package_versions() -> dict[str, str]:
    """Versions that must match for a pickled model to be trusted."""
    try:
        jp = metadata.version("jetpredict")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        jp = "0.1.0"
    return {"jetpredict": jp, "scikit-learn": sklearn.__version__, "numpy": np.__version__,
            "pandas": pd.__version__}


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with Path(path).open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def manifest_path(path: str | Path) -> Path:
    return Path(f"{path}.json")


def save_artifact(obj, path: str | Path, kind: str, training_data_sha256: str = "", source: str = "",
                  extra: dict | None = None) -> dict:
    """Dump ``obj`` with joblib to ``path`` and write ``path.json``; returns the manifest."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    joblib.dump(obj, path, compress=3)
    manifest = {
        "format": FORMAT, "kind": kind, "file": path.name, "sha256": file_sha256(path),
        "versions": package_versions(), "python": platform.python_version(),
        "training_data_sha256": training_data_sha256, "source": source,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"), **(extra or {}),
    }
    manifest_path(path).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def check_artifact(path: str | Path, kind: str) -> dict:
    """The manifest of ``path`` after checking it; InputError naming what does not match."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"model file {path} does not exist", "model")
    mpath = manifest_path(path)
    if not mpath.is_file():
        raise InputError(f"model file {path} has no manifest {mpath.name}: refusing to load it", "model")
    try:
        manifest = json.loads(mpath.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"manifest {mpath} is not valid JSON: {exc}", "model") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise InputError(f"manifest {mpath} is not a {FORMAT} manifest", "model")
    if manifest.get("kind") != kind:
        raise InputError(f"{path} holds a {manifest.get('kind')!r}, expected a {kind!r}", "model")
    if manifest.get("sha256") != file_sha256(path):
        raise InputError(f"SHA-256 of {path} does not match its manifest: the file was changed or "
                         f"corrupted; refusing to load it", "model")
    ours = package_versions()
    theirs = manifest.get("versions") or {}
    diff = [f"{k} {theirs.get(k)} (this installation: {v})" for k, v in ours.items() if theirs.get(k) != v]
    if diff:
        raise InputError(f"{path} was written with {', '.join(diff)}: refit it with this version", "model")
    return manifest


def load_artifact(path: str | Path, kind: str):
    """Unpickle ``path`` after :func:`check_artifact` passes."""
    check_artifact(path, kind)
    return joblib.load(path)


# -- bundled device references ----------------------------------------------------------------------------
def bundled_reference_path(device_id: str, directory: Path | None = None) -> Path:
    return (directory or FITTED_DIR) / f"{device_id}-reference.joblib"


def save_bundled_reference(ref, directory: Path | None = None) -> Path:
    """Write a DeviceReference as a bundled artifact (training rows dropped to keep it small)."""
    import copy

    path = bundled_reference_path(ref.device_id, directory)
    slim = copy.copy(ref)
    slim.rows = None
    save_artifact(slim, path, kind="device-reference", training_data_sha256=ref.training_sha256,
                  source=ref.source, extra={"device_id": ref.device_id, "workloads": list(ref.workloads)})
    return path


def load_bundled_reference(device_id: str, directory: Path | None = None):
    """The bundled DeviceReference of a device, or None (with a warning when one exists but does not match
    this installation or its reference CSV, so the caller refits it in memory)."""
    from jetpredict.predictor.reference import reference_csvs

    path = bundled_reference_path(device_id, directory)
    if not path.is_file():
        return None
    try:
        manifest = check_artifact(path, "device-reference")
    except InputError as exc:
        warnings.warn(f"bundled reference of {device_id}: {exc.message}; refitting it in memory",
                      RuntimeWarning, stacklevel=2)
        return None
    csvs = reference_csvs(device_id)
    if csvs and manifest.get("training_data_sha256") != file_sha256(csvs[0]):
        warnings.warn(f"bundled reference of {device_id} was fitted on other reference sweeps than "
                      f"models/reference holds now; refitting it in memory", RuntimeWarning, stacklevel=2)
        return None
    return joblib.load(path)

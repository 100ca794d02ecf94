"""Model files on disk: a JSON document plus a JSON manifest next to it (``PATH.json``).

Format (``jetpredict-artifact/2``): ``PATH`` holds one UTF-8 JSON document (a fitted workload model,
schema ``jetpredict-model/3``, or a device reference, ``jetpredict-reference/3``; see
:mod:`jetpredict.predictor.serialization`), whatever its extension (``fit --out`` keeps the path it is
given). The manifest ``PATH.json`` records ``format``, ``kind``, ``schema``, the file's SHA-256, the
jetpredict version that wrote it and, for references, the SHA-256 of the sweeps they were fitted on.

Loading reads bytes and parses JSON, never anything else: a file is never unpickled or executed. The
SHA-256 guards against corruption, not against an attacker (anyone can recompute it), which is why the
content itself must be plain data. Pickled files of jetpredict <= 0.1 (``jetpredict-artifact/1``,
``.joblib``) are refused with a message saying how to refit them.
"""

from __future__ import annotations

import hashlib
import json
import stat
from importlib import metadata
from pathlib import Path
from typing import Any

from jetpredict.models.atomic_files import is_special_file, make_out_folder, replace_pair
from jetpredict.models.errors import InputError

FORMAT = "jetpredict-artifact/2"
#: Manifest formats of older releases, whose files were pickles.
PICKLE_FORMATS = frozenset({"jetpredict-artifact/1"})
#: Largest model file read (bytes): a fitted model is ~10-100 kB, a bundled reference ~10 kB.
MAX_ARTIFACT_BYTES = 32 * 1024 * 1024
MAX_MANIFEST_BYTES = 64 * 1024
REFIT_HINT = ("refit it with this version: `jetpredict fit --device DEVICE --profiles ROWS.csv --out MODEL.json` "
              "(model files are JSON data now)")


def jetpredict_version() -> str:
    try:
        return metadata.version("jetpredict")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0.0.0+checkout"


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with Path(path).open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def manifest_path(path: str | Path) -> Path:
    return Path(f"{path}.json")


def write_artifact(doc: dict[str, Any], path: str | Path, kind: str, extra: dict[str, Any] | None = None
                   ) -> dict[str, Any]:
    """Write ``doc`` as JSON to ``path`` and its manifest to ``path.json``; returns the manifest.

    InputError, before anything is written (an existing file is left as it is), when either would be
    larger than :func:`read_artifact` reads (:data:`MAX_ARTIFACT_BYTES`, :data:`MAX_MANIFEST_BYTES`).
    The pair is replaced together (:func:`~jetpredict.models.atomic_files.replace_pair`): an OSError (full
    disk, unwritable folder) leaves the previous files byte for byte as they were. A crash between its two
    renames leaves the new file beside the previous manifest, which :func:`read_artifact` refuses (SHA-256
    mismatch)."""
    path = Path(path)
    data = (json.dumps(doc, indent=1, allow_nan=False, sort_keys=True) + "\n").encode("utf-8")
    if len(data) > MAX_ARTIFACT_BYTES:
        raise InputError(f"the {kind} file {path} would be {len(data):,} bytes; a model file is read back only up "
                         f"to {MAX_ARTIFACT_BYTES:,} bytes (MAX_ARTIFACT_BYTES): fit on fewer profile rows (merge "
                         f"repeated rows of the same mode, or profile fewer); nothing was written", "model")
    manifest = {
        "format": FORMAT, "kind": kind, "schema": doc.get("schema"), "file": path.name,
        # No timestamp: rebuilding the bundled artifacts from the same sweeps gives the same bytes.
        "sha256": sha256_bytes(data), "jetpredict": jetpredict_version(), **(extra or {}),
    }
    text = json.dumps(manifest, indent=2) + "\n"
    if len(text.encode("utf-8")) > MAX_MANIFEST_BYTES:
        raise InputError(f"the manifest of {path} would be larger than {MAX_MANIFEST_BYTES:,} bytes "
                         f"(MAX_MANIFEST_BYTES); nothing was written", "model")
    for file in (path, manifest_path(path)):
        # A device or FIFO cannot be replaced by a rename (it would become a regular file) nor take the
        # manifest beside it: the pair needs two files.
        if is_special_file(file):
            raise InputError(f"cannot write the {kind} file {path}: {file} is not a regular file (a {kind} "
                             f"file and its manifest {manifest_path(path).name} are written as two files); "
                             f"nothing was written", "model")
    make_out_folder(path)  # where a write through its links lands, as every --out
    mpath = manifest_path(path)
    replace_pair(path, data, mpath, text.encode("utf-8"), f"{path} and its manifest {mpath.name}")
    return manifest


def _read_regular(path: Path, limit: int, what: str) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (no FIFOs, devices or huge files)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise InputError(f"{what} {path} does not exist", "model") from None
    except OSError as exc:
        raise InputError(f"{what} {path} cannot be read: {exc.strerror}", "model") from None
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{what} {path} is not a regular file", "model")
    if st.st_size > limit:
        raise InputError(f"{what} {path} is larger than {limit} bytes", "model")
    try:
        with path.open("rb") as f:
            return f.read(limit + 1)[:limit]
    except OSError as exc:
        raise InputError(f"{what} {path} cannot be read: {exc.strerror}", "model") from None


def _json_object(raw: bytes) -> tuple[object, str | None]:
    """``raw`` read as JSON, and None; or None and why Python's reader refused it (a ValueError's words say
    where; nested brackets exhaust the reader)."""
    try:
        return json.loads(raw.decode("utf-8")), None
    except (UnicodeDecodeError, ValueError) as exc:
        return None, str(exc)
    except RecursionError:
        return None, "nested too deeply"


def read_manifest(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    mpath = manifest_path(path)
    if not mpath.exists():
        raise InputError(f"model file {path} has no manifest {mpath.name}: refusing to load it", "model")
    raw = _read_regular(mpath, MAX_MANIFEST_BYTES, "manifest")
    manifest, why = _json_object(raw)
    if why is not None:
        raise InputError(f"manifest {mpath} is not valid JSON: {why}", "model")
    if not isinstance(manifest, dict):
        raise InputError(f"manifest {mpath} is not a JSON object", "model")
    return manifest


#: Manifest fields ``write_artifact`` is given from the document (the schema always; ``device_id`` and
#: ``workload_id`` as models and references pass them), each with the document's key it must equal.
MANIFEST_MATCHES = {"schema": "schema", "device_id": "device", "workload_id": "workload_id"}
#: Of those, the ones a manifest must state wherever its file states the matching key: every model manifest
#: holds its device and workload, every reference manifest its device (a reference spans workloads: its
#: file and manifest hold no workload_id). Without them the check that the two belong together is skipped.
MANIFEST_REQUIRED = ("device_id", "workload_id")


def read_artifact(path: str | Path, kind: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(document, manifest) of the artifact at ``path`` after every check; InputError naming the failure."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"model file {path} does not exist", "model")
    manifest = read_manifest(path)
    fmt = manifest.get("format")
    if fmt in PICKLE_FORMATS:
        raise InputError(f"{path} is a pickled model file of an older jetpredict, which is never loaded "
                         f"(loading a pickle can run code); {REFIT_HINT}", "model")
    if fmt != FORMAT:
        raise InputError(f"manifest of {path} is not a {FORMAT} manifest (format {fmt!r})", "model")
    if manifest.get("kind") != kind:
        raise InputError(f"{path} holds a {manifest.get('kind')!r}, expected a {kind!r}", "model")
    data = _read_regular(path, MAX_ARTIFACT_BYTES, "model file")
    if manifest.get("sha256") != sha256_bytes(data):
        raise InputError(f"SHA-256 of {path} does not match its manifest: the file was changed or "
                         f"corrupted; refusing to load it", "model")
    doc, why = _json_object(data)
    if why is not None:
        raise InputError(f"{path} is not a JSON model file ({why}; pickles and other formats are never "
                         f"loaded); {REFIT_HINT}", "model")
    if not isinstance(doc, dict):
        raise InputError(f"{path} is not a JSON model document; {REFIT_HINT}", "model")
    for key, doc_key in MANIFEST_MATCHES.items():
        if key not in manifest and key in MANIFEST_REQUIRED and doc_key in doc:
            raise InputError(f"{path}: its manifest {manifest_path(path).name} must state {key} (the file has "
                             f"{doc_key} {doc[doc_key]!r}; jetpredict writes it in every manifest, so this one was "
                             f"written or edited by hand); {REFIT_HINT}", "model")
        # A manifest without the schema (hand-written, as the tests' forge writes them) leaves the file's own
        # checks to judge it; one naming another schema, device or workload means the pair was edited.
        if key in manifest and manifest[key] != doc.get(doc_key):
            raise InputError(f"{path}: its manifest {manifest_path(path).name} has {key} {manifest[key]!r} but the "
                             f"file has {doc_key} {doc.get(doc_key)!r}: they must be equal (one of the two was "
                             f"edited, or they are of two files); {REFIT_HINT}", "model")
    return doc, manifest

"""Helpers of the model-file tests: hand-edited files with a manifest that checks out, and how a refused one
must fail (an InputError naming the field and rule at load; ``predict`` exits 2 with it, no traceback)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from jetpredict.models.errors import InputError
from jetpredict.predictor import artifacts
from jetpredict.predictor.bundled import load_model


def forge(path: Path, data: bytes, fmt: str = artifacts.FORMAT, kind: str = "workload-model",
          manifest: dict[str, object] | None = None) -> None:
    """Write ``data`` at ``path`` with a manifest that checks out (anyone can recompute a SHA-256 and copy the
    device and workload the file states, which a manifest must hold: artifacts.MANIFEST_REQUIRED).
    ``manifest``: the fields to write instead of those (``fmt`` and ``kind`` unused), as a saved manifest
    edited by hand; its SHA-256 is recomputed all the same."""
    path.write_bytes(data)
    if manifest is None:
        try:
            doc = json.loads(data)
        except (UnicodeDecodeError, ValueError, RecursionError):
            doc = None
        stated = {key: doc[doc_key] for key, doc_key in artifacts.MANIFEST_MATCHES.items()
                  if key in artifacts.MANIFEST_REQUIRED and isinstance(doc, dict) and doc_key in doc}
        manifest = {"format": fmt, "kind": kind, **stated}
    artifacts.manifest_path(path).write_text(json.dumps({**manifest, "sha256": artifacts.sha256_bytes(data)}))


def assert_refused_at_load(path: Path, message: str, label: str, capsys) -> None:
    """Loading ``path`` raises an InputError whose text holds ``message``, and ``jetpredict predict`` exits 2
    printing it after the file's name (``""``: any message); ``label`` names the case in a failure."""
    from jetpredict.cli import main

    with pytest.raises(InputError, match=re.escape(message) if message else None) as e:
        load_model(path)
    assert e.value.field == "model", label
    assert main(["predict", "--model", str(path), "--presets"]) == 2, label
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"{path.name}{message}" in err, label

"""Where the data shipped in :mod:`jetpredict.models` lives: the one accessor every package uses.

The folders sit inside the ``jetpredict.models`` package, in a source checkout and in an installed
wheel alike (see ``package-data`` in pyproject.toml), so nobody computes them from its own location.
"""

from __future__ import annotations

from pathlib import Path

_ROOT = Path(__file__).resolve().parent

#: The data folders: the device catalogue (TOML), reference sweeps (profile-row CSV), bundled fitted
#: device models (artifacts with JSON manifests).
DATA_KINDS = ("devices", "reference", "fitted")


def data_path(kind: str, name: str | None = None) -> Path:
    """The folder of one kind of bundled data (``devices``, ``reference``, ``fitted``), or the file
    ``name`` inside it. The path may not exist yet (a build script about to write it)."""
    if kind not in DATA_KINDS:
        raise ValueError(f"unknown models data kind {kind!r}; one of {', '.join(DATA_KINDS)}")
    folder = _ROOT / kind
    return folder if name is None else folder / name

"""jetpredict: DNN training epoch time and energy on every power mode of every NVIDIA Jetson type.

One import package over the repository's folders: ``jetpredict.models`` (catalogue, data formats),
``jetpredict.profiler``, ``jetpredict.predictor``, ``jetpredict.api``; the command line
(:mod:`jetpredict.cli`) sits one floor above them.
"""

from __future__ import annotations

from importlib import metadata as _metadata
from pathlib import Path as _Path

# An installed wheel holds the sub-packages inside this folder. In a source checkout they are the
# repository's top-level folders beside it, so `python -m jetpredict` and tests work there too.
_SOURCE_ROOT = _Path(__file__).resolve().parent.parent
if not (_Path(__file__).parent / "models").is_dir() and (_SOURCE_ROOT / "models" / "__init__.py").is_file():
    __path__.append(str(_SOURCE_ROOT))  # noqa: F821 -- a package's __path__ is defined by the import system

try:
    __version__ = _metadata.version("jetpredict")
except _metadata.PackageNotFoundError:  # a source checkout that was never installed
    __version__ = "0+unknown"

"""Every path the profiler reads on a device goes through here, so tests can point it at a fake tree.

The root is ``$JETPREDICT_SYSFS_ROOT`` (default ``/``): ``path("/sys/class/powercap")`` is
``<root>/sys/class/powercap``. Reads never raise for a missing or unreadable file; they return ``None``
so that a missing sensor becomes "unknown", never 0.
"""

from __future__ import annotations

import glob as _glob
import os
import shutil
from pathlib import Path

ROOT_ENV = "JETPREDICT_SYSFS_ROOT"


def root() -> Path:
    """The filesystem root the profiler sees: ``$JETPREDICT_SYSFS_ROOT`` or ``/``."""
    return Path(os.environ.get(ROOT_ENV) or "/")


def is_fake_root() -> bool:
    """True when a fake tree is in use (tests), i.e. the root is not ``/``."""
    return root().resolve() != Path("/")


def path(device_path: str | os.PathLike[str]) -> Path:
    """The real location of an absolute device path such as ``/sys/devices/gpu.0/load``."""
    return root() / str(device_path).lstrip("/")


def unroot(real: str | os.PathLike[str]) -> str:
    """The device path (``/sys/...``) of a real location under :func:`root` (others unchanged)."""
    rel = os.path.relpath(str(real), str(root()))
    if rel == "." or rel.startswith(".."):
        return str(real) if rel != "." else "/"
    return "/" + rel.replace(os.sep, "/")


def glob(pattern: str) -> list[Path]:
    """Sorted real paths matching an absolute device-path pattern."""
    return sorted(Path(p) for p in _glob.glob(str(path(pattern))))


def _real(p: str | os.PathLike[str]) -> Path:
    # A Path came from glob()/path() and is already under the root; a str is a device path.
    return p if isinstance(p, Path) else path(p)


def exists(device_path: str) -> bool:
    """True when the file is there; False when missing or when a folder on the way is unreadable (debugfs
    is root only): like the reads, an unknown file is never an error here."""
    try:
        return path(device_path).exists()
    except OSError:  # Path.exists() raises PermissionError for an unreadable folder, not False
        return False


def read_text(device_path: str | os.PathLike[str]) -> str | None:
    """Stripped file contents, or ``None`` when missing or unreadable.

    A ``str`` is a device path (rooted here); a ``Path`` is a real path from :func:`glob`/:func:`path`.
    """
    p = _real(device_path)
    try:
        return p.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def read_int(device_path: str | os.PathLike[str]) -> int | None:
    """An integer file (e.g. ``in1_input`` in mV), or ``None`` when missing, unreadable or not a number."""
    text = read_text(device_path)
    if text is None:
        return None
    try:
        return int(text.split()[0])
    except (ValueError, IndexError):
        return None


def read_ints(device_path: str | os.PathLike[str]) -> list[int] | None:
    """A whitespace-separated list of integers (e.g. ``available_frequencies``), or ``None``."""
    text = read_text(device_path)
    if text is None:
        return None
    try:
        return [int(x) for x in text.split()]
    except ValueError:
        return None


def write_text(device_path: str | os.PathLike[str], value: object) -> None:
    """Write ``value`` to a sysfs file; raises ``PermissionError``/``OSError`` for the caller to explain."""
    _real(device_path).write_text(f"{value}\n")


def which(name: str) -> str | None:
    """An executable: under ``<root>/usr/bin`` (or ``usr/sbin``, ``bin``) first when a fake root is set,
    then on PATH, then in ``/usr/sbin`` and ``/usr/bin`` (L4T tools live there, off some users' PATH;
    never with a fake root, so tests cannot reach a real ``nvpmodel``).
    """
    fake = is_fake_root()
    if fake:
        for d in ("usr/bin", "usr/sbin", "bin"):
            candidate = root() / d / name
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
    found = shutil.which(name)
    if found or fake:
        return found
    for d in ("/usr/sbin", "/usr/bin"):
        candidate = Path(d) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None

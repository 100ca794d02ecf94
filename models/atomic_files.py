"""Files replaced whole: a reader, or a crash, finds the old bytes or the new ones, never half a file.

The power-mode state file, a custom nvpmodel configuration, a campaign's outputs and a model file with its
manifest are all written this way: the new bytes go to a temporary file in the target's folder (so the
replacement is a rename), are synced to disk, then renamed over the target, and the folder is synced so
the rename itself survives a power loss.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path


def _umask_mode() -> int:
    """The permission bits a plain ``open(..., "w")`` gives a new file (0666 less the umask)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


#: Bytes of the target's name a temporary name keeps: with the dot, the random part and a suffix it stays
#: within the 255-byte name limit of common file systems.
TEMP_NAME_BYTES = 200


def _short(name: str) -> str:
    """``name`` cut to :data:`TEMP_NAME_BYTES` bytes of UTF-8 (a name's limit is in bytes, not characters)."""
    return name.encode("utf-8", "surrogateescape")[:TEMP_NAME_BYTES].decode("utf-8", "ignore")


def probe_folder(target: Path) -> None:
    """Create and remove a temporary file beside ``target`` as :func:`replace_file` would: OSError when the
    folder cannot take it (a check before work whose result would be lost)."""
    temp_beside(target, b"", mode=0o600).unlink()


def temp_beside(target: Path, data: bytes, mode: int | None = None, suffix: str = ".tmp") -> Path:
    """A new file beside ``target`` (``.NAME.<random><suffix>``) holding ``data``, synced to disk. Its
    permission bits are ``mode``, else ``target``'s where it exists, else a plain new file's. Removed again
    if writing fails."""
    tmp = target.with_name(f".{_short(target.name)}.{secrets.token_hex(6)}{suffix}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if mode is None:
            mode = stat.S_IMODE(target.stat().st_mode) if target.exists() else _umask_mode()
        os.chmod(tmp, mode)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def sync_folder(folder: Path) -> None:
    """Make the renames in ``folder`` survive a power loss, where the platform can sync a folder."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def replace_file(path: Path, data: bytes, mode: int | None = None) -> None:
    """Replace ``path`` by ``data`` atomically (its folder must exist); ``mode`` as for :func:`temp_beside`."""
    tmp = temp_beside(path, data, mode)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    sync_folder(path.parent)

"""Files replaced whole: a reader, or a crash, finds the old bytes or the new ones, never half a file.

The power-mode state file, a custom nvpmodel configuration and a command's output files are all written
this way: the new bytes go to a temporary file in the target's folder (so the replacement is a rename),
are synced to disk, then renamed over the target, and the folder is synced so the rename itself survives
a power loss. An output given as a device or FIFO (``--out /dev/null``), or as an open pipe
(``--out /dev/stdout | cat``), is written into instead (:func:`write_output`): there is no file to replace. A file and its companion (a model
and its manifest, a profile CSV and its sidecar) are replaced together (:func:`replace_pair`).
"""

from __future__ import annotations

import collections
import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path

#: Symlinks followed before a path is refused as a loop (the kernel's own limit).
MAX_SYMLINKS = 40
#: Bytes of the target's name a temporary name keeps: with the dot, the random part and a suffix it stays
#: within the 255-byte name limit of common file systems.
TEMP_NAME_BYTES = 200


def temp_name(target: Path, suffix: str = ".tmp") -> Path:
    """A fresh name beside ``target``: ``.NAME.<random><suffix>``, NAME cut to :data:`TEMP_NAME_BYTES` bytes
    (a name's limit is in bytes, not characters) of the file-system encoding, never within a UTF-8 character."""
    # Through os.fsencode and back: the name's own bytes, which an ASCII locale (LC_ALL=C) also takes back.
    raw = os.fsencode(target.name)
    cut = min(len(raw), TEMP_NAME_BYTES)
    for _ in range(3):  # a UTF-8 character is at most 4 bytes: back off its continuation bytes
        if cut == len(raw) or raw[cut] & 0xC0 != 0x80:
            break
        cut -= 1
    return target.with_name(f".{os.fsdecode(raw[:cut])}.{secrets.token_hex(6)}{suffix}")


def followed(path: str | Path) -> Path:
    """``path`` through its symlinks (an absolute path, resolved one component at a time as the kernel
    does), as a plain write would land, but following a link in a sticky, world-writable folder (``/tmp``)
    only when the caller or the folder's owner owns it, the kernel's ``protected_symlinks`` rule, for a
    folder's link on the way as for the file's: resolved here, a link planted there by another user would
    otherwise steer a root run's output (or the sidecar beside it, a name the user never typed) onto any
    file. PermissionError naming the link when refused; OSError (ELOOP) past :data:`MAX_SYMLINKS` links. A
    /proc link to an open file without a path (``/dev/stdout`` into a pipe: ``pipe:[2600163]``) is kept as it
    is: written into, as a FIFO is (:func:`is_open_file_link`)."""
    # Joined, not normalised: "link/.." is the link target's parent, as the kernel reads it.
    left = collections.deque(Path(os.path.join(os.getcwd(), path)).parts[1:])
    resolved, links = Path("/"), 0
    while left:
        name = left.popleft()
        if name in ("", "."):
            continue
        if name == "..":
            resolved = resolved.parent  # a resolved folder: its parent is the real one
            continue
        step = resolved / name
        if not step.is_symlink():
            resolved = step
            continue
        links += 1
        if links > MAX_SYMLINKS:
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), str(path))
        folder, owner = os.stat(resolved), os.lstat(step).st_uid
        shared = folder.st_mode & stat.S_ISVTX and folder.st_mode & stat.S_IWOTH
        if shared and owner not in (os.geteuid(), folder.st_uid):
            raise PermissionError(errno.EACCES, f"{step} is a symlink of another user (uid {owner}) in the "
                                  f"shared folder {resolved}; not followed", str(step))
        name = os.readlink(step)
        if _names_no_path(resolved, name):
            # /proc/self/fd/1 -> 'pipe:[2600163]': the link is the one name of its open file (a pipe, a
            # socket, a deleted file); the kernel opens it as such, so the path is kept as given.
            return step.joinpath(*left)
        target = Path(name)
        if target.is_absolute():
            resolved = Path("/")
        left.extendleft(reversed(target.parts[1:] if target.is_absolute() else target.parts))
    return resolved


#: Where the kernel's "magic" links live: a process's open files (``/proc/self/fd/N``, ``/dev/stdout`` through
#: ``/dev/fd``), whose target is text such as ``pipe:[2600163]`` rather than a path when the file has none.
PROC_ROOT = Path("/proc")


def _names_no_path(folder: Path, target: str) -> bool:
    """Whether a link in ``folder`` with the text ``target`` is a /proc link to an open file with no path of
    its own (``pipe:[N]``, ``socket:[N]``, ``anon_inode:...``, a deleted file's ``/x (deleted)``): a target
    that names nothing. ``/proc/self -> 4242`` names a folder and is followed."""
    if folder != PROC_ROOT and PROC_ROOT not in folder.parents:
        return False
    return not os.path.lexists(os.path.join(folder, target))


def is_open_file_link(path: Path) -> bool:
    """Whether ``path``, as :func:`followed` returns it, is a /proc link it kept (:func:`_names_no_path`): an
    open file that is written into, having no folder to replace it in."""
    return path.is_symlink() and _names_no_path(path.parent, os.readlink(path))


def probe_folder(target: Path) -> None:
    """Create and remove a temporary file beside ``target`` as :func:`replace_file` would: OSError when the
    folder cannot take it or ``target`` is a symlink :func:`followed` refuses (a check before work whose
    result would be lost)."""
    temp_beside(followed(target), b"", mode=0o600).unlink()


def temp_beside(target: Path, data: bytes, mode: int | None = None, suffix: str = ".tmp") -> Path:
    """A new file beside ``target`` (``.NAME.<random><suffix>``) holding ``data``, synced to disk. Its
    permission bits are ``mode``, else ``target``'s where it exists, else a plain new file's. Removed again
    if writing fails."""
    tmp = temp_name(target, suffix)
    if mode is None and target.exists():
        mode = stat.S_IMODE(target.stat().st_mode)
    # Without a mode the system applies the umask to 0666, as for a plain new file (no process-wide umask
    # read, which would race with other threads creating files).
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 if mode is None else 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if mode is not None:
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


class PairWriteError(OSError):
    """Replacing a file and its companion failed (:func:`replace_pair`). ``strerror`` says what, naming both
    files and what became of the previous pair, so a caller adds nothing about them; ``filename`` is the
    file whose write or rename failed, ``reason`` the system's own words (``No space left on device``) and
    ``restored`` False only where the previous file could not be put back (the new one is then in place
    beside the previous companion)."""

    def __init__(self, code: int | None, message: str, filename: Path, reason: str, restored: bool = True) -> None:
        super().__init__(code, message, str(filename))
        self.reason, self.restored = reason, restored


def replace_pair(path: Path, data: bytes, companion: Path, companion_data: bytes, what: str) -> None:
    """Replace ``path`` by ``data`` and ``companion`` by ``companion_data`` together (folders must exist;
    each goes through its symlinks as :func:`followed` allows, which raises a plain OSError before anything
    is written; permission bits as :func:`temp_beside`).

    Both new files are written in full to temporary files beside their targets and synced, then renamed:
    ``path``, then ``companion``. A failure at any step (a write, the first rename, the second, or an
    interrupt at the second) leaves the previous pair as it was, both files (or neither, where there were
    none): the previous ``path`` is kept under a hard link until the second rename succeeds and put back if
    it fails. :class:`PairWriteError` (``what`` names the pair in its message); an interrupt is re-raised as
    it is. One window no order closes: a crash (power loss, SIGKILL) between the two renames leaves the new
    ``path`` beside the previous ``companion``, and the previous ``path`` as ``.NAME.*.old`` beside it."""
    target, ctarget = followed(path), followed(companion)
    made: list[Path] = []
    step = path  # the file whose write or rename is under way, named by the error
    try:
        made.append(temp_beside(target, data))
        step = companion
        made.append(temp_beside(ctarget, companion_data))
        tmp, ctmp = made
        step = path
        backup = _link_backup(target, made)
        os.replace(tmp, target)
        try:  # from the first instruction after the rename: a signal handler's exception is checked at calls
            step = companion
            os.replace(ctmp, ctarget)
        except BaseException as exc:  # an interrupt too: the new file must not stay beside the old companion
            _put_back(target, backup, made, what, exc if isinstance(exc, OSError) else None, companion)
            raise
    except PairWriteError:
        raise
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise PairWriteError(exc.errno, f"{reason} while writing {what}; the previous files (if any) are "
                                        f"unchanged", step, reason) from exc
    finally:
        for leftover in made:
            with contextlib.suppress(OSError):
                leftover.unlink(missing_ok=True)
    for folder in {target.parent, ctarget.parent}:
        sync_folder(folder)


def _put_back(target: Path, backup: Path | None, made: list[Path], what: str, cause: OSError | None,
              companion: Path) -> None:
    """Undo the first rename of :func:`replace_pair`: the previous file back from ``backup``, or no file
    where there was none. PairWriteError (``restored`` False) when that fails too."""
    try:
        if backup is None:
            target.unlink(missing_ok=True)
        else:
            os.replace(backup, target)
    except OSError as exc:
        if backup is not None:
            made.remove(backup)  # the one copy of the previous file left: keep it
        kept = "" if backup is None else f"; the previous file is kept as {backup}"
        reason = (cause.strerror if cause is not None else None) or exc.strerror or str(exc)
        raise PairWriteError(exc.errno, f"{reason} while writing {what}: the new {target.name} is in place "
                                        f"beside the previous {companion.name}{kept}", companion, reason,
                             restored=False) from exc


def _link_backup(target: Path, made: list[Path]) -> Path | None:
    """A hard link to the current ``target`` (None when there is none), to put it back if the second rename
    fails; a copy where the file system has no hard links."""
    if not target.exists():
        return None
    backup = temp_name(target, ".old")
    try:
        os.link(target, backup)
    except OSError:
        backup = temp_beside(target, target.read_bytes(), suffix=".old")
    made.append(backup)
    return backup


def is_special_file(path: str | Path) -> bool:
    """Whether ``path`` (through symlinks) is a device, FIFO or socket: a rename over it would put a regular
    file in its place, so it is written into, or refused, never replaced."""
    return os.path.exists(path) and not os.path.isfile(path) and not os.path.isdir(path)


def write_output(path: Path, data: bytes) -> None:
    """Write a user's output file as a plain write would land, but whole: through symlinks to the file they
    name, straight into an existing device or FIFO (``--out /dev/null`` discards, a rename would have put a
    regular file in its place), and otherwise replaced atomically (:func:`replace_file`). A symlink another
    user planted in a shared folder is refused (:func:`followed`)."""
    target = followed(path)
    if is_special_file(target) or is_open_file_link(target):
        write_into(target, data)
        return
    replace_file(target, data)


def write_into(target: Path, data: bytes) -> None:
    """Write ``data`` into the device or FIFO ``target``. A FIFO no process reads is refused at once
    (OSError ENXIO, "no process reads the FIFO ..."): a plain open would wait for a reader for ever."""
    try:
        # Non-blocking, the open of a FIFO's write end fails (ENXIO) instead of waiting for a reader.
        fd = os.open(target, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ENXIO and stat.S_ISFIFO(os.stat(target).st_mode):
            raise OSError(errno.ENXIO, f"no process reads the FIFO {target}", str(target)) from None
        raise
    os.set_blocking(fd, True)  # the writes then wait for a slow reader, as a plain write would
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def make_out_folder(out: str | Path) -> None:
    """Create the missing folders of an ``--out`` file where a write through its symlinks lands
    (:func:`followed`, which refuses another user's link in ``/tmp``), as every verb that writes ``--out``
    does. OSError when it cannot; ENOTDIR naming the part of the path that is a file, not a folder (mkdir's
    own 'File exists' or 'Not a directory' says neither which part nor why)."""
    try:
        followed(out).parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        if exc.errno not in (errno.EEXIST, errno.ENOTDIR):
            raise
        named = out_folder_error(out)
        if named is None:
            raise
        raise named from None


def out_folder_error(out: str | Path) -> OSError | None:
    """The ENOTDIR error :func:`make_out_folder` raises for ``out``, naming the first existing part of its
    folder (as typed) that is not a folder, or None when there is none; creates nothing, so a verb can
    refuse ``out`` before its work."""
    blocking = _not_a_folder(Path(out).parent)
    if blocking is None:
        return None
    # A FIFO or device on the way is not a file either.
    said = f"{blocking} is a file, not a folder" if blocking.is_file() else f"{blocking} is not a folder"
    return OSError(errno.ENOTDIR, said, str(out))


def _not_a_folder(folder: Path) -> Path | None:
    """The first of ``folder`` and its parents, as the user typed them, that exists (through symlinks) but is
    not a folder; None when there is none."""
    for part in reversed((folder, *folder.parents)):
        if part.exists() and not part.is_dir():
            return part
    return None


def write_out_file(out: str | Path, data: bytes) -> None:
    """Write a verb's ``--out`` file whole (:func:`write_output`) in its folder, created when missing
    (:func:`make_out_folder`). OSError when it cannot."""
    make_out_folder(out)
    write_output(Path(out), data)

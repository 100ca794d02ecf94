"""The restore state file: what the original power mode was, kept on disk while a run may change it.

Written (atomically, fsynced) before the first switch and removed after a successful restore, so that
after a SIGKILL, an OOM kill, a crash or a reboot ``jetpredict restore`` can still put the original mode
back. Where it lives: ``$JETPREDICT_STATE_DIR``; else, under a fake device root (tests),
``<root>/var/lib/jetpredict``; else ``/var/lib/jetpredict`` for root and
``$XDG_STATE_HOME/jetpredict`` (default ``~/.local/state/jetpredict``) for anyone else.
The file is JSON data only: reading it never runs code.

A file ``jetpredict apply`` leaves on purpose is marked ``kept``: a later run that switches modes
(``profile``) does not adopt its original but returns to the mode in force when it started, and writes
the record back as it was for ``jetpredict restore``. Fields added after version 1 (``kept``,
``over_applied``, ``start_time``) are optional: a file without them reads as not kept, with no start time
(the pid alone says whether its run is alive), and older readers ignore them, so the version stays 1.
The keys are a contract with files left by earlier versions (a SIGKILLed run's survives an upgrade): the
attributes name their units (``created_at_s``, ``start_time_ticks``); the keys stay ``created_at`` and
``start_time``.

Checking for a live run and writing the file is one claim: a run holds an exclusive ``flock`` on
``/run/lock/jetpredict-powermode.lock`` (:class:`ModeLock`) from before that check until its restore is
done, so of two runs started at the same moment the second is refused, whichever users run them (root's
state lives in ``/var/lib``, a user's in their home: a lock beside each let both switch at once).
``jetpredict restore`` takes it too, and first waits for a command a killed holder left running. Without
``/run/lock`` the lock file is beside the state file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import logging
import os
import shlex
import socket
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jetpredict.models.atomic_files import replace_file
from jetpredict.profiler import sysfs
from jetpredict.profiler.powermode import privileged

STATE_DIR_ENV = "JETPREDICT_STATE_DIR"
#: The verb that puts back the original mode a state file records (:mod:`profiler.powermode.recovery`).
RESTORE_COMMAND = "jetpredict restore"
#: The kind of the nvpmodel controller (``profile --device jetson``, ``apply``), defined here so that the state
#: file's checks name it without importing the controller (which imports this module).
NVPMODEL_KIND = "jetson"
STATE_FILE_NAME = "powermode-restore.json"
#: The custom nvpmodel configuration lives beside the state file, so ``restore`` can remove it too.
CUSTOM_CONF_NAME = "nvpmodel-custom.conf"
#: ``jetson_clocks --store`` of the clocks in force in the mode a record restores (a run's start in the original);
#: also a run's store of an applied mode whose kept record names :data:`RUN_CLOCKS_STORE_NAME`.
CLOCKS_STORE_NAME = "jetson-clocks-store.conf"
#: A record's ``--store`` taken in a mode other than the original it records (over an applied mode or an
#: unfinished unlocked run's last mode): restored before the switch (its mode's caps must not outlive it).
RUN_CLOCKS_STORE_NAME = "jetson-clocks-run.conf"
#: Every ``--store`` kept beside a state file; a record handed on keeps its store under its name.
CLOCKS_STORE_NAMES = (CLOCKS_STORE_NAME, RUN_CLOCKS_STORE_NAME)
#: Held (flock) by the run that changes power modes, from its check for another run to its restore: in
#: :data:`LOCK_DIR`, the folder every user of the device can create a file in, else in the state folder.
LOCK_FILE_NAME = "jetpredict-powermode.lock"
LOCK_DIR = "/run/lock"
SCHEMA_VERSION = 1
#: ``/proc/<pid>/stat`` field (1-based) holding the process start time, in clock ticks since boot.
PROC_START_TIME_FIELD = 22
#: The verb whose state file is kept on purpose (``kept``), for messages.
APPLY_COMMAND = "jetpredict apply"
log = logging.getLogger(__name__)
#: A state file bigger than this is not ours (a sysfs snapshot of every knob is a few kB).
MAX_STATE_BYTES = 1024 * 1024
#: The largest process id: pid_t is a signed 32-bit int (Linux, macOS); beyond it ``os.kill`` overflows.
MAX_PID = 2**31 - 1
#: The latest ``created_at`` (s since the epoch) a clock can show: 9999-12-31 00:00 UTC, in year 9999 in
#: every time zone (later ones overflow ``time.localtime``).
LATEST_CREATED_AT = 253_402_214_400


def _user_state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "jetpredict"


def _state_dirs_chosen() -> list[tuple[Path, str]]:
    """:func:`state_dirs`, each with what chose it (for a person)."""
    explicit = os.environ.get(STATE_DIR_ENV)
    if explicit:
        return [(Path(explicit), f"${STATE_DIR_ENV}")]
    if sysfs.is_fake_root():
        return [(sysfs.path("/var/lib/jetpredict"), f"the fake device root ${sysfs.ROOT_ENV}")]
    system = (Path("/var/lib/jetpredict"), "a run as root")
    user = (_user_state_dir(), "$XDG_STATE_HOME" if os.environ.get("XDG_STATE_HOME") else "~/.local/state, "
            "as $XDG_STATE_HOME is unset")
    # A run as a user (nvpmodel through sudo) writes the user's dir; `sudo jetpredict restore` looks there too.
    return [system, user] if privileged.is_root() else [user, system]


def state_dirs() -> list[Path]:
    """Where a state file may be, the one this process writes to first."""
    return [path for path, _ in _state_dirs_chosen()]


def state_dir() -> Path:
    """The directory this process writes its state file to."""
    return state_dirs()[0]


def state_path() -> Path:
    return state_dir() / STATE_FILE_NAME


def restore_command() -> str:
    """The command line with which a person restores from this process's state file: ``jetpredict restore``
    with the environment that chose the state dir (``$JETPREDICT_STATE_DIR``, a fake device root), after
    ``sudo`` when this process runs as root (a run started with sudo; as root only root's file is used)."""
    env = {STATE_DIR_ENV: os.environ.get(STATE_DIR_ENV),
           sysfs.ROOT_ENV: str(sysfs.root()) if sysfs.is_fake_root() else None}
    words = [f"{name}={shlex.quote(value)}" for name, value in env.items() if value]
    sudo = ["sudo"] if privileged.is_root() else []
    return " ".join([*sudo, *words, RESTORE_COMMAND])


def boot_id() -> str:
    """This boot's id (Linux), so a pid recorded before a reboot is not taken for a live run."""
    text = None
    with contextlib.suppress(OSError):
        text = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    return text or "unknown"


def process_start_time(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (Linux ``/proc/<pid>/stat``); None when it
    cannot be read (no such process, no /proc). The real /proc, as :func:`boot_id`: the pid is a real one."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Field 2, the command name, is in parentheses and may hold spaces or ')': count from after the last one.
    fields = text.rpartition(")")[2].split()
    try:
        return int(fields[PROC_START_TIME_FIELD - 3])
    except (IndexError, ValueError):
        return None


@dataclass
class RestoreState:
    """What ``jetpredict restore`` needs: the controller kind, the device and the saved snapshot."""

    kind: str  # "jetson" (nvpmodel) or "jetson-sysfs"
    device: str
    snapshot: Any  # the controller's snapshot(), JSON data
    original: dict[str, Any] = field(default_factory=dict)  # the original mode, for messages
    conf_path: str | None = None
    jetson_clocks: bool = False
    pid: int = field(default_factory=os.getpid)
    boot_id: str = field(default_factory=boot_id)
    host: str = field(default_factory=socket.gethostname)
    #: When the record was written, s since the epoch (the file's key: ``created_at``).
    created_at_s: float = field(default_factory=time.time)
    path: Path | None = None  # where it was read from (not stored)
    #: ``pid``'s start, clock ticks since boot (:func:`process_start_time`); None: unknown (an older file).
    #: The file's key is ``start_time``.
    start_time_ticks: int | None = None
    kept: bool = False  # left on purpose by `jetpredict apply`: a later run returns to the mode it set
    #: Written by a run that started over a kept record: it returns to the applied mode and writes the
    #: record back kept; after a crash it is an unfinished run's like any other.
    over_applied: bool = False

    def __post_init__(self) -> None:
        # A new record (not one read from a file) is its pid's: note when that process started, so that
        # another process given the same pid later does not pass for its run.
        if self.start_time_ticks is None and self.path is None:
            self.start_time_ticks = process_start_time(self.pid)

    def to_json(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, "kind": self.kind, "device": self.device,
                "snapshot": self.snapshot, "original": self.original, "conf_path": self.conf_path,
                "jetson_clocks": self.jetson_clocks, "pid": self.pid, "boot_id": self.boot_id,
                "host": self.host, "created_at": self.created_at_s, "start_time": self.start_time_ticks,
                "kept": self.kept, "over_applied": self.over_applied}

    def claimed(self, over_applied: bool = False) -> RestoreState:
        """This record as this process's (pid, boot, start time; not kept): a third run sees a live owner."""
        return dataclasses.replace(self, pid=os.getpid(), boot_id=boot_id(),
                                   start_time_ticks=process_start_time(os.getpid()), kept=False,
                                   over_applied=over_applied)

    def run_alive(self) -> bool:
        """True when the run that wrote this file still runs: same boot, its pid exists and, when the file
        records it, that process started when the run did (a pid reused by another process is not it)."""
        if self.boot_id != boot_id() or self.pid == os.getpid():
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # another user's process: it exists
        if self.start_time_ticks is None:
            return True  # an older file: the pid is all there is
        started = process_start_time(self.pid)
        # Unreadable (a /proc mounted hidepid): the pid exists, so err on the side of a live run.
        return started is None or started == self.start_time_ticks

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.created_at_s))
        mode = self.original.get("mode") or "?"
        by = f"`{APPLY_COMMAND}`, pid {self.pid}," if self.kept else f"pid {self.pid}"
        return f"{mode} on {self.device} (saved by {by} at {when})"

    def manual_hint(self) -> str:
        """The way out when a restore cannot write knobs back (:class:`~.base.RestoreIncomplete`): set them by
        hand, then remove this file; for a person to act on."""
        return (f"set those knobs by hand (as root: echo VALUE > FILE), then remove {self.path or state_path()}: "
                f"the board is then in its original mode; or run `{restore_command()}` again once they take writes")

    def restore_hint(self) -> str:
        """Which file keeps this original mode and the command that puts it back, for a person to act on."""
        return f"{self.path or state_path()} keeps it; to put it back, run: {restore_command()}"


class StateFileError(RuntimeError):
    """A state file exists but cannot be read as one of ours."""


def write_state(state: RestoreState) -> Path:
    """Write ``state`` atomically (temp file, fsync, rename) to :func:`state_path`."""
    path = state_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        replace_file(path, json.dumps(state.to_json(), indent=1).encode(), mode=0o600)
    except OSError as err:  # a bare "[Errno 2] ... '/x'" did not say which file or what chose its folder
        raise StateFileError(f"cannot write the power-mode state file {path}: {err.strerror or err} (its folder "
                             f"chosen by {_state_dirs_chosen()[0][1]}; ${STATE_DIR_ENV} sets another)") from err
    state.path = path
    return path


def check_owner(path: Path, st: os.stat_result) -> None:
    """As root, refuse a file of the state dir (the state file, a custom nvpmodel configuration) another user
    could have written: restore acts on it with root rights."""
    if not privileged.is_root():
        return
    if st.st_uid != 0:
        raise StateFileError(f"{path} is owned by uid {st.st_uid}, not root: refusing to restore as root from a "
                             "file another user could have written; check it and remove it")
    if st.st_mode & 0o022:
        raise StateFileError(f"{path} is writable by group or others (mode {st.st_mode & 0o777:o}): refusing to "
                             "restore as root from it; check it and remove it")


def read_state(path: Path) -> RestoreState:
    """Parse one state file; :class:`StateFileError` names what is wrong with it."""
    try:
        if not path.is_file():
            raise StateFileError(f"{path} is not a regular file")
        st = path.stat()
        check_owner(path, st)
        if st.st_size > MAX_STATE_BYTES:
            raise StateFileError(f"{path} is larger than {MAX_STATE_BYTES} bytes: not a jetpredict state file")
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise StateFileError(f"{path} cannot be read: {err}") from None
    except RecursionError:  # brackets nested past the interpreter's limit exhaust the JSON reader
        raise StateFileError(f"{path} cannot be read: not JSON, nested too deeply") from None
    if not isinstance(doc, dict) or doc.get("schema_version") != SCHEMA_VERSION:
        raise StateFileError(f"{path}: not a jetpredict state file of schema version {SCHEMA_VERSION}")
    start_time = doc.get("start_time")
    if start_time is not None and (not isinstance(start_time, int) or isinstance(start_time, bool)
                                   or start_time < 0):
        raise StateFileError(f"{path}: start_time {start_time!r} is not a count of clock ticks")
    pid, created_at = _checked_pid(path, doc.get("pid")), _checked_created_at(path, doc.get("created_at"))
    flags = {name: doc.get(name, False) for name in ("kept", "over_applied")}
    bad = [name for name, value in flags.items() if not isinstance(value, bool)]
    if bad:
        raise StateFileError(f"{path}: {bad[0]} {flags[bad[0]]!r} is not true or false")
    try:
        return RestoreState(kind=str(doc["kind"]), device=str(doc["device"]), snapshot=doc["snapshot"],
                            original=dict(doc.get("original") or {}), conf_path=doc.get("conf_path"),
                            jetson_clocks=bool(doc.get("jetson_clocks")), pid=pid,
                            boot_id=str(doc.get("boot_id") or ""), host=str(doc.get("host") or ""),
                            created_at_s=created_at, path=path,
                            start_time_ticks=start_time, **flags)
    except (KeyError, TypeError, ValueError) as err:
        raise StateFileError(f"{path}: missing or bad field {err}") from None


def _checked_pid(path: Path, pid: object) -> int:
    """The recorded pid, or :class:`StateFileError`: a pid out of range would overflow ``os.kill``, and -1 or 0
    (``int(None or 0)``) signal a group, which always "exists", so the run would seem to run forever."""
    if pid is None:
        raise StateFileError(f"{path}: pid is missing: it must be the process id of the run that wrote the file")
    if isinstance(pid, bool) or not isinstance(pid, int) or not 1 <= pid <= MAX_PID:
        raise StateFileError(f"{path}: pid {pid!r} is not a process id: it must be a whole number from 1 to "
                             f"{MAX_PID}")
    return pid


def _checked_created_at(path: Path, created_at: object) -> float:
    """The recorded time, s since the epoch (0.0 when the file has none: it is only shown), or
    :class:`StateFileError` for one no clock can show (it would overflow ``time.localtime`` in messages)."""
    if created_at is None:
        return 0.0
    # A comparison, not math.isfinite: NaN and inf fail it, and a huge JSON int does not overflow it.
    if isinstance(created_at, bool) or not isinstance(created_at, int | float) \
            or not 0 <= created_at <= LATEST_CREATED_AT:
        raise StateFileError(f"{path}: created_at {created_at!r} is not a time: it must be seconds since the "
                             "epoch (1970) up to the end of year 9999")
    return float(created_at)


def find_state() -> RestoreState | None:
    """The state file of an unfinished run, from the first directory of :func:`state_dirs` holding one."""
    for directory in state_dirs():
        path = directory / STATE_FILE_NAME
        try:
            found = path.exists()
        except PermissionError:
            # A dir a sudo run left (0700, root): not this user's business, and no reason to fail the run.
            log.warning("cannot look into %s (permission denied); if a run as root was interrupted there, "
                        "run `sudo %s`", directory, RESTORE_COMMAND)
            continue
        if found:
            return read_state(path)
    return None


def clear_state(state: RestoreState | None = None) -> None:
    """Remove the state file and the files kept beside it (custom nvpmodel conf, jetson_clocks stores)."""
    directory = state.path.parent if state is not None and state.path is not None else state_dir()
    for name in (STATE_FILE_NAME, CUSTOM_CONF_NAME, *CLOCKS_STORE_NAMES):
        with contextlib.suppress(FileNotFoundError):
            (directory / name).unlink()


def run_named(pid: int | None) -> str:
    """A run switching power modes, for messages: ``pid 1234`` (or that it has not written its pid yet)."""
    return f"pid {pid}" if pid is not None else "pid not recorded yet"


class LockHeldError(RuntimeError):
    """Another process holds the power-mode lock; ``pid`` is the one it recorded (None: not yet written);
    ``holder`` names it when it is no run (a command a killed run left running)."""

    def __init__(self, pid: int | None, holder: str | None = None) -> None:
        self.pid = pid
        self.holder = holder
        super().__init__(f"the power-mode lock is held by {self.who()}")

    def who(self) -> str:
        """The holder, for messages (:func:`run_named`)."""
        return self.holder or run_named(self.pid)


def _lock_record(fd: int) -> tuple[int | None, tuple[int, int] | None]:
    """What a lock file says: its holder's pid, and the (pid, start time) of the privileged command the
    holder had running when it last wrote (None: none, or not recorded)."""
    words = os.pread(fd, 64, 0).decode(errors="replace").split()
    numbers = [int(w) for w in words if w.isdigit()]
    holder = numbers[0] if words and words[0].isdigit() else None
    return holder, (numbers[1], numbers[2]) if len(numbers) == 3 else None


def _wait_for_orphan(command: tuple[int, int] | None) -> None:
    """Wait for a privileged command a killed holder left running (it outlives its parent, in its own
    session) to end, for up to a command's timeout: a restore under it would be undone when it lands.
    :class:`LockHeldError` naming it (``holder``) when it runs on."""
    if command is None:
        return
    pid, started = command
    deadline = time.monotonic() + privileged.COMMAND_TIMEOUT_S
    if process_start_time(pid) == started:
        log.warning("waiting for pid %d, a power-mode command a killed run left running, to end", pid)
    while process_start_time(pid) == started:
        if time.monotonic() > deadline:
            raise LockHeldError(pid, f"a power-mode command a killed run left running (pid {pid})")
        time.sleep(ORPHAN_POLL_S)


#: How often :meth:`ModeLock.take` tries again when the file it locked was removed under it by its releaser.
LOCK_TRIES = 20
#: How often (s) a new holder of the lock checks whether a killed holder's command has ended.
ORPHAN_POLL_S = 0.05


def lock_path(state_folder: Path | None = None) -> Path:
    """The power-mode lock: in :data:`LOCK_DIR` (under a fake device root, the root's), one for every user of
    the device; where this process cannot create a file there (no such folder, a read-only one, one only
    root may write), beside the state file in ``state_folder`` (default :func:`state_dir`)."""
    shared = sysfs.path(LOCK_DIR) if sysfs.is_fake_root() else Path(LOCK_DIR)
    if shared.is_dir() and os.access(shared, os.W_OK | os.X_OK):
        return shared / LOCK_FILE_NAME
    if shared.is_dir():  # there, but not for this process: runs of other users no longer exclude this one
        log.warning("cannot create files in %s: the power-mode lock is kept beside the state file, where runs "
                    "of other users do not see it", shared)
    return (state_folder or state_dir()) / LOCK_FILE_NAME


def _open_lock(path: Path) -> tuple[int, bool]:
    """``path`` opened (created if missing, never through a symlink) for the lock: (descriptor, writable).
    In the shared folder another user's file may refuse a create-open (``protected_regular``) or a write:
    it is opened as it may be, read-only at worst, which ``flock`` takes all the same."""
    created = 0o666 if path.parent.stat().st_mode & stat.S_ISVTX else 0o600  # others' runs open it too
    for _ in range(LOCK_TRIES):  # a file removed between two opens (its holder released it): again
        for flags in (os.O_RDWR | os.O_CREAT, os.O_RDWR, os.O_RDONLY):
            try:
                fd = os.open(path, flags | os.O_NOFOLLOW, created)
            except FileNotFoundError:
                break
            except PermissionError:
                if flags == os.O_RDONLY:
                    raise
                continue
            if flags & os.O_CREAT and os.fstat(fd).st_uid == os.geteuid():
                with contextlib.suppress(OSError):
                    os.fchmod(fd, created)  # the umask's 0644 would refuse other users' pid writes
            return fd, flags != os.O_RDONLY
    raise LockHeldError(None)


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``path`` is still the file open as ``fd`` (its holder removes it as it releases the lock)."""
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path, follow_symlinks=False))
    except FileNotFoundError:
        return False


@dataclass
class ModeLock:
    """An exclusive ``flock`` on :func:`lock_path`: held by the one run that may change power modes, from its
    check for another run to the end of its restore. The file holds the holder's pid (for the refusal's
    message) and that of the privileged command it has running (:func:`privileged.observe_children`), and
    is removed on release, so a clean run leaves nothing behind."""

    path: Path
    fd: int
    pid: int  # the process that took it; a process forked meanwhile shares the lock but never releases it
    writable: bool = True

    @classmethod
    def take(cls, state_folder: Path | None = None) -> ModeLock:
        """Lock :func:`lock_path` (``state_folder``: see there): at once, or :class:`LockHeldError` naming
        the holder's pid when another run has it; on a file a killed holder left, once the command it had
        running has ended (up to a command's timeout, :func:`_wait_for_orphan`)."""
        path = lock_path(state_folder)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        for _ in range(LOCK_TRIES):
            # O_NOFOLLOW: as root, never open where a planted link points. Python's descriptors are not
            # inherited by the nvpmodel it runs, so a tool left running cannot keep the lock.
            fd, writable = _open_lock(path)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if _same_file(fd, path):
                    # A killed holder's file, whoever's run it was (`sudo jetpredict restore` after a user's run
                    # was killed): its command may run on. Any local user may write the file, or hold the lock:
                    # it serves runs that cooperate, not a defence against them (the wait is bounded).
                    _wait_for_orphan(_lock_record(fd)[1])
                    lock = cls(path, fd, os.getpid(), writable)
                    lock.note_child(None)
                    privileged.observe_children(lock.note_child)
                    return lock
            except BlockingIOError:
                holder = _lock_record(fd)[0]
                os.close(fd)
                raise LockHeldError(holder) from None
            except BaseException:
                os.close(fd)
                raise
            # Locked a file its holder removed as it released it: lock the one at the path now.
            os.close(fd)
        raise LockHeldError(None)

    @property
    def held(self) -> bool:
        """Whether this process holds it: taken here and not released (False in a process forked meanwhile)."""
        return self.fd >= 0 and self.pid == os.getpid()

    def note_child(self, pid: int | None) -> None:
        """Record this holder's pid and ``pid``, the privileged command it has running (None: none)."""
        if not self.held or not self.writable:
            return
        started = None if pid is None else process_start_time(pid)
        text = f"{self.pid}\n" + ("" if started is None else f"{pid} {started}\n")
        with contextlib.suppress(OSError):  # the record is for a later restore's wait; the command runs anyway
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, text.encode(), 0)

    def release(self) -> None:
        """Remove the file, then unlock (in that order: a run that opened it meanwhile sees it gone and
        locks a new one). A no-op in a process forked while it was held: the lock is its parent's."""
        if not self.held:
            return
        privileged.observe_children(None)
        fd, self.fd = self.fd, -1
        try:
            if _same_file(fd, self.path):
                # Another user's file in the shared folder is theirs to remove (sticky): it stays, unlocked.
                with contextlib.suppress(PermissionError):
                    self.path.unlink()
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)  # explicit: a forked child's copy of the descriptor must not keep it
            os.close(fd)


def refusal(earlier: RestoreState, kind: str) -> str | None:
    """Why a run whose controller is of ``kind`` may not switch modes over ``earlier``, a state file another
    kind of controller wrote (it could not put those settings back); None when it may (it adopts the file)."""
    if earlier.kind == kind:
        return None
    who = f"`{APPLY_COMMAND}`" if earlier.kept else f"an unfinished {earlier.kind} run"
    return f"{who} left {earlier.kind} settings in {earlier.path}; run `{RESTORE_COMMAND}` first"


def kept_message(state: RestoreState) -> str:
    """What a run that starts over ``state``, a record ``apply`` kept, does about it, for a person."""
    return (f"the power mode in force was set by `{APPLY_COMMAND}`: this run returns to it at its end, and "
            f"the original mode from before that ({state.describe()}) stays for `{RESTORE_COMMAND}`")


def unfinished_run_warning(kind: str = NVPMODEL_KIND, switches: bool = True) -> str | None:
    """A warning for the start of ``profile`` when a state file from an unfinished run exists, else None.

    ``kind``: the controller kind of this run (``profile --device jetson``'s: nvpmodel's). What the run
    will do with the file is decided here as its controller decides it (:func:`refusal`), so the two never
    contradict: a run that will be refused is warned of nothing (its error says why), one that adopts the
    file is told it restores that original at its end. ``switches=False``: a run that changes no mode (host, the
    twin) is only told the device's mode is changed and how to put it back."""
    try:
        state = find_state()
    except StateFileError as err:
        return f"a power-mode state file cannot be read ({err}); remove it after checking the mode"
    if state is None:
        return None
    if state.run_alive():
        return (f"another jetpredict run (pid {state.pid}) is changing power modes; its original mode is "
                f"{state.describe()}")
    if switches and refusal(state, kind) is not None:
        return None
    if state.kept:
        return kept_message(state)
    changed = f"an unfinished run left the device in a changed power mode; original: {state.describe()}. "
    if not switches:
        return changed + f"This run changes no power mode; `{RESTORE_COMMAND}` puts it back."
    return changed + f"This run restores that original mode at its end; `{RESTORE_COMMAND}` does it now."

"""The power-mode controller abstraction: switch modes, read back the clocks in force, always restore.

Used as a context manager, a controller remembers the mode in force on entry and restores it on every
exit path: normal end, exception, SIGINT, SIGTERM, SIGHUP (an SSH session dropping) and SIGQUIT.
Handlers are installed while inside, when entered from the main thread, and chain to the handlers that
were there before; a signal the process ignores (``nohup`` ignores SIGHUP) stays ignored.

Why restore survives impatient people: while a switch or a restore runs, the handled signals are held
(a signal that arrives is recorded, and the handler in place acts on it once the block is done) and the
privileged command runs in its own session, so a Ctrl-C neither interrupts the switch or restore nor
kills the running ``nvpmodel``. Holding is done in Python's handlers, not with a thread's signal mask:
the kernel hands a process signal to any thread that does not block it (the power sampler, torch's
pool), and Python runs the handler in the main thread all the same. The saved state is dropped only after a restore succeeded, so a restore that fails
on the signal path is tried again on the exit path. Controllers that change the machine
(``persistent = True``) also write the original mode to a state file before the first switch
(:mod:`profiler.powermode.state`), which ``jetpredict restore`` uses after a SIGKILL, a crash or a reboot;
when the restore on the way out fails, its :class:`RestoreFailedError` names that file and the command to run.
They also hold the device's power-mode lock (:class:`profiler.powermode.state.ModeLock`) from the check for
another run until they leave the block (their restore done, or ``keep``), so of two runs started at once the
second is refused; a campaign takes it before building its workload (:func:`take_mode_lock`) and hands it to
its controller (:meth:`PowerModeController.hold_lock`), so that refusal comes before seconds of set-up.
SIGTERM, SIGHUP and SIGQUIT end the run with :class:`SignalExit` (status 128 + the signal, as their default
action would) once the mode is back, so a command line can say why it stopped.
A state file ``jetpredict apply`` kept on purpose is not adopted: the run returns to the mode in force when
it started (the applied one) and writes the apply's record back for ``jetpredict restore``; while it runs,
the file holds the apply's original under the run's pid, which is what a crash leaves to restore.

Only the process that entered restores: a process forked inside the block (a DataLoader worker) inherits
the handlers and the saved state, and on a Ctrl-C sent to the whole process group it must stop as the
owner would, without putting the mode back nor removing the state file (the owner does both).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from jetpredict.models.catalogue import PowerMode
from jetpredict.profiler.powermode.privileged import PrivilegedCommandError

if TYPE_CHECKING:
    from jetpredict.profiler.runner import MinibatchCallback

log = logging.getLogger(__name__)

HANDLED_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT")
                        if hasattr(signal, name))
#: Held during a switch or a restore besides those: a child's end. torch's DataLoader handles SIGCHLD by
#: raising when a worker died, which a stop sent to the process group causes; run in the middle of a
#: restore it would cut it short, so it runs once the restore is done.
HELD_SIGNALS = HANDLED_SIGNALS + tuple(getattr(signal, name) for name in ("SIGCHLD",) if hasattr(signal, name))


#: While signals are held: the handler each held signal goes back to when the hold ends (set through
#: :func:`set_handler` inside the hold), and the signals that arrived, in order.
_held_handlers: dict[int, Any] = {}
_held_arrived: list[int] = []


def _record_signal(signum: int, frame: Any) -> None:
    _held_arrived.append(signum)


def get_handler(sig: int) -> Any:
    """The handler of ``sig`` as it will be outside any hold (:func:`signal.getsignal` otherwise)."""
    return _held_handlers[sig] if sig in _held_handlers else signal.getsignal(sig)


def set_handler(sig: int, handler: Any) -> Any:
    """:func:`signal.signal` that a hold respects: inside :func:`held_signals` the handler takes over when
    the hold ends (and acts on the signals that arrived in it). Returns the previous handler."""
    if sig in _held_handlers:
        previous, _held_handlers[sig] = _held_handlers[sig], handler
        return previous
    return signal.signal(sig, handler)


@contextlib.contextmanager
def held_signals() -> Iterator[None]:
    """Hold :data:`HELD_SIGNALS` for the block (main thread; nested holds are one): a signal that arrives
    is recorded, and once the block is done the handler then in place acts on each kind that came, once.
    An ignored signal stays ignored."""
    if threading.current_thread() is not threading.main_thread() or _held_handlers:
        yield  # only the main thread runs Python signal handlers; an outer hold holds already
        return
    for sig in HELD_SIGNALS:
        current = signal.getsignal(sig)
        if current not in (signal.SIG_IGN, None):  # None: a handler set outside Python, left alone
            _held_handlers[sig] = current
            signal.signal(sig, _record_signal)
    try:
        yield
    finally:
        handlers = dict(_held_handlers)
        _held_handlers.clear()
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        arrived = list(dict.fromkeys(_held_arrived))
        _held_arrived.clear()
        for signum in arrived:
            _act_on(signum, handlers[signum])


def _act_on(signum: int, handler: Any) -> None:
    """What the process would have done had ``signum`` come outside the hold."""
    if callable(handler):
        handler(signum, None)
    elif handler == signal.SIG_DFL:
        signal.raise_signal(signum)  # the default action (SIGINT's default handler is callable)


#: What a run stopped by a signal or a Ctrl-C says of the power mode once its controller put it back.
RESTORED_CLAUSE = "the power mode in force before it was restored"


class RestoreFailedError(PrivilegedCommandError):
    """The restore on a controller's way out failed: the state file stays; the message says what to run."""


class RestoreIncomplete(PrivilegedCommandError):
    """A restore wrote what it could, yet knobs still differ from their saved values (a write the kernel
    refuses): ``differ`` maps each such knob to (the text it holds now, None when unreadable; the saved text).
    Running the restore again cannot help until they take writes: the way out is by hand."""

    def __init__(self, message: str, differ: dict[str, tuple[str | None, str]]) -> None:
        super().__init__(message)
        self.differ = differ


class SignalExit(SystemExit):
    """The run was stopped by ``signum`` (SIGTERM, SIGHUP, SIGQUIT): exit status 128 + the signal, as the
    signal's default action would give. ``restored``: the controller put the mode back on the way;
    ``unrestored``: what :meth:`describe` says otherwise (``jetpredict apply``: that its mode stays)."""

    def __init__(self, signum: int, restored: bool = False) -> None:
        super().__init__(128 + signum)
        self.signum, self.restored, self.unrestored = signum, restored, ""

    def describe(self) -> str:
        """``stopped by SIGTERM`` and what became of the power mode: for a person."""
        after = RESTORED_CLAUSE if self.restored else self.unrestored
        return f"stopped by {signal.Signals(self.signum).name}" + (f"; {after}" if after else "")


def _another_run(held: Any, earlier: Any) -> PrivilegedCommandError:
    """The refusal of a second run on a device another run is switching (``held``: the
    :class:`~.state.LockHeldError` naming it); ``earlier``: its state file, when it has written one."""
    if held.holder is not None:  # no run: a command a killed run left running
        return PrivilegedCommandError(f"{held.holder} has not ended; wait for it to end")
    original = f" (original mode: {earlier.describe()})" if earlier is not None and earlier.pid == held.pid else ""
    # Two runs switching one device would each "restore" the other's mode; refuse the second.
    return PrivilegedCommandError(f"another jetpredict run ({held.who()}) is changing power modes on this device; "
                                  f"wait for it to end{original}")


def take_mode_lock() -> Any:
    """The device's power-mode lock (:class:`~.state.ModeLock`), held from here; when another run holds it,
    :class:`PrivilegedCommandError` naming that run (and its original mode once it has saved it)."""
    from jetpredict.profiler.powermode import state as state_file

    try:
        return state_file.ModeLock.take()
    except state_file.LockHeldError as err:
        try:
            holder = state_file.find_state()  # its original mode, when it has saved it yet
        except state_file.StateFileError:
            holder = None
        raise _another_run(err, holder) from None


class TrainingClockReader(Protocol):
    """What a campaign asks of the clocks read while training (:meth:`PowerModeController.training_clock`)."""

    def on_minibatch(self, phase: str, i: int, n: int) -> None:
        """A runner's per-minibatch callback: read the clocks after a measured minibatch."""

    def in_force(self) -> PowerMode:
        """The read-back with the clocks (MHz) training ran at."""

    def note(self) -> str:
        """The sidecar's note on where the row's clocks come from."""


class PowerModeController(ABC):
    """Sets and reads power modes on one machine (``kind`` is ``host``, ``jetson``, ...)."""

    kind: str = "abstract"
    #: True for controllers that change the machine beyond this process: they keep a state file.
    persistent: bool = False

    def __init__(self) -> None:
        self._saved: Any = None
        self._has_saved = False
        self._state_file = None  # profiler.powermode.state.RestoreState while one is on disk
        self._kept = None  # the RestoreState `jetpredict apply` kept, written back after our restore
        self._previous_handlers: dict[int, Any] = {}
        self._restore_lock = threading.RLock()
        self._owner_pid: int | None = None  # the process that saved the state; only it restores
        self._lock: Any = None  # profiler.powermode.state.ModeLock: taken by remember() (or given to hold_lock),
        # released by __exit__

    def _is_owner(self) -> bool:
        """True in the process that saved the state (False in a child forked while inside)."""
        return self._owner_pid == os.getpid()

    @abstractmethod
    def current(self) -> PowerMode:
        """The mode configured now (preset caps or the custom mode last applied)."""

    @abstractmethod
    def apply(self, mode: PowerMode) -> None:
        """Switch to ``mode``; raises :class:`models.errors.InputError` for a mode this machine lacks."""

    @abstractmethod
    def read_back(self) -> PowerMode:
        """The cores online and clocks (MHz) actually in force, read from the hardware."""

    def training_clock(self, read_back: PowerMode, then: MinibatchCallback | None = None
                       ) -> TrainingClockReader | None:
        """For a controller that only reads the clocks (the host): a reader of those training runs at, whose
        ``on_minibatch`` wraps ``then`` (:class:`~.host.TrainingClock`); None where the switch sets them."""
        return None

    def caps_of(self, mode: PowerMode) -> PowerMode:
        """The caps (MHz) a switch to ``mode`` sets on this machine: ``mode`` itself, but where the machine's
        own configuration defines it (a board's nvpmodel preset), that definition, and where the machine has
        frequency steps, the step each clock runs at."""
        return mode

    def snapshot(self) -> Any:
        """State to restore later; by default the current mode."""
        return self.current()

    def restore_snapshot(self, state: Any, store_dir: Path | None = None) -> None:
        """Put back a state taken by :meth:`snapshot`; by default re-apply the saved mode. ``store_dir``: the
        directory of the state file it was read from, where a controller keeps its other saved files."""
        self.apply(state)

    def restore_state(self, snapshot: Any) -> Any:
        """A :class:`profiler.powermode.state.RestoreState` for ``snapshot`` (persistent controllers)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no state file")

    def snapshot_in_force(self, kept: Any) -> Any:
        """The mode in force now, which ``jetpredict apply`` set (its record: ``kept``, whose saved files it
        must leave alone): what :meth:`restore_in_force` puts back at the end of this run; None when it cannot
        be put back. Held in memory only (the state file keeps the apply's original), so it may carry what a
        file must not (a custom nvpmodel configuration)."""
        return self.snapshot()

    def restore_in_force(self, state: Any) -> None:
        """Put back a state taken by :meth:`snapshot_in_force`: by default as :meth:`restore_snapshot`."""
        self.restore_snapshot(state)

    def remember(self) -> None:
        """Save the state in force now, for :meth:`restore`; persistent controllers also write it to disk.

        When a state file from an unfinished run exists, its original mode is the one to come back to
        (the mode in force now is what that run left behind), so it is adopted rather than overwritten.
        A file ``jetpredict apply`` kept is different: the mode in force was chosen, so it is what
        :meth:`restore` puts back, and the file is rewritten with our pid (a second run sees a live owner)
        but the apply's original (what ``jetpredict restore`` puts back should we die); :meth:`restore`
        writes the apply's record back as it was.
        """
        if not self.persistent:
            self._saved, self._has_saved, self._owner_pid = self.snapshot(), True, os.getpid()
            return
        from jetpredict.profiler.powermode import state as state_file

        # The lock first: checking for another run and writing our file must be one step, else two runs
        # started together both find no file, and each later "restores" the mode the other set.
        if self._lock is None or not self._lock.held:
            self._lock = take_mode_lock()
        try:
            self._claim_state(state_file)
        except BaseException:
            self._release_lock()
            raise

    def hold_lock(self, lock: Any) -> None:
        """Hold on to ``lock``, the power-mode lock (:func:`take_mode_lock`) taken before the block: a campaign
        takes it before building its workload, so that a second run is refused in a second rather than once it
        has built it. :meth:`remember` then takes no other, and it is released as its own would be (leaving the
        block, a failed claim); its taker releases it should the block never be entered."""
        self._lock = lock

    def _claim_state(self, state_file: Any) -> None:
        """:meth:`remember` for a persistent controller, under the lock: adopt, take over or write the file."""
        try:
            earlier = state_file.find_state()
        except state_file.StateFileError as err:
            # It may hold the only record of the mode an unfinished run changed: overwriting it with the mode in
            # force now would make that mode the one every later restore puts back.
            raise PrivilegedCommandError(
                f"a power-mode state file is in the way and cannot be read: {err}; `{state_file.RESTORE_COMMAND}` "
                "says the same; put the power mode you want back by hand, then remove the file") from err
        if earlier is not None and earlier.run_alive():  # a run of a jetpredict that took no lock
            raise _another_run(state_file.LockHeldError(earlier.pid), earlier)
        refused = state_file.refusal(earlier, self.kind) if earlier is not None else None
        if refused is not None:
            raise PrivilegedCommandError(refused)
        in_force = self._in_force_over(earlier) if earlier is not None and earlier.kept else None
        if in_force is not None:
            log.info("%s", state_file.kept_message(earlier))
            record = earlier.claimed(over_applied=True)
        elif earlier is not None:
            if not earlier.kept:
                log.warning("adopting the original power mode of an unfinished run: %s", earlier.describe())
            # Ours now: a third run must see a live owner, not the dead one's pid.
            record = earlier.claimed()
        else:
            record = self.restore_state(self.snapshot())
        record = self.claim_record(record, in_force)
        state_file.write_state(record)
        self._saved = in_force if in_force is not None else record.snapshot
        self._has_saved, self._state_file = True, record
        self._kept = earlier if in_force is not None else None
        self._owner_pid = os.getpid()

    def claim_record(self, record: Any, in_force: Any) -> Any:
        """The record to write before the first switch, from ``record`` (adopted, claimed over an apply's, or
        new) and ``in_force`` (what this run returns to over an apply's; None otherwise): by default as is."""
        return record

    def drop_own_files(self, kept: Any) -> None:
        """Remove the files this run saved beside ``kept``, the record written back (``jetpredict apply``'s),
        sparing those it names: none here."""
        return None

    def _release_lock(self) -> None:
        """Release the power-mode lock (a no-op in a forked child: :meth:`ModeLock.release` checks)."""
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.release()

    def _in_force_over(self, kept: Any) -> Any:
        """:meth:`snapshot_in_force` over the record ``kept`` that ``jetpredict apply`` left; None (with a
        warning: the run then ends in that record's original) when the mode in force cannot be put back."""
        from jetpredict.profiler.powermode import state as state_file

        try:
            in_force = self.snapshot_in_force(kept)
        except PrivilegedCommandError as err:  # e.g. a query the board's tool cannot answer in that mode
            log.warning("cannot read the power mode in force (%s)", err)
            in_force = None
        if in_force is None:
            log.warning("the power mode `%s` set cannot be put back as it is; this run ends in the original "
                        "from before it instead: %s", state_file.APPLY_COMMAND, kept.describe())
        return in_force

    def keep(self) -> None:
        """Leave the mode switched on purpose (``jetpredict apply``): nothing is restored on the way out, and
        the state file is marked kept, so ``jetpredict restore`` puts its original back later and a later
        run returns to the mode in force rather than adopting that original. No-op in a forked child."""
        with self._restore_lock, held_signals():
            if not self._has_saved or not self._is_owner():
                return
            if self._state_file is not None:
                from jetpredict.profiler.powermode import state as state_file

                state_file.write_state(dataclasses.replace(self._state_file, kept=True, over_applied=False))
            self._saved, self._has_saved, self._state_file, self._kept = None, False, None, None

    def restore(self) -> bool:
        """Put back the remembered state; returns False when there was nothing to restore.

        Signals are held while it runs. The saved state (and the state file) is dropped only after the
        restore succeeded: a failure raises and leaves it for the next try (the exit path, or
        ``jetpredict restore``); over a record ``jetpredict apply`` kept, the file becomes that record again
        rather than going. In a process forked inside the block it does nothing and returns False: the mode
        and the state file belong to the process that switched.
        """
        with self._restore_lock, held_signals():
            if not self._has_saved or not self._is_owner():
                return False
            log.info("%s: restoring the %s power mode", self.kind,
                     "applied" if self._kept is not None else "original")
            if self._kept is not None:
                self.restore_in_force(self._saved)
            else:
                self.restore_snapshot(self._saved)
            self._saved, self._has_saved = None, False
            if self._state_file is not None:
                from jetpredict.profiler.powermode import state as state_file

                if self._kept is not None:
                    # The applied mode is back: its original waits for `jetpredict restore` as before we ran.
                    state_file.write_state(self._kept)
                    self.drop_own_files(self._kept)
                else:
                    state_file.clear_state(self._state_file)
                self._state_file, self._kept = None, None
            return True

    # --- context manager and signals -------------------------------------------------------------

    def _on_signal(self, signum: int, frame: Any) -> None:
        # A forked child (restore() is a no-op there) still acts on the signal as the owner would: it stops.
        restored = False
        try:
            restored = self.restore()
        except Exception as err:
            if self._has_saved:  # the exit path tries again; the state file stays for `jetpredict restore`
                log.exception("%s: restoring the power mode on signal %d failed", self.kind, signum)
            else:  # restored; a held signal's handler raised after it (a DataLoader worker the stop ended)
                log.info("%s: power mode restored on signal %d; then: %s", self.kind, signum, err)
        finally:
            previous = self._previous_handlers.get(signum, signal.SIG_DFL)
            self._uninstall_handlers()
        if callable(previous):
            previous(signum, frame)
        elif signum == signal.SIGINT:
            raise KeyboardInterrupt
        else:  # default action of SIGTERM/SIGHUP/SIGQUIT: exit with the conventional status; finally runs
            raise SignalExit(signum, restored)

    def _install_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # Python only delivers signals to the main thread; exit paths still restore
        for sig in HANDLED_SIGNALS:
            # An ignored signal stays ignored (``nohup`` ignores SIGHUP): handling it would put the original
            # mode back and let the run go on profiling in it. The exit paths still restore.
            if get_handler(sig) != signal.SIG_IGN:
                self._previous_handlers[sig] = set_handler(sig, self._on_signal)

    def _uninstall_handlers(self) -> None:
        for sig, previous in list(self._previous_handlers.items()):
            if get_handler(sig) == self._on_signal:
                set_handler(sig, previous if previous is not None else signal.SIG_DFL)
        self._previous_handlers.clear()

    def __enter__(self) -> PowerModeController:
        with held_signals():  # a signal now would find a state file but no handler to restore it
            self.remember()
            self._install_handlers()
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        try:
            if self.restore() and isinstance(exc, SignalExit):
                exc.restored = True  # the restore on the signal failed, this retry did it
        except Exception as err:
            if self._state_file is None:
                raise
            # The last try: what is left to do is the person's, so say what to run and where the mode waits.
            details = ((err.argv, err.returncode, err.stderr) if isinstance(err, PrivilegedCommandError)
                       else ())
            from jetpredict.profiler.powermode.state import APPLY_COMMAND

            state = self._state_file
            what = (f"return to the power mode `{APPLY_COMMAND}` set; the original from before it is "
                    if self._kept is not None else "put back the original power mode ")
            # Knobs the kernel refuses to take back: `jetpredict restore` would fail the same way.
            hint = state.manual_hint() if isinstance(err, RestoreIncomplete) else state.restore_hint()
            raise RestoreFailedError(f"could not {what}{state.describe()}: {err}; {hint}", *details) from err
        finally:
            self._uninstall_handlers()
            # The one release on the way out (restored, kept or not): a failed restore leaves the state
            # file, naming us, for the next run.
            self._release_lock()

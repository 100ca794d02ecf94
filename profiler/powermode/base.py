"""The power-mode controller abstraction: switch modes, read back the clocks in force, always restore.

Used as a context manager, a controller remembers the mode in force on entry and restores it on every
exit path: normal end, exception, SIGINT and SIGTERM (handlers are installed while inside, when entered
from the main thread, and chain to the handlers that were there before).
"""

from __future__ import annotations

import logging
import signal
import threading
from abc import ABC, abstractmethod
from typing import Any

from jetpredict.models.catalogue import PowerMode

log = logging.getLogger(__name__)

HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class PowerModeController(ABC):
    """Sets and reads power modes on one machine (``kind`` is ``host``, ``jetson``, ...)."""

    kind: str = "abstract"

    def __init__(self) -> None:
        self._saved: Any = None
        self._has_saved = False
        self._previous_handlers: dict[int, Any] = {}
        self._restore_lock = threading.RLock()

    @abstractmethod
    def current(self) -> PowerMode:
        """The mode configured now (preset caps or the custom mode last applied)."""

    @abstractmethod
    def apply(self, mode: PowerMode) -> None:
        """Switch to ``mode``; raises :class:`models.errors.InputError` for a mode this machine lacks."""

    @abstractmethod
    def read_back(self) -> PowerMode:
        """The cores online and clocks (MHz) actually in force, read from the hardware."""

    def snapshot(self) -> Any:
        """State to restore later; by default the current mode."""
        return self.current()

    def restore_snapshot(self, state: Any) -> None:
        """Put back a state taken by :meth:`snapshot`; by default re-apply the saved mode."""
        self.apply(state)

    def remember(self) -> None:
        """Save the state in force now, for :meth:`restore`."""
        self._saved, self._has_saved = self.snapshot(), True

    def restore(self) -> bool:
        """Put back the remembered state (once); returns False when there was nothing to restore."""
        with self._restore_lock:
            if not self._has_saved:
                return False
            state, self._saved, self._has_saved = self._saved, None, False
            log.info("%s: restoring the original power mode", self.kind)
            self.restore_snapshot(state)
            return True

    # --- context manager and signals -------------------------------------------------------------

    def _on_signal(self, signum: int, frame: Any) -> None:
        try:
            self.restore()
        finally:
            previous = self._previous_handlers.get(signum, signal.SIG_DFL)
            self._uninstall_handlers()
            if callable(previous):
                previous(signum, frame)
            elif previous == signal.SIG_IGN:
                pass
            elif signum == signal.SIGINT:
                raise KeyboardInterrupt
            else:  # SIGTERM with the default action: exit with the conventional status, finally blocks run
                raise SystemExit(128 + signum)

    def _install_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # Python only delivers signals to the main thread; exit paths still restore
        for sig in HANDLED_SIGNALS:
            self._previous_handlers[sig] = signal.signal(sig, self._on_signal)

    def _uninstall_handlers(self) -> None:
        for sig, previous in list(self._previous_handlers.items()):
            if signal.getsignal(sig) == self._on_signal:
                signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
        self._previous_handlers.clear()

    def __enter__(self) -> PowerModeController:
        self.remember()
        self._install_handlers()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.restore()
        finally:
            self._uninstall_handlers()

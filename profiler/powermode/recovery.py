"""``jetpredict restore``: put back the original power mode recorded by an unfinished run's state file."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from jetpredict.models.catalogue import load_device
from jetpredict.profiler.powermode import state as state_file
from jetpredict.profiler.powermode.base import PowerModeController, RestoreIncomplete, held_signals

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RecoveryResult:
    """What :func:`restore_unfinished` did: ``restored`` False = nothing to do; ``message`` says why."""

    restored: bool
    message: str


class RunStillActive(RuntimeError):
    """The run that wrote the state file is still alive; restoring under it would fight its switches."""


def restore_unfinished(force: bool = False) -> RecoveryResult:
    """Restore the mode a state file records, then remove the file (and the files kept beside it).

    Raises :class:`state.StateFileError` for an unreadable file, :class:`RunStillActive` when its run is
    alive or another run holds the power-mode lock (unless ``force``), and :class:`PrivilegedCommandError` when the switch fails (file kept):
    :class:`~.base.RestoreIncomplete` naming the sysfs knobs still away from their saved values and the way out by
    hand. A sysfs record whose knobs all hold their saved values already is removed without a write.
    """
    state = state_file.find_state()
    if state is None:
        where = " or ".join(str(d / state_file.STATE_FILE_NAME) for d in state_file.state_dirs())
        return RecoveryResult(False, f"nothing to restore: no state file at {where}")
    if state.run_alive() and not force:
        raise RunStillActive(f"the run that saved {state.describe()} is still running (pid {state.pid}); "
                             "stop it (it restores on exit) or pass --force")
    lock = None
    if not force:  # --force restores under a live run, whose lock it cannot have
        try:
            # The device's lock (beside the file without /run/lock): no run started since it was read switches under us.
            lock = state_file.ModeLock.take(state.path.parent if state.path else None)
        except state_file.LockHeldError as err:
            if err.holder is not None:  # a command a killed run left running
                raise RunStillActive(f"{err.holder} has not ended; wait for it, then restore (or pass "
                                     "--force)") from None
            raise RunStillActive(f"another jetpredict run ({err.who()}) is changing power modes; stop it "
                                 "(it restores on exit) or pass --force") from None
    try:
        return _restore(state)
    finally:
        if lock is not None:
            lock.release()


def _restore(state: state_file.RestoreState) -> RecoveryResult:
    """Put back the mode ``state`` records and remove its files."""
    from jetpredict.profiler.powermode.custom import SysfsController

    device = load_device(state.device)
    controller: PowerModeController
    if state.kind == state_file.NVPMODEL_KIND:
        from jetpredict.profiler.powermode.nvpmodel import DEFAULT_CONF, NvpmodelController

        controller = NvpmodelController(device, state.conf_path or DEFAULT_CONF,
                                        jetson_clocks=state.jetson_clocks)
    elif state.kind == SysfsController.kind:
        controller = SysfsController(device)
    else:
        raise state_file.StateFileError(f"{state.path}: unknown controller kind {state.kind!r}")
    with held_signals():
        if isinstance(controller, SysfsController) and not controller.differences(state.snapshot):
            # Nothing to write (a failed restore whose knobs a person set, or that never changed): the file
            # alone stood between this board and the next run.
            state_file.clear_state(state)
            return RecoveryResult(True, f"the board already holds the original power mode {state.describe()}: "
                                  f"every knob has its saved value; removed {state.path}")
        try:
            # A saved file it names (a jetson_clocks store) must be the one beside the state file read.
            controller.restore_snapshot(state.snapshot, store_dir=state.path.parent if state.path else None)
        except RestoreIncomplete as err:  # writing again cannot help: say the way out by hand
            raise RestoreIncomplete(f"{err}; {state.manual_hint()}", err.differ) from err
        state_file.clear_state(state)
    return RecoveryResult(True, f"restored the original power mode {state.describe()}")

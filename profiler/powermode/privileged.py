"""The one place privileged commands (``nvpmodel``, ``jetson_clocks``) and sysfs writes go through.

Each command has a timeout, and failures become :class:`PrivilegedCommandError` with a message that
says what to do (run as root, allow passwordless sudo, install the tool) instead of a bare traceback.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import stat
import subprocess
from collections.abc import Callable, Sequence

from jetpredict.profiler import sysfs

#: Seconds a privileged command (nvpmodel, jetson_clocks) may run before it is stopped, so that a hung one
#: does not hang the run; also how long ``restore`` waits for one a killed run left running.
COMMAND_TIMEOUT_S = 30.0
#: Seconds a command stopped on a timeout or an interrupt has after SIGTERM before SIGKILL: longer than
#: tegrastats' (:data:`~profiler.power.tegrastats.TEGRASTATS_STOP_GRACE_S`): a mode switch gets time to
#: finish its writes rather than be killed between them.
STOP_GRACE_S = 5.0
#: Told the pid of each privileged command as it starts and None once it has ended (the power-mode lock's
#: record): a command outlives a SIGKILL of this process, so a restore must wait for a switch in flight.
_child_observer: Callable[[int | None], None] | None = None


def observe_children(observer: Callable[[int | None], None] | None) -> None:
    """Set (or, with None, clear) the one observer of the privileged commands' lifetimes."""
    global _child_observer
    _child_observer = observer


def _note_child(pid: int | None) -> None:
    if _child_observer is not None:
        _child_observer(pid)


class PrivilegedCommandError(RuntimeError):
    """A privileged command or write failed; ``argv`` and ``stderr`` say which and why."""

    def __init__(self, message: str, argv: Sequence[str] = (), returncode: int | None = None,
                 stderr: str = "") -> None:
        super().__init__(message)
        self.argv = list(argv)
        self.returncode = returncode
        self.stderr = stderr


def is_root() -> bool:
    """True when this process runs as root (effective uid 0); False on systems without uids."""
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _needs_sudo(exe: str) -> bool:
    # Fake tools under a fake root stand in for the real ones and run as whoever runs the tests.
    return not is_root() and not (sysfs.is_fake_root() and exe.startswith(str(sysfs.root())))


def run_privileged(argv: Sequence[str], timeout_s: float = COMMAND_TIMEOUT_S,
                   check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` (its first item is looked up with :func:`profiler.sysfs.which`) as root.

    Not root: prefixed with ``sudo -n`` (never prompts). Raises :class:`PrivilegedCommandError` when the
    tool is missing, times out, or (with ``check``) exits non-zero.
    """
    exe = sysfs.which(argv[0])
    if exe is None:
        raise PrivilegedCommandError(f"{argv[0]} not found on PATH: is this a Jetson with L4T installed?",
                                     argv)
    full = [exe, *argv[1:]]
    if _needs_sudo(exe):
        sudo = sysfs.which("sudo")
        if sudo is None:
            raise PrivilegedCommandError(f"{shlex.join(argv)} needs root: run jetpredict as root", argv)
        full = [sudo, "-n", *full]
    try:
        proc = _run(full, timeout_s)
    except subprocess.TimeoutExpired:
        raise PrivilegedCommandError(f"{shlex.join(argv)} did not finish within {timeout_s:g} s",
                                     argv) from None
    except OSError as err:
        raise PrivilegedCommandError(f"{shlex.join(argv)} could not start: {err}", argv) from None
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        hint = ""
        if full[0].endswith("sudo") and proc.returncode == 1:
            hint = " (needs root: run as root or allow passwordless sudo for this command)"
        raise PrivilegedCommandError(
            f"{shlex.join(argv)} failed with exit {proc.returncode}{hint}: {detail[-1] if detail else ''}",
            argv, proc.returncode, proc.stderr)
    return proc


def _run(full: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    """``full`` run as :func:`subprocess.run` would (killed on a timeout or an interrupt), its pid told to
    the observer from its start until it has ended (:func:`observe_children`)."""
    try:
        # Its own session: a Ctrl-C or SIGHUP sent to our process group (a terminal, an SSH drop) must not
        # kill nvpmodel halfway through a switch or a restore.
        # No stdin: on L4T a switch that needs a reboot asks "enter YES/yes" on stdin, and a "yes" piped
        # into jetpredict would reboot the board mid-campaign; with /dev/null the prompt just ends.
        with subprocess.Popen(full, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, start_new_session=True) as proc:
            _note_child(proc.pid)
            try:
                out, err = proc.communicate(timeout=timeout_s)
            except BaseException:  # a timeout or an interrupt, as subprocess.run: not left running
                _stop(proc)
                raise
    finally:
        _note_child(None)  # after Popen's exit has waited for it
    return subprocess.CompletedProcess(full, proc.returncode, out, err)


def _stop(proc: subprocess.Popen) -> None:
    """End ``proc`` and what it runs: SIGTERM to its process group first, which ``sudo`` relays to its
    command (a SIGKILL of sudo alone leaves nvpmodel running), then SIGKILL after :data:`STOP_GRACE_S`."""
    with contextlib.suppress(OSError):  # ended already, or a member this user may not signal
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    finally:  # a second Ctrl-C in the grace period too: it is not left running
        if proc.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _refused_because(device_path: str) -> str:
    """Why a write to ``device_path`` was refused (EACCES/EPERM), for a person: not root, or, as root, the
    file's own mode and that the kernel or a security module refuses it (sudo cannot help then)."""
    if not is_root():
        return "needs root: run jetpredict as root"
    try:
        mode = stat.S_IMODE(sysfs.path(device_path).stat().st_mode)
        what = f"is read-only (mode {mode:o})" if not mode & 0o222 else f"has mode {mode:o}"
    except OSError as err:
        what = f"cannot be examined ({err.strerror or err})"
    return (f"was refused although jetpredict runs as root: the file {what}, and the kernel or a security "
            "module refuses it (a knob the kernel exposes read-only, an LSM policy, or a root without "
            "CAP_DAC_OVERRIDE); this knob cannot be set here")


def write_sysfs(device_path: str, value: object) -> None:
    """Write one sysfs knob; a permission problem becomes a clear :class:`PrivilegedCommandError`."""
    try:
        sysfs.write_text(device_path, value)
    except PermissionError:
        raise PrivilegedCommandError(f"writing {value} to {device_path} {_refused_because(device_path)}",
                                     ["write", device_path]) from None
    except OSError as err:
        raise PrivilegedCommandError(f"writing {value} to {device_path} failed: {err}",
                                     ["write", device_path]) from None

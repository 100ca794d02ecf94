"""``jetpredict status``: this Jetson's power mode, cores, clocks and module power now (like jtop's summary).

Everything is read through the profiler's own code under ``$JETPREDICT_SYSFS_ROOT`` (:mod:`profiler.sysfs`):
the board from the device tree, the nvpmodel mode from ``/var/lib/nvpmodel/status`` named by
``/etc/nvpmodel.conf`` (``nvpmodel -q`` when the status file is missing), cores online and the CPU/GPU/EMC
clocks with :func:`profiler.powermode.read_clocks`, and module power from the INA3221 rails with the
board's total rule (:class:`profiler.power.ina3221.Ina3221Meter`). A restore state file that a run left
(:func:`profiler.powermode.state.find_state`, with its checks) is reported with the original mode
``jetpredict restore`` would put back and the command; nothing is said when there is none. Nothing is
written. A value that cannot be read is ``null`` with the reason, never 0. Off a Jetson, the command says
so and exits :data:`EXIT_NOT_A_JETSON`.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from jetpredict.models.catalogue import Device, load_device, mode_label
from jetpredict.models.errors import say

#: Exit status of ``jetpredict status`` on a machine that is not a recognised Jetson (2 is bad input, 1 a
#: failed operation; this is neither: the command has nothing to read here).
EXIT_NOT_A_JETSON = 3
NVPMODEL_STATUS = "/var/lib/nvpmodel/status"


@dataclass
class PendingRestore:
    """A restore state file on this machine: the original mode ``jetpredict restore`` would put back
    (``path`` to ``command``), or ``error`` when the reader refuses the file; ``summary`` says it in words."""

    summary: str
    path: str | None = None
    original_mode: str | None = None
    device: str | None = None
    saved_by_pid: int | None = None
    run_alive: bool | None = None  # the run that saved it still runs: it puts the mode back when it ends
    command: str | None = None
    error: str | None = None


def pending_restore() -> PendingRestore | None:
    """The state file an unfinished run (or ``apply``) left, as :func:`state.find_state` reads it; None
    when there is none."""
    from jetpredict.profiler.powermode import state as state_file

    try:
        found = state_file.find_state()
    except state_file.StateFileError as err:  # unreadable, or refused by its owner/permission checks
        return PendingRestore(f"a state file cannot be used: {err}", error=str(err))
    if found is None:
        return None
    alive = found.run_alive()
    if alive and found.over_applied:
        # That run started over a mode `apply` set: it goes back to that one, and the original waits on.
        summary = (f"in progress: a run (pid {found.pid}) switches power modes over the one "
                   f"`{state_file.APPLY_COMMAND}` set and returns to it when it ends; the original from "
                   f"before that, {found.describe()}, then stays for `{state_file.RESTORE_COMMAND}` "
                   f"({found.path})")
    elif alive:
        summary = (f"in progress: the run that saved the original power mode {found.describe()} still runs "
                   f"and puts it back when it ends ({found.path})")
    else:
        summary = f"pending: the original power mode {found.describe()}; {found.restore_hint()}"
    return PendingRestore(summary, str(found.path), found.original.get("mode"), found.device, found.pid,
                          alive, state_file.restore_command())


@dataclass
class JetsonStatus:
    """One reading: ids and names, cores (count), clocks (MHz), module power (W); ``None`` = unreadable,
    with the reason in ``unknown``. ``emc_cap_mhz``: nvpmodel's EMC cap (a bound, not the clock; None when
    uncapped), readable where the EMC rate (root-only debugfs) is not."""

    board: str
    name: str
    nvpmodel_id: int | None
    nvpmodel_mode: str | None
    cores_online: int | None
    cores_total: int
    cpu_mhz: float | None
    gpu_mhz: float | None
    emc_mhz: float | None
    mode_label: str | None
    module_power_w: float | None
    power_meter: str | None
    rails_w: dict[str, float | None] = field(default_factory=dict)
    unknown: dict[str, str] = field(default_factory=dict)
    pending_restore: PendingRestore | None = None
    emc_cap_mhz: float | None = None

    def lines(self) -> list[str]:
        """The summary a person reads, one fact a line."""
        def mhz(v: float | None, what: str) -> str:
            why = self.unknown.get(what)
            return f"{v:g} MHz" if v is not None else f"unknown ({why})" if why else "unknown"

        mode = (f"{self.nvpmodel_mode} (nvpmodel id {self.nvpmodel_id})" if self.nvpmodel_mode is not None
                else f"unknown ({self.unknown.get('nvpmodel', 'not readable')})")
        power = (f"{self.module_power_w:.2f} W ({self.power_meter})" if self.module_power_w is not None
                 else f"unknown ({self.unknown.get('power', 'not readable')})")
        cores = self.cores_online if self.cores_online is not None else (
            f"unknown ({self.unknown.get('cores_online', 'not readable')})")
        out = [f"board:         {self.name} ({self.board})",
               f"nvpmodel mode: {mode}",
               f"cores online:  {cores} of {self.cores_total}",
               f"clocks:        CPU {mhz(self.cpu_mhz, 'cpu_mhz')}, GPU {mhz(self.gpu_mhz, 'gpu_mhz')}, "
               f"EMC {mhz(self.emc_mhz, 'emc_mhz')}",
               f"as a label:    {self.mode_label or 'unknown'}",
               f"module power:  {power}"]
        out += [f"  rail {label}: {'unknown' if w is None else f'{w:.2f} W'}" for label, w in self.rails_w.items()]
        if self.pending_restore is not None:
            out.append(f"restore:       {self.pending_restore.summary}")
        return out


def _nvpmodel_mode(device: Device) -> tuple[int | None, str | None, str | None]:
    """(id, name, reason when unknown): the status file, named from nvpmodel.conf or the catalogue."""
    from jetpredict.models.errors import InputError
    from jetpredict.profiler import sysfs
    from jetpredict.profiler.powermode import (
        PrivilegedCommandError,
        parse_nvpmodel_conf,
        parse_nvpmodel_query,
    )
    from jetpredict.profiler.powermode.nvpmodel import DEFAULT_CONF

    text = sysfs.read_text(NVPMODEL_STATUS)
    match = re.search(r"pmode:(\d+)", text or "")
    if match is None:
        try:
            from jetpredict.profiler.powermode import run_privileged

            name, mid = parse_nvpmodel_query(run_privileged(["nvpmodel", "-q"], check=True).stdout)
            return mid, name, None
        except (PrivilegedCommandError, ValueError) as err:
            return None, None, f"no {NVPMODEL_STATUS} and nvpmodel -q failed: {err}"
    mid = int(match.group(1))
    from jetpredict.profiler.powermode import state as state_file

    # The board's file names its presets; a custom id is jetpredict's (`apply` or `profile`), in the configuration
    # it left in the state dir. (A device path is rooted at the fake root; a state dir's Path is real already:
    # sysfs.read_text reads both.)
    confs = [(DEFAULT_CONF, None), *((d / state_file.CUSTOM_CONF_NAME, d) for d in state_file.state_dirs())]
    for path, state_folder in confs:
        conf_text = sysfs.read_text(path)
        if conf_text is None:
            continue
        try:
            name = parse_nvpmodel_conf(conf_text).model(mid).name
            return mid, name if state_folder is None else f"{name} (set by {_custom_conf_writer(state_folder)})", None
        except (InputError, KeyError, LookupError):
            pass  # not in this file, or an unparsable one: the next file or the catalogue may name it
    preset = next((p for p in device.presets if p.id == mid), None)
    return mid, (preset.mode if preset else f"id {mid}"), None


def _custom_conf_writer(state_folder: Path) -> str:
    """Who left the custom nvpmodel configuration in ``state_folder``, as its state file's record says: `apply`
    (a kept record), a run still going or an unfinished one (by pid); either verb when no record says."""
    from jetpredict.profiler.powermode import state as state_file

    path = state_folder / state_file.STATE_FILE_NAME
    try:
        record = state_file.read_state(path) if path.exists() else None
    except (state_file.StateFileError, OSError):
        record = None  # said under "restore:" (pending_restore); here only who wrote the configuration
    if record is None:
        return "jetpredict: apply or profile"
    if record.kept:
        return f"`{state_file.APPLY_COMMAND}`"
    if record.run_alive():
        return f"the jetpredict run {state_file.run_named(record.pid)}, still running"
    return f"an unfinished jetpredict run, {state_file.run_named(record.pid)}"


def read_status(board: str | None = None) -> JetsonStatus:
    """This Jetson's status; :class:`LookupError` when the machine is not a recognised Jetson."""
    from jetpredict.profiler.power.base import PowerReadError
    from jetpredict.profiler.power.ina3221 import Ina3221Meter
    from jetpredict.profiler.powermode import jetson_board, read_clocks
    from jetpredict.profiler.powermode.custom import (
        CPU_DIR,
        emc_cap_mhz,
        emc_unknown_reason,
        gpu_dir,
        soc_paths,
    )

    device_id = board or jetson_board()
    if device_id is None:
        raise LookupError("this machine is not a recognised Jetson (/proc/device-tree/model names none of "
                          "AGX Xavier, Xavier NX, Nano, AGX Orin, Orin NX, Orin Nano)")
    device = load_device(device_id)
    paths = soc_paths(device.specs.soc)
    if board is not None and jetson_board() is None and gpu_dir(paths) is None:
        raise LookupError(f"--board {board}: this machine has neither a Jetson device tree nor a "
                          f"{device.specs.soc} GPU in sysfs; it is not that Jetson")
    unknown: dict[str, str] = {}
    mid, name, why = _nvpmodel_mode(device)
    if why:
        unknown["nvpmodel"] = why
    clocks = read_clocks(paths, "now")

    def known(value: float, what: str) -> float | None:
        if math.isnan(value):
            unknown[what] = "not readable in sysfs"
            return None
        return float(value)

    cpu, gpu = known(clocks.cpu_mhz, "cpu_mhz"), known(clocks.gpu_mhz, "gpu_mhz")
    # read_clocks counts the CPUs it finds: none found is an unreadable tree (a running board has one online).
    cores = int(clocks.cpu_cores) or None
    if cores is None:
        unknown["cores_online"] = f"no CPU readable under {CPU_DIR}"
    emc_cap = emc_cap_mhz(paths)
    emc = None if math.isnan(clocks.emc_mhz) else float(clocks.emc_mhz)
    if emc is None:
        unknown["emc_mhz"] = emc_unknown_reason(emc_cap)
    label = None if None in (cores, cpu, gpu, emc) else mode_label(cores, cpu, gpu, emc)
    power = meter = None
    rails: dict[str, float | None] = {}
    try:
        ina = Ina3221Meter.discover(device.id)
        meter, rails = ina.name, ina.read_rails_w()
        power = ina.read_power_w()
    except (LookupError, PowerReadError) as err:
        unknown["power"] = str(err)
    return JetsonStatus(device.id, device.name, mid, name, cores, int(device.cpu_cores_range[1]),
                        cpu, gpu, emc, label, power, meter, rails, unknown, pending_restore(), emc_cap)


def _status(args: argparse.Namespace) -> int:
    try:
        status = read_status(args.board)
    except LookupError as err:
        say(f"jetpredict status: {err}. status reads a Jetson's power mode, clocks and power; elsewhere "
            "use `jetpredict devices DEVICE` for a board's presets, or --board DEVICE on a Jetson whose "
            "device tree is not recognised.")
        return EXIT_NOT_A_JETSON
    if args.format == "json":
        json.dump(asdict(status), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print("\n".join(status.lines()))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("status", help="this Jetson's power mode, cores, clocks and module power now",
                       description="Read this Jetson's nvpmodel mode, cores online, CPU/GPU/EMC clocks and "
                       "module power, and any restore state file a run left: the original mode `jetpredict "
                       "restore` would put back (changes nothing). Off a Jetson: a message and exit "
                       f"{EXIT_NOT_A_JETSON}.")
    p.add_argument("--board", help="catalogue id of this board (default: from /proc/device-tree/model)")
    p.add_argument("--format", choices=("table", "json"), default="table",
                   help="table: one fact a line, for a person; json: the same facts for scripts, null with the "
                   "reason (under 'unknown') where a value cannot be read (default %(default)s)")
    p.set_defaults(handler=_status)

"""``jetpredict apply --mode LABEL|PRESET``: set one power mode on this Jetson and leave it set.

The mode is an nvpmodel preset (name or id, e.g. ``MAXN``, ``MODE_15W``, ``0``) or a catalogue label of a
custom mode, ``<cores>c-<cpu MHz>-<gpu MHz>-<emc MHz>`` (``8c-1190.4-675.75-1331.2``, the labels that
``predict``, ``recommend`` and the page at ``/`` print). It goes through the profiler's controllers
(:mod:`profiler.powermode`): a preset with ``nvpmodel -m ID``; a custom mode as a custom nvpmodel
``POWER_MODEL`` (default) or by writing the sysfs knobs directly (``--via sysfs``). The clocks actually in
force are read back and printed.

Before the switch the original mode is saved to the restore state file
(:mod:`profiler.powermode.state`), so ``sudo jetpredict restore`` puts it back later (successive
``apply`` calls keep the first original). After the switch the file is marked kept: a later ``profile``
returns to the applied mode at its end and leaves the original there for ``restore``. ``--dry-run``
prints the commands or sysfs writes it would make and changes nothing (no switch, no state file).
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from jetpredict.models.catalogue import Device, PowerMode, Preset, load_device, mode_label
from jetpredict.models.errors import InputError

#: A custom mode's catalogue label: cores, CPU, GPU and EMC clocks in MHz (see models.catalogue.mode_label).
LABEL_PATTERN = re.compile(r"^(\d+)c-(\d+(?:\.\d+)?)-(\d+(?:\.\d+)?)-(\d+(?:\.\d+)?)$")
#: How far a read-back clock may sit from the target before we warn (MHz): the kernel rounds a written
#: clock to its frequency table, and nvpmodel caps are not exact steps.
READBACK_TOLERANCE_MHZ = 60.0
VIA = ("nvpmodel", "sysfs")


@dataclass
class ApplyPlan:
    """What ``apply`` will do: the target mode and the writes, as lines a person can read."""

    device: Device
    mode: PowerMode
    via: str  # "nvpmodel-preset" | "nvpmodel-custom" | "sysfs"
    steps: list[str] = field(default_factory=list)
    asked: PowerMode | None = None  # the mode asked for, where ``mode`` is the board's steps for it


def parse_mode(device: Device, text: str) -> PowerMode:
    """A preset of ``device`` (name or nvpmodel id) or a custom mode from its label; InputError otherwise."""
    text = text.strip()
    match = LABEL_PATTERN.match(text)
    if match:
        cores, cpu, gpu, emc = int(match.group(1)), *(float(g) for g in match.groups()[1:])
        device.validate_mode(cores, cpu, gpu, emc)  # ModeOutOfRangeError names the knob and the range
        return PowerMode(mode_label(cores, cpu, gpu, emc), cores, cpu, gpu, emc)
    try:
        return device.preset(text)
    except InputError:
        presets = ", ".join(f"{p.mode} ({p.id})" for p in device.presets)
        raise InputError(f"--mode {text!r} is neither a preset of {device.id} ({presets}) nor a mode label "
                         "<cores>c-<cpu MHz>-<gpu MHz>-<emc MHz>, e.g. "
                         f"{mode_label(*device.maxn.knobs())}", "mode") from None


def _board(board: str | None) -> Device:
    from jetpredict.profiler.powermode import jetson_board

    device_id = board or jetson_board()
    if device_id is None:
        raise InputError("not a recognised Jetson (no /proc/device-tree/model): pass --board DEVICE", "board")
    return load_device(device_id)


def _controller(device: Device, via: str):
    from jetpredict.profiler.powermode import detect_controller

    return detect_controller("jetson", device.id, custom="sysfs" if via == "sysfs" else "nvpmodel")


@contextmanager
def _recorded_sysfs_writes(steps: list[str]) -> Iterator[None]:
    """Within the block the sysfs controller's writes are listed in ``steps`` instead of made.

    The dry run runs the controller's own ``apply`` code, so the list is what a real run writes (cores
    taken offline by an earlier step are seen as offline by the later ones, as on the device).
    """
    from jetpredict.profiler.powermode import custom

    real_write, real_online = custom.write_sysfs, custom.cpu_online
    online: dict[int, bool] = {}  # cores the plan takes offline or online: later steps must see that

    def record(device_path: str, value: object) -> None:
        steps.append(f"write {value} > {device_path}")
        match = re.fullmatch(re.escape(custom.CPU_DIR) + r"/cpu(\d+)/online", device_path)
        if match:
            online[int(match.group(1))] = str(value).strip() == "1"

    def planned_online(cpu: int) -> bool:
        return online.get(cpu, real_online(cpu))

    custom.write_sysfs, custom.cpu_online = record, planned_online
    try:
        yield
    finally:
        custom.write_sysfs, custom.cpu_online = real_write, real_online


def on_this_board(device: Device) -> bool:
    """Whether this machine is ``device``: its device tree names it, or (a board the tree does not name)
    its SoC's GPU is in sysfs and ``/etc/nvpmodel.conf`` is readable."""
    from jetpredict.profiler import sysfs
    from jetpredict.profiler.powermode import jetson_board
    from jetpredict.profiler.powermode.custom import gpu_dir, soc_paths
    from jetpredict.profiler.powermode.nvpmodel import DEFAULT_CONF

    found = jetson_board()
    if found is not None:
        return found == device.id
    return gpu_dir(soc_paths(device.specs.soc)) is not None and sysfs.read_text(DEFAULT_CONF) is not None


def catalogue_plan(device: Device, mode: PowerMode, via: str) -> ApplyPlan:
    """The switch as the catalogue describes it, for a dry run away from the board (``--board B`` on a
    laptop): the preset's nvpmodel id, or the knobs a custom mode pins; on the board itself the steps
    come from its own nvpmodel.conf and sysfs (:func:`plan_switch`). The plan's mode is the clocks the board
    would run, the catalogue's steps standing in for its tables: a preset's caps each at the step at or below
    it (:meth:`Device.preset_steps`), a custom mode's clocks each at the nearest (:meth:`Device.nearest_mode`)."""
    runs = (device.preset_steps(mode) if isinstance(mode, Preset)
            else PowerMode(mode.mode, *device.nearest_mode(*mode.knobs()).knobs()))
    cores, cpu, gpu, emc = int(runs.cpu_cores), float(runs.cpu_mhz), float(runs.gpu_mhz), float(runs.emc_mhz)
    pins = [f"cores 0..{cores - 1} online, {cores}..{device.cpu_cores_range[1] - 1} offline"
            if cores < device.cpu_cores_range[1] else f"all {cores} cores online",
            f"CPU min = max = {round(cpu * 1e3)} kHz", f"GPU min = max = {round(gpu * 1e6)} Hz",
            f"EMC max = {round(emc * 1e6)} Hz"]
    if via != "sysfs" and isinstance(mode, Preset):
        return ApplyPlan(device, runs, "nvpmodel-preset", [f"nvpmodel -m {mode.id}   # {mode.mode} (catalogue id)"],
                         asked=mode)
    if via == "sysfs":
        return ApplyPlan(device, runs, "sysfs", [f"write the {device.specs.soc} sysfs knobs: {'; '.join(pins)}"],
                         asked=mode)
    return ApplyPlan(device, runs, "nvpmodel-custom",
                     [f"write a custom nvpmodel.conf: the board's /etc/nvpmodel.conf plus a POWER_MODEL "
                      f"section pinning {'; '.join(pins)}", "nvpmodel -f <that file> -m <its id>"], asked=mode)


def plan_switch(device: Device, mode: PowerMode, via: str) -> ApplyPlan:
    """The switch, without making it (reads the nvpmodel configuration and sysfs only). The plan's mode is the
    clocks the board runs (its steps: :meth:`~profiler.powermode.base.PowerModeController.caps_of`), ``asked``
    the mode asked for, as a real switch reports them."""
    from jetpredict.profiler import sysfs
    from jetpredict.profiler.powermode import NvpmodelController, SysfsController, render_custom_model
    from jetpredict.profiler.powermode.nvpmodel import DEFAULT_CONF
    from jetpredict.profiler.powermode.state import CUSTOM_CONF_NAME, state_dir

    if via == "sysfs":
        controller = SysfsController(device)
        steps: list[str] = []
        with _recorded_sysfs_writes(steps):
            controller.apply(mode)  # a preset keeps its type: its caps run at the steps at or below them
        return ApplyPlan(device, controller.current(), "sysfs", steps, asked=mode)  # current(): what it set
    if sysfs.read_text(DEFAULT_CONF) is None:
        raise InputError(f"{DEFAULT_CONF} not readable: is this a Jetson with L4T installed?", "device")
    nvpmodel = NvpmodelController(device)  # reads the configuration only; no switch before apply()
    conf = nvpmodel.conf
    if isinstance(mode, Preset):
        model = conf.model(mode.mode)  # InputError lists the board's own presets
        switch = [f"nvpmodel -m {model.id}   # {model.name}"]
        return ApplyPlan(device, nvpmodel.caps_of(mode), "nvpmodel-preset", switch, asked=mode)
    caps = nvpmodel.caps_of(mode)  # the steps its POWER_MODEL pins, computed once for the section and the plan
    custom_id = max(conf.models) + 1
    path = state_dir() / CUSTOM_CONF_NAME
    section = render_custom_model(conf, caps, custom_id)
    steps = [f"write {path}: {DEFAULT_CONF} plus this section:"]
    steps += [f"    {line}" for line in section.rstrip("\n").splitlines()]
    steps.append(f"nvpmodel -f {shlex.quote(str(path))} -m {custom_id}")
    return ApplyPlan(device, caps, "nvpmodel-custom", steps, asked=mode)


def _far(target: PowerMode, actual: PowerMode) -> list[str]:
    """Knobs read back away from the target (the reason in words), empty when all agree. A clock that could not be
    read (NaN: the EMC rate is root-only debugfs) differs from nothing: :func:`_describe` says it is unknown."""
    out = []
    if int(actual.cpu_cores) != int(target.cpu_cores):
        out.append(f"cores online {actual.cpu_cores} (asked {target.cpu_cores})")
    for name in ("cpu_mhz", "gpu_mhz", "emc_mhz"):
        want, got = float(getattr(target, name)), float(getattr(actual, name))
        if got == got and abs(got - want) > READBACK_TOLERANCE_MHZ:
            out.append(f"{name} {got:g} (asked {want:g})")
    return out


def _describe(mode: PowerMode, asked: PowerMode | None = None) -> str:
    """``mode``'s cores and clocks (MHz); each clock set otherwise than ``asked`` (a board's step) says so."""
    def clock(name: str) -> str:
        got = float(getattr(mode, name))
        if got != got:  # NaN: not readable (the EMC rate without root)
            return "unknown (not readable)"
        want = got if asked is None else float(getattr(asked, name))
        return f"{got:g} MHz" + ("" if want == got else f" (asked {want:g})")

    return (f"{mode.mode}: {int(mode.cpu_cores)} cores, CPU {clock('cpu_mhz')}, GPU {clock('gpu_mhz')}, "
            f"EMC {clock('emc_mhz')}")


def apply_mode(device: Device, mode: PowerMode, via: str = "nvpmodel", out=None) -> PowerMode:
    """Switch to ``mode``, keep it, and return the read-back mode; the original stays in the state file.

    A failure during the switch, or a Ctrl-C, SIGTERM, SIGHUP or SIGQUIT before the mode is kept, restores at
    once the mode in force before this command (the mode an earlier ``apply`` set, if one did); a signal then
    ends the process as it would have (:class:`~profiler.powermode.base.SignalExit`, status 128 + signal;
    one that came after the keep says the mode stays applied). Messages go to ``out`` (stdout).
    """
    out = out or sys.stdout
    controller = _controller(device, via)
    from jetpredict.profiler.powermode.base import RestoreFailedError, SignalExit
    from jetpredict.profiler.powermode.privileged import PrivilegedCommandError
    from jetpredict.profiler.powermode.state import find_state, restore_command

    # As a context, as `profile` uses it: the state file is written before anything changes, and a failed
    # switch, Ctrl-C, SIGTERM, SIGHUP or SIGQUIT before keep() puts the mode in force back (SIGTERM's default
    # action would end the process after the switch, leaving the file unkept for the next run to take over).
    switch_failed: PrivilegedCommandError | None = None
    try:
        with controller:
            try:
                controller.apply(mode)
                controller.keep()  # switched on purpose: the file stays, marked kept, for `restore`
            except PrivilegedCommandError as err:  # the context's exit puts the mode back, or says it failed
                switch_failed = err
                raise PrivilegedCommandError(f"{err}; the mode in force before it was put back", err.argv,
                                             err.returncode, err.stderr) from err
    except SignalExit as stop:  # reported by the command line; not restored = after the keep
        stop.unrestored = "the mode stays applied (`jetpredict restore` puts the original back)"
        raise
    except RestoreFailedError as failed:
        if switch_failed is None:
            raise
        # The restore's failure replaced the switch's: say both, the knob and value the switch could not set first.
        raise RestoreFailedError(f"{switch_failed}; then {failed}", failed.argv, failed.returncode,
                                 failed.stderr) from failed
    original = find_state()
    actual = controller.read_back()
    caps = controller.current()  # what the switch set: the board's steps (a preset's caps resolved)
    print(f"applied {_describe(caps, mode)}", file=out)
    print(f"read back {_describe(PowerMode('now', *actual.knobs()))}", file=out)
    far = _far(caps, actual)
    if far:
        print(f"warning: the clocks in force differ from the mode: {'; '.join(far)} (DVFS may still be "
              "settling, or the kernel rounded to its frequency table)", file=out)
    where = original.describe() if original is not None else "the mode before this command"
    print(f"original mode: {where}; to put it back: {restore_command()}", file=out)
    return actual


def _apply(args: argparse.Namespace) -> int:
    if args.device != "jetson":
        raise InputError(f"--device {args.device!r}: apply sets modes on this Jetson only ('jetson')", "device")
    device = _board(args.board)
    mode = parse_mode(device, args.mode)
    if args.dry_run:
        here = on_this_board(device)
        # Away from the board (`--board B` anywhere) the dry run still says what it would do.
        what = plan_switch(device, mode, args.via) if here else catalogue_plan(device, mode, args.via)
        where = "" if here else " (not this machine: steps from the catalogue)"
        print(f"dry run on {device.id}{where} ({what.via}): would set {_describe(what.mode, what.asked)}")
        for step in what.steps:
            print(f"  {step}")
        print("then read back the clocks, and save the original mode for `sudo jetpredict restore`. "
              "Nothing was changed.")
        return 0
    if args.board and not on_this_board(device):
        _refuse_other_board(args.board)
    apply_mode(device, mode, args.via)
    return 0


def _refuse_other_board(board: str) -> None:
    """InputError: ``--board`` names a board this machine is not (it failed later as "nvpmodel not found",
    as though L4T were broken here)."""
    from jetpredict.profiler.powermode import jetson_board

    found = jetson_board()
    here = f"this machine is {found}" if found else "this machine is not a Jetson the catalogue knows"
    raise InputError(f"--board {board} does not make this machine a {board} ({here}): apply sets the mode of the "
                     "Jetson it runs on; add --dry-run to see what apply would do on that board, changing nothing",
                     "board")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "apply", help="set a power mode on this Jetson (preset or catalogue label)",
        description="Set a power mode and leave it set: an nvpmodel preset (name or id) or a custom mode "
        "label <cores>c-<cpu MHz>-<gpu MHz>-<emc MHz> as printed by predict/recommend and the page at /. "
        "Reads the clocks back. `sudo jetpredict restore` puts the original mode back.")
    p.add_argument("--mode", required=True, help="preset name or id (MAXN, MODE_15W, 0) or a mode label")
    p.add_argument("--device", default="jetson", help="jetson (this machine; the only choice)")
    p.add_argument("--board", help="catalogue id of this board (default: from /proc/device-tree/model)")
    p.add_argument("--via", choices=VIA, default="nvpmodel",
                   help="custom modes through a custom nvpmodel POWER_MODEL (default) or direct sysfs writes")
    p.add_argument("--dry-run", action="store_true", help="print what would be written; change nothing")
    p.set_defaults(handler=_apply)

"""The device and the power modes a profile run measures: ``--device jetson`` told from the board (or
``$JETPREDICT_DEVICE``), and ``--modes`` read as presets, a CSV/JSON file of mode columns, mode labels, or
on the host thread counts."""

from __future__ import annotations

import math
import os
from pathlib import Path

from jetpredict.models.catalogue import MODE_FIELDS, Device, PowerMode, load_device, mode_label
from jetpredict.models.errors import InputError

DEVICE_ENV = "JETPREDICT_DEVICE"


def detect_jetson_device() -> str:
    """The catalogue id of this Jetson: ``$JETPREDICT_DEVICE`` or ``/proc/device-tree/model``."""
    forced = os.environ.get(DEVICE_ENV)
    if forced:
        load_device(forced)  # raises with the valid ids
        return forced
    from jetpredict.profiler.powermode.detect import jetson_board

    board = jetson_board()
    if board is None:
        raise InputError(f"--device jetson: cannot tell the Jetson type from /proc/device-tree/model; "
                         f"set {DEVICE_ENV} to a catalogue id, or profile on the digital twin with "
                         f"--device sim:DEVICE", "device")
    return board


def _parse_label(device: Device, label: str) -> PowerMode:
    # A custom-mode label as written by models.catalogue.mode_label: 8c-2265.6-1377-2133.
    parts = label.split("-")
    if len(parts) == 4 and parts[0].endswith("c"):
        try:
            cores, cpu, gpu, emc = int(parts[0][:-1]), float(parts[1]), float(parts[2]), float(parts[3])
        except ValueError:
            pass
        else:
            device.validate_mode(cores, cpu, gpu, emc)
            return PowerMode(label, cores, cpu, gpu, emc)
    return device.preset(label)


def _check_preset_label(device: Device, label: str, knobs: tuple[int, float, float, float], where: str) -> None:
    """Refuse a row whose ``mode`` names one of ``device``'s presets but whose knobs (cores, MHz) are neither that
    preset's caps nor the steps they run at (``Device.preset_steps``, what a board's preset row records): the
    label is written into the profile row as given, so it would record the preset's name for other clocks. A
    custom mode keeps a label of its own, or a blank one (then its ``8c-...`` label is made from the knobs)."""
    preset = next((p for p in device.presets if p.mode.upper() == label.upper()), None)
    if preset is None or tuple(map(float, knobs)) in device.preset_knobs(preset):
        return
    theirs = ", ".join(f"{k}={v:g}" for k, v in zip(MODE_FIELDS, preset.knobs(), strict=True))
    ours = ", ".join(f"{k}={v:g}" for k, v in zip(MODE_FIELDS, knobs, strict=True))
    raise InputError(f"{where}: mode {label!r} names a preset of {device.id} whose knobs are {theirs}, but this "
                     f"row has {ours}; a label that names a preset must have the preset's knobs (give a custom "
                     f"mode its own label, or leave mode blank)", "mode")


def _modes_from_file(device: Device, path: str | Path) -> list[PowerMode]:
    from jetpredict.models.numbers import is_blank, not_a_number_rule, number_or_nan
    from jetpredict.models.profile_files import mode_row_place, read_mode_table

    df = read_mode_table(path, "modes")
    missing = [c for c in MODE_FIELDS if c not in df.columns]
    if missing:
        raise InputError(f"--modes {path}: missing column(s) {', '.join(missing)}", "modes")
    modes = []
    for i, rec in enumerate(df.to_dict(orient="records")):
        where = mode_row_place(df, i)
        if isinstance(named := rec.get("device"), str) and named.strip() not in ("", device.id):
            raise InputError(f"--modes {path} {where}: the mode is for device {named.strip()!r}, not "
                             f"{device.id!r}", "modes")
        knobs = [number_or_nan(rec[c]) for c in MODE_FIELDS]
        if (bad := next((c for c, v in zip(MODE_FIELDS, knobs, strict=True) if not math.isfinite(v)), None)):
            raise InputError(f"--modes {path} {where}: {bad} {not_a_number_rule(rec[bad])}", bad)
        try:
            device.validate_mode(*knobs)
        except InputError as exc:
            raise InputError(f"--modes {path} {where}: {exc.message}", exc.field) from None
        label = "" if is_blank(rec.get("mode")) else str(rec["mode"]).strip()
        cores, cpu, gpu, emc = int(knobs[0]), knobs[1], knobs[2], knobs[3]
        _check_preset_label(device, label, (cores, cpu, gpu, emc), f"--modes {path} {where}")
        modes.append(PowerMode(label or mode_label(cores, cpu, gpu, emc), cores, cpu, gpu, emc))
    if not modes:
        raise InputError(f"--modes {path}: no modes in the file", "modes")
    return modes


def modes_to_profile(device: Device, modes: str | None) -> list[PowerMode]:
    """``presets`` (default), a CSV or JSON FILE with mode columns (a value with a path separator or ending in
    .csv/.json is always a file), or comma-separated preset names / mode labels."""
    if modes is None or modes.strip().lower() == "presets":
        return list(device.presets)
    if Path(modes).is_file() or "/" in modes or os.sep in modes or modes.strip().lower().endswith((".csv", ".json")):
        return _modes_from_file(device, modes)  # as typed, for its messages
    labels = [m.strip() for m in modes.split(",") if m.strip()]
    if not labels:
        raise InputError("--modes must be presets, a CSV or JSON file, or comma-separated mode labels",
                         "modes")
    modes = []
    for label in labels:
        try:
            modes.append(_parse_label(device, label))
        except InputError as exc:  # the catalogue's rule (and error kind), said of the flag that gave the label
            raise type(exc)(f"--modes {label}: {exc.message}", exc.field) from None
    return modes


def host_modes(modes: str | None) -> list[PowerMode]:
    """Host modes: all cores (default) or comma-separated thread counts (``1,2``); clocks are read only."""
    limit = os.cpu_count() or 1
    if modes is None:
        return [PowerMode("host", limit, math.nan, math.nan, math.nan)]
    out = []
    for item in (m.strip() for m in modes.split(",") if m.strip()):
        try:
            cores = int(item.removesuffix("c"))
        except ValueError:
            raise InputError(f"--modes on the host takes thread counts like 1,2 (this host has {limit} "
                             f"cores); got {item!r}", "modes") from None
        if not 1 <= cores <= limit:
            raise InputError(f"--modes: {cores} threads is outside 1..{limit} on this host", "modes")
        out.append(PowerMode("host" if cores == limit else f"host-{cores}c", cores, math.nan, math.nan, math.nan))
    if not out:
        raise InputError("--modes is empty", "modes")
    return out

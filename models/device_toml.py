"""Reading and checking one device catalogue file, ``models/devices/<id>.toml``, before the catalogue builds its
:class:`~jetpredict.models.catalogue.Device` from it.

A file written by hand breaks in small ways: a key left out or misspelt, a mode count that does not match the
steps, a preset beyond the board, an id another file holds. Each is refused when the file is read, with one
:class:`DeviceFileError` naming the file, the field (a dotted TOML key: ``specs.cuda_cores``,
``presets[1].cpu_cores``, presets counted from 0 in file order) and the rule. The catalogue adds the one check
that needs a built device (each preset's clocks inside the device's range, with its tolerance).
"""

from __future__ import annotations

import difflib
import math
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from itertools import pairwise
from pathlib import Path
from typing import NoReturn

from jetpredict.models.errors import InputError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

#: A device id: it is the file's name, a path segment of the service's URLs and the tail of ``sim:<id>``.
DEVICE_ID_PATTERN = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")

#: Each table's keys: required, then optional. A preset clock left out is ``"max"`` (the top step).
_TOP_KEYS = (("id", "specs", "steps", "presets"), ("default_preset", "sources"))
_STEP_LISTS = {"cpu_mhz": "CPU", "gpu_mhz": "GPU", "emc_mhz": "EMC"}
_STEPS_KEYS = (("cpu_cores_min", "cpu_cores_max", "space_size", *_STEP_LISTS), ("preset_gpu_mhz",))
_PRESET_KEYS = (("id", "name", "cpu_cores"), ("cpu_mhz", "gpu_mhz", "emc_mhz", "power_budget_w", "gpu_sms_online"))
#: The one spec that may be 0 (a GPU without tensor cores); every other number of [specs] is above 0.
_MAY_BE_ZERO = frozenset({"tensor_cores"})

#: How a check reports: ``fail(field, rule)`` raises :class:`DeviceFileError` for the file being read.
_Fail = Callable[[str | None, str], NoReturn]


class DeviceFileError(InputError):
    """A catalogue file that is not a device: ``path``, ``field`` (a dotted TOML key; None for the whole file)
    and ``rule``, the rule it broke."""

    def __init__(self, path: Path, field: str | None, rule: str) -> None:
        super().__init__(f"device file {path}: {field + ': ' if field else ''}{rule}", field)
        self.path = path
        self.rule = rule


def read_device_table(path: Path, spec_types: Mapping[str, type]) -> dict:
    """The TOML table of the device file at ``path``, checked by :func:`check_device_table` against
    ``spec_types`` (each ``[specs]`` key and its type: ``int``, ``float`` or ``str``)."""
    try:
        with path.open("rb") as f:
            raw = tomllib.load(f)
    except tomllib.TOMLDecodeError as err:  # its message gives the line and column, not the file
        raise DeviceFileError(path, None, f"is not valid TOML: {err}") from None
    except UnicodeDecodeError as err:  # e.g. a comment saved as Latin-1: tomllib reads UTF-8 only
        raise DeviceFileError(path, None, f"is not UTF-8 text (byte 0x{err.object[err.start]:02x} at offset "
                              f"{err.start}); save it as UTF-8, as TOML requires") from None
    except RecursionError:  # tomllib parses nested arrays and inline tables recursively
        raise DeviceFileError(path, None, "nests arrays or tables too deeply to be read") from None
    check_device_table(raw, path, spec_types)
    return raw


def check_device_table(raw: dict, path: Path, spec_types: Mapping[str, type]) -> None:
    """Raise :class:`DeviceFileError` at the first rule ``raw`` (the file at ``path``, read) breaks: keys
    present and known, numbers of their kind, steps rising, ``space_size`` their product, presets inside the
    core range with distinct ids and names, ``default_preset`` one of them, ``id`` the file's name."""
    def fail(field: str | None, rule: str) -> NoReturn:
        raise DeviceFileError(path, field, rule)

    _check_keys(raw, "", "the file", _TOP_KEYS, fail)
    device_id = _text(raw["id"], "id", fail)
    if device_id != path.stem:
        fail("id", f"{device_id!r} must be the file's name, {path.stem!r}: the catalogue knows a device by its "
                   f"file, and two files of one id would hide one of them")
    if not DEVICE_ID_PATTERN.fullmatch(device_id):
        fail("id", f"{device_id!r} must be lowercase letters and digits, words joined by '-' (it is a URL "
                   f"segment and the tail of sim:<id>)")
    specs = _table(raw["specs"], "specs", fail)
    _check_keys(specs, "specs.", "[specs]", (tuple(spec_types), ()), fail)
    for key, kind in spec_types.items():
        _spec_value(specs[key], f"specs.{key}", kind, key in _MAY_BE_ZERO, fail)
    steps = _table(raw["steps"], "steps", fail)
    _check_keys(steps, "steps.", "[steps]", _STEPS_KEYS, fail)
    lo, hi = _core_range(steps, specs["cpu_cores"], fail)
    counts = {key: len(_step_list(steps[key], f"steps.{key}", fail)) for key in _STEP_LISTS}
    if "preset_gpu_mhz" in steps:
        _step_list(steps["preset_gpu_mhz"], "steps.preset_gpu_mhz", fail)
    size = _whole(steps["space_size"], "steps.space_size", 1, fail)
    if size != (hi - lo + 1) * math.prod(counts.values()):
        factors = " x ".join(f"{n} {_STEP_LISTS[k]}" for k, n in counts.items())
        fail("steps.space_size", f"{size} must equal the number of custom modes, {hi - lo + 1} cores x {factors} "
                                 f"steps = {(hi - lo + 1) * math.prod(counts.values())}")
    names = _check_presets(raw["presets"], (lo, hi), specs["gpu_sms"], fail)
    if "default_preset" in raw and raw["default_preset"] not in names:
        fail("default_preset", f"{raw['default_preset']!r} is not the name of a preset; presets: "
                               f"{', '.join(names)}")
    for key, value in _table(raw.get("sources", {}), "sources", fail).items():
        _text(value, f"sources.{key}", fail)


def _check_presets(presets: object, cores: tuple[int, int], gpu_sms: int,
                   fail: _Fail) -> list[str]:
    """Check each ``[[presets]]`` block; their names, in file order."""
    if not isinstance(presets, list) or not presets:
        fail("presets", "must be one or more [[presets]] blocks")
    ids: dict[int, str] = {}
    names: list[str] = []
    for i, preset in enumerate(presets):
        at = f"presets[{i}]"
        _check_keys(_table(preset, at, fail), f"{at}.", "[[presets]]", _PRESET_KEYS, fail)
        name = _text(preset["name"], f"{at}.name", fail)
        if name.upper() in (n.upper() for n in names):
            fail(f"{at}.name", f"{name!r} is also a preset's name (names are matched ignoring case)")
        names.append(name)
        preset_id = _whole(preset["id"], f"{at}.id", 0, fail)
        if preset_id in ids:
            fail(f"{at}.id", f"{preset_id} is also the id of preset {ids[preset_id]!r} (nvpmodel ids are distinct)")
        ids[preset_id] = name
        n_cores = _whole(preset["cpu_cores"], f"{at}.cpu_cores", 1, fail)
        if not cores[0] <= n_cores <= cores[1]:
            fail(f"{at}.cpu_cores", f"preset {name!r}: {n_cores} must be in steps.cpu_cores_min..cpu_cores_max "
                                    f"({cores[0]}..{cores[1]})")
        for key in ("cpu_mhz", "gpu_mhz", "emc_mhz"):
            value = preset.get(key, "max")
            if value != "max" and not _positive_number(value):
                fail(f"{at}.{key}", f"preset {name!r}: {value!r} must be a number (MHz) or \"max\" (the top step)")
        if "power_budget_w" in preset and not _positive_number(preset["power_budget_w"]):
            fail(f"{at}.power_budget_w", f"preset {name!r}: {preset['power_budget_w']!r} must be a number of W "
                                         f"above 0 (leave it out for an uncapped preset)")
        sms = _whole(preset.get("gpu_sms_online", gpu_sms), f"{at}.gpu_sms_online", 1, fail)
        if sms > gpu_sms:
            fail(f"{at}.gpu_sms_online", f"preset {name!r}: {sms} must be in 1..{gpu_sms} (specs.gpu_sms)")
    return names


def _check_keys(table: Mapping[str, object], prefix: str, where: str, keys: tuple[Sequence[str], Sequence[str]],
                fail: _Fail) -> None:
    """Every required key of ``keys`` present in ``table`` and none outside ``keys`` (a near miss named)."""
    required, optional = keys
    # Unknown keys first: a misspelt key is why its right spelling is missing.
    for key in table:
        if key not in (*required, *optional):
            near = difflib.get_close_matches(key, (*required, *optional), n=1)
            hint = f"; did you mean {near[0]!r}?" if near else f"; keys: {', '.join((*required, *optional))}"
            fail(prefix + key, f"is not a key of {where}{hint}")
    for key in required:
        if key not in table:
            fail(prefix + key, f"is missing (required in {where})")


def _core_range(steps: Mapping[str, object], module_cores: int,
                fail: _Fail) -> tuple[int, int]:
    """``(cpu_cores_min, cpu_cores_max)``: whole, from 1, and at most the module's cores."""
    lo = _whole(steps["cpu_cores_min"], "steps.cpu_cores_min", 1, fail)
    hi = _whole(steps["cpu_cores_max"], "steps.cpu_cores_max", lo, fail)
    if hi > module_cores:
        fail("steps.cpu_cores_max", f"{hi} must be at most specs.cpu_cores ({module_cores})")
    return lo, hi


def _spec_value(value: object, field: str, kind: type, may_be_zero: bool,
                fail: _Fail) -> None:
    if kind is str:
        _text(value, field, fail)
    elif kind is int:
        _whole(value, field, 0 if may_be_zero else 1, fail)
    elif not (_positive_number(value) or (may_be_zero and value == 0)):
        fail(field, f"{value!r} must be a number above 0")


def _step_list(value: object, field: str, fail: _Fail) -> list[float]:
    """A list of clock steps (MHz): numbers above 0, each above the one before."""
    if not isinstance(value, list) or not value or not all(_positive_number(v) for v in value):
        fail(field, "must be a list of one or more clock steps, numbers of MHz above 0")
    for a, b in pairwise(value):
        if b <= a:
            fail(field, f"must rise from step to step (MHz, lowest first); {a:g} is followed by {b:g}")
    return value


def _whole(value: object, field: str, least: int, fail: _Fail) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        fail(field, f"{value!r} must be a whole number")
    if value < least:
        fail(field, f"{value} must be {'above 0' if least == 1 else f'at least {least}'}")
    return value


def _positive_number(value: object) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
            and value > 0)


def _text(value: object, field: str, fail: _Fail) -> str:
    if not isinstance(value, str) or not value.strip():
        fail(field, f"{value!r} must be text (not empty)")
    return value


def _table(value: object, field: str, fail: _Fail) -> dict:
    if not isinstance(value, dict):
        fail(field, f"must be a table ([{field}] and its keys), not {value!r}")
    return value

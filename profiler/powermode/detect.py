"""Pick the power-mode controller for where the profiler runs.

Board detection reads ``/proc/device-tree/compatible`` first: NUL-separated strings that carry the module's
part number (``nvidia,p3737-0000+p3701-0005``, ``nvidia,p3701-0005``, ``nvidia,tegra234``), a stable ABI
unlike the free-text ``/proc/device-tree/model`` (AGX Xavier's reads ``jetson-xavier`` on L4T 32.1 and
``Jetson-AGX`` from 32.2: Adafruit_Python_PlatformDetect PR #37). The model string is the fallback.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

from jetpredict.models.catalogue import Device, load_device
from jetpredict.models.errors import InputError
from jetpredict.profiler import sysfs
from jetpredict.profiler.powermode.base import PowerModeController
from jetpredict.profiler.powermode.custom import SysfsController
from jetpredict.profiler.powermode.host import HostController
from jetpredict.profiler.powermode.nvpmodel import DEFAULT_CONF, NvpmodelController
from jetpredict.profiler.powermode.privileged import PrivilegedCommandError

log = logging.getLogger(__name__)

#: Module (SoM) families in a compatible string → catalogue ids. The ids are those L4T names its nvpmodel
#: files after (nvpmodel_t194_p3668.conf, nvpmodel_p3701_0000.conf, nvpmodel_p3767_0000..0004.conf in
#: L4T's nvpmodel file sets) and the module_part column of jetson_specs.csv (P2888, P3448). Orin NX and
#: Orin Nano share the P3767 family: the SKU tells them apart (0000/0001 NX, 0003/0004/0005 Nano).
_MODULE_FAMILIES: dict[str, str] = {"p2888": "agx-xavier", "p3668": "xavier-nx", "p3448": "nano",
                                    "p3701": "orin-agx"}
_P3767_SKUS: dict[str, str] = {"0000": "orin-nx", "0001": "orin-nx",
                               "0003": "orin-nano", "0004": "orin-nano", "0005": "orin-nano"}
#: Whole compatible entries of devkits whose string names no module (NVIDIA jetson-gpio's gpio_pin_data.py
#: compats_xavier / compats_nano): the AGX Xavier devkit (carrier P2972; ``nvidia,jetson-xavier`` on L4T
#: 32.1), the Nano devkit (P3450).
_BOARD_COMPATIBLES: dict[str, str] = {"nvidia,p2972-0000": "agx-xavier", "nvidia,jetson-xavier": "agx-xavier",
                                      "nvidia,p3450-0000": "nano", "nvidia,p3450-0002": "nano",
                                      "nvidia,jetson-nano": "nano"}
#: The module SKUs each catalogue entry describes (jetson_specs.csv module_part; the devkit modules
#: P3701-0000, the first AGX Orin devkit's 32 GB module with the 64GB's compute, and P3767-0005 are the
#: catalogued AGX Orin 64GB / Orin Nano 8GB compute; AGX Xavier 16/32/64 GB, P2888-0001/0003/0004/0005, share
#: one compute, as jetson_specs.csv says of its variants). Only the memory differs, which no prediction uses.
_CATALOGUED_SKUS: dict[str, frozenset[str]] = {
    "agx-xavier": frozenset({"p2888-0001", "p2888-0003", "p2888-0004", "p2888-0005"}),
    "xavier-nx": frozenset({"p3668-0000", "p3668-0001"}),
    "nano": frozenset({"p3448-0000", "p3448-0002"}),
    "orin-agx": frozenset({"p3701-0000", "p3701-0005"}),
    "orin-nx": frozenset({"p3767-0000"}),
    "orin-nano": frozenset({"p3767-0003", "p3767-0005"}),
}
#: Variants the catalogue lacks, as jetson_specs.csv and NVIDIA's nvpmodel file names describe them (AGX
#: Xavier 8GB and Industrial by L4T's board names: jetson-agx-xavier-devkit-8gb = p2822-0000+p2888-0006).
_KNOWN_VARIANTS: dict[str, str] = {
    "p2888-0006": "Jetson AGX Xavier 8GB (6 cores, 384 CUDA cores; nvpmodel_t194_8gb.conf)",
    "p2888-0008": "Jetson AGX Xavier Industrial (nvpmodel_t194_agxi.conf)",
    "p3701-0004": "Jetson AGX Orin 32GB (8 cores, 7 of 8 TPCs: 14 of 16 SMs; nvpmodel_p3701_0004.conf)",
    "p3767-0001": "Jetson Orin NX 8GB (6 cores; nvpmodel_p3767_0001.conf)",
    "p3767-0004": "Jetson Orin Nano 4GB (half the GPU TPCs; nvpmodel_p3767_0004.conf)",
}
_MODULE_ID = re.compile(r"\bp(\d{4})-(\d{4})(-super)?\b")

#: ``/proc/device-tree/model`` substrings → catalogue ids (most specific first). "jetson-agx" and
#: "jetson-xavier" are AGX Xavier's L4T 32.2+ / 32.1 model strings; they come after "agx orin".
_MODEL_NAMES = (("agx orin", "orin-agx"), ("orin nx", "orin-nx"), ("orin nano", "orin-nano"),
                ("agx xavier", "agx-xavier"), ("xavier nx", "xavier-nx"), ("jetson-agx", "agx-xavier"),
                ("jetson-xavier", "agx-xavier"), ("nano", "nano"))


@dataclass(frozen=True)
class BoardInfo:
    """What the device tree says about the board: catalogue id (None when unknown), the module SKU
    (``p3767-0001``; None when the strings name none), where the id came from, and warnings."""

    board: str | None
    module: str | None = None
    source: str | None = None  # "compatible" or "model"
    warnings: tuple[str, ...] = field(default=())


def _from_compatible(entries: list[str]) -> tuple[str | None, str | None, bool]:
    """``(board, module SKU, super)`` from the compatible strings (module part numbers first)."""
    for entry in entries:
        for family, sku, super_ in _MODULE_ID.findall(entry):
            module = f"p{family}-{sku}"
            board = _P3767_SKUS.get(sku) if family == "3767" else _MODULE_FAMILIES.get(f"p{family}")
            if board is not None:
                return board, module, bool(super_) or any(e.endswith("-super") for e in entries)
    board = next((_BOARD_COMPATIBLES[e] for e in entries if e in _BOARD_COMPATIBLES), None)
    return board, None, False


def _variant_warnings(board: str, module: str | None, super_: bool) -> list[str]:
    """Warnings for a module SKU or JetPack the catalogue entry does not describe (none invented)."""
    out = []
    catalogued = _CATALOGUED_SKUS.get(board)
    if module is not None and catalogued is not None and module not in catalogued:
        what = _KNOWN_VARIANTS.get(module, f"module {module}")
        out.append(f"this board is {what}, a variant the catalogue's {board!r} (modules "
                   f"{', '.join(sorted(catalogued))}) does not describe: its core count, clock ranges and "
                   "presets may differ, and predictions for it are extrapolated")
    if super_:
        out.append(f"this board's device tree is a JetPack 6.2 'Super' one; the catalogue's {board!r} holds "
                   "the JetPack 5 clock ranges, so the Super presets above them cannot be profiled as such")
    return out


def detect_board() -> BoardInfo:
    """The Jetson we run on, from ``/proc/device-tree/compatible``, else ``/proc/device-tree/model``."""
    compatible = sysfs.read_text("/proc/device-tree/compatible") or ""
    entries = [e.strip().lower() for e in compatible.split("\x00") if e.strip()]
    board, module, super_ = _from_compatible(entries)
    if board is not None:
        return BoardInfo(board, module, "compatible", tuple(_variant_warnings(board, module, super_)))
    model = (sysfs.read_text("/proc/device-tree/model") or "").replace("\x00", "").lower()
    board = next((b for key, b in _MODEL_NAMES if key in model), None)
    return BoardInfo(board, None, "model" if board else None)


def jetson_board() -> str | None:
    """The catalogue id of the Jetson we run on, or None; logs a warning for a variant the catalogue lacks."""
    info = detect_board()
    for warning in info.warnings:
        log.warning("%s", warning)
    return info.board


def detect_controller(kind: str, device_id: str | None = None, custom: str = "nvpmodel",
                      jetson_clocks: bool = False) -> PowerModeController:
    """``host`` → :class:`HostController`; ``jetson`` → :class:`NvpmodelController` (or, with
    ``custom="sysfs"``, :class:`SysfsController`) for ``device_id`` or the board found in the device tree;
    ``jetson_clocks``: pin each mode's clocks at its caps after every switch (``profile``'s default; ``apply``
    leaves caps, as a deployment runs under the governors).
    """
    if kind == "host":
        return HostController()
    if kind != "jetson":
        raise InputError(f"controller kind {kind!r} must be 'host' or 'jetson'", "device")
    board = device_id or jetson_board()
    if board is None:
        raise InputError("not a recognised Jetson (no known /proc/device-tree/compatible or model): pass --device DEVICE or "
                         "use --device host", "device")
    device: Device = load_device(board)
    if custom == "sysfs":
        return SysfsController(device)
    if custom != "nvpmodel":
        raise InputError(f"custom={custom!r} must be 'nvpmodel' or 'sysfs'", "custom")
    if sysfs.which("nvpmodel") is None:
        # A board named by --board or in the environment, off a Jetson, ends here: say where such a run goes.
        raise PrivilegedCommandError("nvpmodel not found on PATH: is L4T installed on this Jetson? A board named on "
                                     "the command line or in the environment does not make this machine one: off a "
                                     "Jetson, profile on the digital twin with --device sim:DEVICE, and `apply "
                                     "--dry-run --board BOARD` says what apply would do")
    return NvpmodelController(device, DEFAULT_CONF, jetson_clocks=jetson_clocks)

"""Pick the power-mode controller for where the profiler runs."""

from __future__ import annotations

from jetpredict.models.catalogue import Device, load_device
from jetpredict.models.errors import InputError
from jetpredict.profiler import sysfs
from jetpredict.profiler.powermode.base import PowerModeController
from jetpredict.profiler.powermode.custom import SysfsController
from jetpredict.profiler.powermode.host import HostController
from jetpredict.profiler.powermode.nvpmodel import DEFAULT_CONF, NvpmodelController
from jetpredict.profiler.powermode.privileged import PrivilegedCommandError

#: ``/proc/device-tree/model`` substrings → catalogue ids (most specific first).
_MODEL_NAMES = (("agx orin", "orin-agx"), ("orin nx", "orin-nx"), ("orin nano", "orin-nano"),
                ("agx xavier", "agx-xavier"), ("xavier nx", "xavier-nx"), ("nano", "nano"))


def jetson_board() -> str | None:
    """The catalogue id of the Jetson we run on, from ``/proc/device-tree/model``, or None."""
    model = (sysfs.read_text("/proc/device-tree/model") or "").replace("\x00", "").lower()
    return next((board for key, board in _MODEL_NAMES if key in model), None)


def detect_controller(kind: str, device_id: str | None = None, custom: str = "nvpmodel",
                      jetson_clocks: bool = False) -> PowerModeController:
    """``host`` → :class:`HostController`; ``jetson`` → :class:`NvpmodelController` (or, with
    ``custom="sysfs"``, :class:`SysfsController`) for ``device_id`` or the board found in the device tree.
    """
    if kind == "host":
        return HostController()
    if kind != "jetson":
        raise InputError(f"controller kind {kind!r} must be 'host' or 'jetson'", "device")
    board = device_id or jetson_board()
    if board is None:
        raise InputError("not a recognised Jetson (no /proc/device-tree/model): pass --device DEVICE or "
                         "use --device host", "device")
    device: Device = load_device(board)
    if custom == "sysfs":
        return SysfsController(device)
    if custom != "nvpmodel":
        raise InputError(f"custom={custom!r} must be 'nvpmodel' or 'sysfs'", "custom")
    if sysfs.which("nvpmodel") is None:
        raise PrivilegedCommandError("nvpmodel not found on PATH: is L4T installed on this Jetson?")
    return NvpmodelController(device, DEFAULT_CONF, jetson_clocks=jetson_clocks)

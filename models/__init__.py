"""Device catalogue, shared data formats, device physics and bundled fitted models.

``models`` depends on nothing else in jetpredict; the profiler, the predictor and the API all import it.
"""

from jetpredict.models.catalogue import Device, PowerMode, Preset, list_devices, load_device
from jetpredict.models.errors import InputError, ModeOutOfRangeError, UnknownDeviceError

__all__ = [
    "Device",
    "InputError",
    "ModeOutOfRangeError",
    "PowerMode",
    "Preset",
    "UnknownDeviceError",
    "list_devices",
    "load_device",
]

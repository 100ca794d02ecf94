"""The ground floor: device catalogue, profile-row format, errors, tables, JSON values, and the shipped
data (catalogue, reference sweeps, bundled fitted models) through :func:`jetpredict.models.paths.data_path`.

``models`` depends on nothing else in jetpredict; the profiler, the predictor and the API all import it.
"""

from jetpredict.models.catalogue import Device, PowerMode, Preset, list_devices, load_device
from jetpredict.models.errors import InputError, ModeOutOfRangeError, UnknownDeviceError
from jetpredict.models.paths import data_path

__all__ = [
    "Device",
    "InputError",
    "ModeOutOfRangeError",
    "PowerMode",
    "Preset",
    "UnknownDeviceError",
    "data_path",
    "list_devices",
    "load_device",
]

"""Discrete NVIDIA GPUs through NVML (``nvidia-ml-py``, imported as ``pynvml``).

``nvmlDeviceGetPowerUsage`` gives board power in mW. On Volta and newer,
``nvmlDeviceGetTotalEnergyConsumption`` gives a hardware energy counter in mJ: the sampler reads it with
each sample, and a window's energy is its increase (on Ampere GPUs other than GA100 and newer ones the
power reading is a 1-second average, NVML's reference says, so sampled power lags a window's edges).
Jetson iGPUs have no NVML: there the INA3221 or tegrastats meter is used instead.
"""

from __future__ import annotations

import threading
from types import ModuleType

from jetpredict.profiler.power.base import PowerMeter, PowerReadError

_init_lock = threading.Lock()


def _load_pynvml() -> ModuleType:
    import pynvml  # nvidia-ml-py; imported here so the profiler runs where it is not installed

    return pynvml


class NvmlMeter(PowerMeter):
    """Board power of one GPU (``name`` = ``nvml:gpu<index>``); ``LookupError`` when NVML or the GPU is missing."""

    domain = "gpu"

    def __init__(self, index: int = 0, nvml: ModuleType | None = None) -> None:
        try:
            self._nvml = nvml or _load_pynvml()
        except ImportError as err:
            raise LookupError(f"nvml: nvidia-ml-py not installed ({err})") from None
        try:
            with _init_lock:
                self._nvml.nvmlInit()
        except Exception as err:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
            raise LookupError(f"nvml: cannot initialise ({err})") from None
        self._open = True
        try:
            count = int(self._nvml.nvmlDeviceGetCount())
            if not 0 <= index < count:
                raise LookupError(f"nvml: GPU index {index} not in 0..{count - 1}" if count
                                  else "nvml: no GPU")
            self._handle = self._nvml.nvmlDeviceGetHandleByIndex(index)
            self._nvml.nvmlDeviceGetPowerUsage(self._handle)  # fails here, not mid-run, if unsupported
        except LookupError:
            self.close()
            raise
        except Exception as err:
            self.close()
            raise LookupError(f"nvml: GPU {index} power not readable ({err})") from None
        self.index = index
        self.name = f"nvml:gpu{index}"

    @property
    def rails(self) -> tuple[str, ...]:
        return (f"gpu{self.index}",)

    def read_power_w(self) -> float:
        try:
            return float(self._nvml.nvmlDeviceGetPowerUsage(self._handle)) / 1e3
        except Exception as err:
            raise PowerReadError(f"nvml: gpu{self.index}: {err}") from None

    def read_energy_j(self) -> float | None:
        """The GPU's hardware energy counter in J (Volta+), or None where the GPU has none."""
        try:
            return float(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)) / 1e3
        except Exception:
            return None

    def close(self) -> None:
        if getattr(self, "_open", False):
            self._open = False
            try:
                with _init_lock:
                    self._nvml.nvmlShutdown()
            except Exception:  # shutting down a half-initialised library must not mask the real error
                pass

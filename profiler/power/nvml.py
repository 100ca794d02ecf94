"""Discrete NVIDIA GPUs through NVML (``nvidia-ml-py``, imported as ``pynvml``).

``nvmlDeviceGetPowerUsage`` gives board power in mW. On Volta and newer,
``nvmlDeviceGetTotalEnergyConsumption`` gives a hardware energy counter in mJ: the sampler reads it with
each sample, and a window's energy is its increase (on Ampere GPUs other than GA100 and newer ones the
power reading is a 1-second average, NVML's reference says, so sampled power lags a window's edges).
Jetson iGPUs have no NVML: there the INA3221 or tegrastats meter is used instead.

NVML numbers GPUs by PCI bus, CUDA its own way (``CUDA_VISIBLE_DEVICES``, fastest first by default), so the
training device is opened by its UUID (``cuda_device``), which both agree on; an NVML index is NVML's own.
"""

from __future__ import annotations

import threading
from types import ModuleType

from jetpredict.profiler.power.base import GPU_DOMAIN, PlausibleRange, PowerMeter, PowerReadError

_init_lock = threading.Lock()

#: The least board power NVML can report above nothing (W): its unit, 1 mW. A GPU with power never reads 0.
NVML_LEAST_READING_W = 1e-3
#: A reading above this many times the GPU's largest settable power limit is no reading. The limit bounds power
#: averaged over the power controller's window and readings pass it in short excursions, so the bound is loose:
#: twice the most the limit may be set to. It still refuses a broken read's garbage (an all-ones 32-bit mW count
#: is 4.3 MW).
NVML_LIMIT_MARGIN = 2.0


def _load_pynvml() -> ModuleType:
    import pynvml  # nvidia-ml-py; imported here so the profiler runs where it is not installed

    return pynvml


def cuda_uuid(device: str) -> str:
    """NVML's UUID (``GPU-...``) of the CUDA device ``device`` (``cuda``: torch's current one, ``cuda:N``) as
    torch numbers it; ``LookupError`` saying why when torch cannot tell (no torch, no CUDA, no such device)."""
    try:
        import torch  # imported here: the meter is also used where torch is not installed

        if not torch.cuda.is_available():
            raise LookupError(f"nvml: cannot tell which GPU {device} is: CUDA is not available to torch")
        uuid = str(torch.cuda.get_device_properties(torch.device(device)).uuid)
    except LookupError:
        raise
    except Exception as err:  # ImportError, torch's AssertionError "Invalid device id", a driver error
        raise LookupError(f"nvml: cannot tell which GPU {device} is ({type(err).__name__}: {err})") from None
    # torch prints the bare UUID; NVML names GPUs (and MIG slices) with a prefix.
    return uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"


class NvmlMeter(PowerMeter):
    """Board power of one GPU (``name`` = ``nvml:gpu<NVML index>``): the CUDA device ``cuda_device`` (``cuda``,
    ``cuda:N``: torch's numbering, found by its UUID) when given, else NVML's GPU ``index``;
    ``LookupError`` when NVML or that GPU is missing -- never another GPU in its place."""

    domain = GPU_DOMAIN

    def __init__(self, index: int = 0, nvml: ModuleType | None = None, *, cuda_device: str | None = None) -> None:
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
        what = f"GPU {index}"
        nvml_index: int | str = index
        try:
            if cuda_device is not None:
                uuid = cuda_uuid(cuda_device)
                what = f"{uuid} ({cuda_device}, the training GPU)"
                self._handle = self._by_uuid(uuid, what)
                nvml_index = self._index(self._handle, uuid)
            else:
                self._handle = self._nvml.nvmlDeviceGetHandleByIndex(self._checked_index(index))
            self._nvml.nvmlDeviceGetPowerUsage(self._handle)  # fails here, not mid-run, if unsupported
        except LookupError:
            self.close()
            raise
        except Exception as err:
            self.close()
            raise LookupError(f"nvml: {what} power not readable ({err})") from None
        self.index = nvml_index
        self.name = f"nvml:gpu{nvml_index}"
        self._plausible = self._plausible_range()

    def _checked_index(self, index: int) -> int:
        count = int(self._nvml.nvmlDeviceGetCount())
        if not 0 <= index < count:
            raise LookupError(f"nvml: GPU index {index} not in 0..{count - 1}" if count else "nvml: no GPU")
        return index

    def _by_uuid(self, uuid: str, what: str) -> object:
        try:
            # bytes: older nvidia-ml-py passes the argument to C as is; newer ones take either.
            return self._nvml.nvmlDeviceGetHandleByUUID(uuid.encode())
        except Exception as err:  # NVMLError_NotFound: not visible to NVML (a container's view, a MIG slice)
            raise LookupError(f"nvml: no GPU with UUID {what} ({err}); its power is not measured rather "
                              "than another GPU's") from None

    def _index(self, handle: object, uuid: str) -> int | str:
        try:
            return int(self._nvml.nvmlDeviceGetIndex(handle))
        except Exception:  # the index only names the meter: the UUID names it as well
            return uuid

    def _plausible_range(self) -> PlausibleRange:
        """The readings (W) this GPU can give: above 0, and at most :data:`NVML_LIMIT_MARGIN` x the largest power
        limit NVML says it may be set to; no upper bound where NVML does not say (not supported, older GPUs)."""
        try:
            max_limit_w = float(self._nvml.nvmlDeviceGetPowerManagementLimitConstraints(self._handle)[1]) / 1e3
        except Exception:  # NVMLError_NotSupported, or a pynvml without the call
            max_limit_w = 0.0
        hi_w, source = ((NVML_LIMIT_MARGIN * max_limit_w,
                         f"{NVML_LIMIT_MARGIN:g} x gpu{self.index}'s {max_limit_w:g} W maximum power limit")
                        if max_limit_w > 0 else (float("inf"), "NVML reports no power-limit constraint"))
        return PlausibleRange(NVML_LEAST_READING_W, hi_w, source, "GPU board power")

    @property
    def rails(self) -> tuple[str, ...]:
        return (f"gpu{self.index}",)

    def read_power_w(self) -> float:
        try:
            power_w = float(self._nvml.nvmlDeviceGetPowerUsage(self._handle)) / 1e3
        except Exception as err:
            raise PowerReadError(f"nvml: gpu{self.index}: {err}") from None
        # 0 W would integrate to 0 J: unknown, not nothing.
        if problem := self._plausible.problem(power_w):
            raise PowerReadError(f"{self.name}: {problem}")
        return power_w

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

"""The four power-mode knobs of many modes as one typed value (cores; MHz), instead of four loose arrays."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from jetpredict.models.catalogue import MODE_FIELDS, Device

#: Two clocks within this relative step are one setting: a catalogue step and the published nvpmodel cap of
#: one setting differ by fractions of a percent (2265.6 vs 2265 MHz), while the closest real steps of any
#: Jetson lie 0.58% apart (AGX Orin CPU).
SAME_CLOCK_REL = 1e-3


def _floats(values: object) -> np.ndarray:
    return np.atleast_1d(np.asarray(values, dtype=float))


@dataclass(frozen=True, eq=False)
class ModeArrays:
    """Power modes as aligned float arrays: online cores (count) and CPU/GPU/EMC clocks (MHz).

    Any array-like (or scalar) is accepted and stored as a 1-d float array; all four must broadcast to
    one length.
    """

    cpu_cores: np.ndarray
    cpu_mhz: np.ndarray
    gpu_mhz: np.ndarray
    emc_mhz: np.ndarray

    def __post_init__(self) -> None:
        arrays = [_floats(getattr(self, k)) for k in MODE_FIELDS]
        n = np.broadcast_shapes(*(a.shape for a in arrays))
        for k, a in zip(MODE_FIELDS, arrays, strict=True):
            object.__setattr__(self, k, a if a.shape == n else np.broadcast_to(a, n).copy())

    @classmethod
    def from_frame(cls, frame: Mapping[str, object]) -> ModeArrays:
        """From a table (or mapping) with the columns ``cpu_cores, cpu_mhz, gpu_mhz, emc_mhz``."""
        return cls(*(np.asarray(frame[k], dtype=float) for k in MODE_FIELDS))

    @classmethod
    def of_device(cls, device: Device) -> ModeArrays:
        """Every mode of ``device``'s power-mode space, in ``Device.modes()`` order."""
        arrays = device.modes().as_arrays()
        return cls(*(arrays[k] for k in MODE_FIELDS))

    def __len__(self) -> int:
        return int(self.cpu_cores.shape[0])

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The knobs in ``MODE_FIELDS`` order."""
        return self.cpu_cores, self.cpu_mhz, self.gpu_mhz, self.emc_mhz

    def as_dict(self) -> dict[str, np.ndarray]:
        return dict(zip(MODE_FIELDS, self.arrays(), strict=True))

    def take(self, index: np.ndarray | slice) -> ModeArrays:
        """The modes at ``index`` (an index array, boolean mask or slice)."""
        return ModeArrays(*(a[index] for a in self.arrays()))

    def out_of_range(self, device: Device) -> dict[str, str]:
        """``{knob: message}`` for each knob with a value outside ``device``'s range (empty when all fit)."""
        return device.out_of_range(*self.arrays())

    def setting_ids(self) -> tuple[np.ndarray, np.ndarray]:
        """Per mode, the index of its distinct mode and of its distinct clock setting (CPU, GPU and EMC
        clocks equal within :data:`SAME_CLOCK_REL`, any cores): O(n log n), for rows of any number."""
        cached = self.__dict__.get("_setting_ids")
        if cached is None:
            clock_key = np.zeros(len(self), dtype=np.int64)
            for mhz in (self.cpu_mhz, self.gpu_mhz, self.emc_mhz):
                levels = _clock_levels(mhz)
                clock_key = clock_key * (int(levels.max(initial=0)) + 1) + levels
            _, clock_id = np.unique(clock_key, return_inverse=True)
            cores = np.unique(self.cpu_cores, return_inverse=True)[1]
            _, mode_id = np.unique(clock_id * (int(cores.max(initial=0)) + 1) + cores, return_inverse=True)
            # Cached on the (immutable) value: a fit asks for it once per evidence kind.
            cached = (mode_id.ravel(), clock_id.ravel())
            object.__setattr__(self, "_setting_ids", cached)
        return cached

    def distinct_count(self) -> int:
        """The number of distinct modes."""
        return int(self.setting_ids()[0].max()) + 1 if len(self) else 0


def _clock_levels(mhz: np.ndarray) -> np.ndarray:
    """Level index per clock value: sorted values chained within :data:`SAME_CLOCK_REL` share one level."""
    levels = np.unique(mhz)
    new = np.concatenate([[True], levels[1:] > levels[:-1] * (1.0 + SAME_CLOCK_REL)])
    return (np.cumsum(new) - 1)[np.searchsorted(levels, mhz)]

"""The simulated device's power-mode controller: applies presets and custom modes inside the twin."""

from __future__ import annotations

from dataclasses import dataclass, field

from jetpredict.models.catalogue import Device, PowerMode, Preset
from jetpredict.models.errors import InputError
from jetpredict.models.profile_rows import TWIN_METER_PREFIX
from jetpredict.profiler.powermode.base import PowerModeController
from jetpredict.profiler.sim.clock import PowerTimeline, SimClock


@dataclass
class SimulatedDevice:
    """State of one simulated Jetson: catalogue entry, mode in force, clock and true power timeline."""

    device: Device
    clock: SimClock = field(default_factory=SimClock)
    timeline: PowerTimeline = field(default_factory=PowerTimeline)
    mode: PowerMode | None = None

    def __post_init__(self) -> None:
        if self.mode is None:
            self.mode = self.device.preset(self.device.default_preset)

    @property
    def label(self) -> str:
        return f"{TWIN_METER_PREFIX}{self.device.id}"


class SimulatedController(PowerModeController):
    """Switches the simulated device between presets and custom modes (any knob inside the device's
    range, as on a real Jetson with a custom nvpmodel entry). A custom clock runs, and reads back, at the
    device's step nearest it (:meth:`Device.runs_at`), as a board's custom mode does."""

    kind = "sim"

    def __init__(self, state: SimulatedDevice) -> None:
        super().__init__()
        self.state = state

    def current(self) -> PowerMode:
        assert self.state.mode is not None
        return self.state.mode

    def apply(self, mode: PowerMode) -> None:
        if not isinstance(mode, PowerMode):
            raise InputError(f"mode must be a PowerMode, got {type(mode).__name__}", "mode")
        self.state.device.validate_mode(mode.cpu_cores, mode.cpu_mhz, mode.gpu_mhz, mode.emc_mhz)
        # A mode named after a preset at its knobs is that preset (gating included), as on a board.
        self.state.mode = self.state.device.runs_at(mode)

    def caps_of(self, mode: PowerMode) -> PowerMode:
        """A custom mode at the steps it runs at (:meth:`Device.runs_at`); a preset as asked (the twin runs its caps)."""
        runs = self.state.device.runs_at(mode)
        return mode if isinstance(runs, Preset) else runs

    def read_back(self) -> PowerMode:
        return self.current()

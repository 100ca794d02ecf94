"""Simulated rounds: a node's round time and energy from the digital twin (``profiler.sim``), labelled
``simulated`` wherever they go."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from jetpredict.models.catalogue import PowerMode, load_device
from jetpredict.models.errors import InputError
from jetpredict.models.numbers import checked_number
from jetpredict.predictor.checks import check_epochs
from jetpredict.profiler.builtin_workloads import BUILTIN_WORKLOADS, unknown_workload


@dataclass(frozen=True)
class TwinWorkload:
    """Simulation: the round's time and energy come from the digital twin (``profiler.sim``).

    ``workload``: a workload the twin knows (``lenet5-mnist``, ``resnet18-cifar10``, ...).
    ``epoch_scale``: one local epoch of this node in epochs of that workload (its share of the dataset).
    ``epochs``: local epochs of the round (default: the plan's, else 1). ``default_mode``: the preset the
    device runs when the message carries no plan (a plain Flower strategy); None = its fastest preset
    (MAXN, whatever the board calls it). ``batch_size``: None = the workload's.
    """

    workload: str
    epoch_scale: float = 1.0
    epochs: int | None = None
    default_mode: str | None = None
    batch_size: int | None = None

    def __post_init__(self) -> None:
        _check_workload_name(self.workload)
        # A zero, negative or NaN scale would report 0 J, or negative/NaN time and energy, as simulated.
        object.__setattr__(self, "epoch_scale", checked_number(self.epoch_scale, "epoch_scale"))
        if self.epochs is not None:
            check_epochs(self.epochs)


def _check_workload_name(name: object) -> None:
    """Refuse at construction a workload name the twin can never run, in the words
    :func:`profiler.workloads.resolve_workload` would fail every round with; ``torchvision:NAME`` and
    ``module:factory`` pass (the twin traces them on the host when a round needs them)."""
    if not isinstance(name, str) or not name.strip():
        raise InputError(f"workload must be a non-empty name, got {name!r}", "workload")
    name = name.strip()
    if ":" not in name and name not in BUILTIN_WORKLOADS:
        raise unknown_workload(name)


@lru_cache(maxsize=32)
def _twin(device: str, workload: str) -> Any:
    from jetpredict.profiler.sim import workload_complexity
    from jetpredict.profiler.sim.physics import DevicePhysics
    from jetpredict.profiler.sim.twin import Twin

    return Twin(DevicePhysics(load_device(device)), workload_complexity(workload))


def twin_round(device: str, mode: PowerMode, spec: TwinWorkload, epochs: int) -> dict[str, float]:
    """The twin's figures of one round on ``device`` at ``mode`` (noise-free means; simulated):
    ``time_s`` and ``energy_j`` of ``epochs`` x ``spec.epoch_scale`` epochs, ``avg_power_w`` and the
    mode's idle ``base_power_w``. A mode named after a preset at its knobs (a plan's mode arrives as a plain
    mode) runs as that preset, its gating included, as ``nvpmodel -m`` runs it on a board
    (:meth:`~jetpredict.models.catalogue.Device.as_preset`)."""
    d = load_device(device)
    d.validate_mode(*mode.knobs())
    mode = d.as_preset(mode)
    work = check_epochs(epochs) * spec.epoch_scale
    e = _twin(device, spec.workload).epoch(mode, spec.batch_size)
    return {"time_s": float(e["epoch_time_s"][0]) * work, "energy_j": float(e["epoch_energy_j"][0]) * work,
            "avg_power_w": float(e["avg_power_w"][0]), "base_power_w": float(e["base_power_w"][0])}


#: ``default_mode`` naming the device's fastest preset (MAXN, or whatever the board calls its equivalent).
FASTEST_PRESET = "fastest"


def preset_mode(device: str, name: str) -> PowerMode:
    """The preset ``name`` of ``device`` (a catalogue id), or its fastest one for :data:`FASTEST_PRESET`;
    :class:`~jetpredict.models.errors.InputError` names the presets when the device has no such one."""
    d = load_device(device)
    return d.maxn if name == FASTEST_PRESET else d.preset(name)


def twin_mode(device: str, spec: TwinWorkload) -> PowerMode:
    """The mode a simulated node runs without a plan: ``spec.default_mode``, else the device's fastest preset."""
    return preset_mode(device, FASTEST_PRESET if spec.default_mode is None else spec.default_mode)

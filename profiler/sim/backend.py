"""The simulated training backend: minibatch timings from the twin, with noise and warm-up, on a
simulated clock. :class:`~profiler.sim.runner.SimulatedRunner` drives it through a mode in simulated time."""

from __future__ import annotations

import math

import numpy as np
from jetpredict.models.catalogue import Device, PowerMode
from jetpredict.models.errors import InputError, cli_flag
from jetpredict.models.profile_rows import TWIN_ACCELERATOR
from jetpredict.profiler.backends import MinibatchTiming, TrainingBackend
from jetpredict.profiler.complexity import Complexity
from jetpredict.profiler.loader import check_batch_fits, loader_settings
from jetpredict.profiler.sim.controller import SimulatedDevice
from jetpredict.profiler.sim.kernel_costs import WorkloadComplexity
from jetpredict.profiler.sim.physics import DevicePhysics
from jetpredict.profiler.sim.twin import MinibatchModel, Twin

#: Relative noise (log-normal sigma) of one minibatch's compute and framework time, and of its stall.
MINIBATCH_TIME_NOISE_REL = 0.02
MINIBATCH_STALL_NOISE_REL = 0.05
#: Warm-up: minibatch i after a mode switch computes (1 + WARMUP_EXTRA x exp(-i / WARMUP_TAU)) x slower
#: (cuDNN algorithm search, allocator growth, clocks settling).
WARMUP_EXTRA = 1.5
WARMUP_TAU = 1.5
#: Memory of a Jetson that training cannot use, GB. The catalogue states none; the CPU and GPU share it, and
#: L4T plus PyTorch's CUDA/cuDNN context take several hundred MB each, so about 1 GB is not the network's.
OS_RESERVED_GB = 1.0


def minibatch_bytes(wc: WorkloadComplexity, batch_size: int) -> float:
    """Bytes a training minibatch of ``batch_size`` needs resident at once, at least: the inputs and
    outputs of its largest kernel. A lower bound (weights, gradients and the activations kept for the
    backward pass come on top), so a batch it refuses cannot fit."""
    return float(wc.kernel_bytes(batch_size).max())


def check_batch_fits_memory(device: Device, wc: WorkloadComplexity, batch_size: int) -> None:
    """InputError naming ``--batch-size`` when a minibatch of ``wc`` cannot fit in ``device``'s memory."""
    usable_gb = device.specs.memory_gb - OS_RESERVED_GB
    need_gb = minibatch_bytes(wc, batch_size) / 1e9
    if need_gb > usable_gb:
        raise InputError(
            f"{cli_flag('batch_size')} {batch_size} does not fit a {device.name}: one kernel of a "
            f"{wc.workload} minibatch alone moves {need_gb:.3g} GB, more than the {usable_gb:g} GB its "
            f"{device.specs.memory_gb:g} GB leave after {OS_RESERVED_GB:g} GB for the OS and CUDA; a real board "
            "runs out of memory, so the twin does not simulate it. Use a smaller batch", "batch_size")


class SimulatedBackend(TrainingBackend):
    """Trains nothing: each :meth:`next_minibatch` advances the simulated clock by the twin's minibatch
    time (with seeded noise and warm-up) and records the device's true power for the meter."""

    def __init__(self, state: SimulatedDevice, physics: DevicePhysics, complexity: WorkloadComplexity,
                 batch_size: int | None = None, num_workers: int | None = None, seed: int = 0) -> None:
        # Workers default as on a real board of this type (its cores, not the host's).
        batch_size, num_workers = loader_settings(batch_size, num_workers,
                                                  default_batch_size=complexity.batch_size,
                                                  cpu_cores=state.device.cpu_cores_range[1])
        check_batch_fits(batch_size, complexity.dataset_size)  # as the real backend
        check_batch_fits_memory(state.device, complexity, batch_size)
        self.state = state
        self.physics = physics
        self.wc = complexity
        self.twin = Twin(physics, complexity)
        self.workload = complexity.workload
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.minibatches_per_epoch = complexity.minibatches_per_epoch(batch_size)
        self._rng = np.random.default_rng([seed, 0])
        self._mb: MinibatchModel | None = None
        self._mode: PowerMode | None = None
        self._count = 0
        self._p_stall = self._p_busy = 0.0

    # -- TrainingBackend
    def prepare(self, mode: PowerMode | None) -> None:
        self._mode = mode or self.state.mode
        assert self._mode is not None
        mb = self.twin.minibatch(self._mode, self.batch_size, self.num_workers)
        self._mb = mb
        self._count = 0
        # Power while the GPU waits on data vs. while it computes, consistent with the mean power.
        total, stall, mean_w = float(mb.total_s[0]), float(mb.stall_s[0]), float(mb.power_w[0])
        self._p_stall = float(self.physics.power_w(self._mode, 0.0, mb.cpu_util, 0.0)[0])
        busy = total - stall
        self._p_busy = (mean_w * total - self._p_stall * stall) / busy if busy > 0 else mean_w

    def next_minibatch(self) -> MinibatchTiming:
        if self._mb is None:
            self.prepare(None)
        mb, i = self._mb, self._count
        assert mb is not None
        self._count += 1
        noise = self._rng.lognormal(
            0.0, [MINIBATCH_TIME_NOISE_REL, MINIBATCH_TIME_NOISE_REL, MINIBATCH_STALL_NOISE_REL])
        warm = 1.0 + WARMUP_EXTRA * math.exp(-i / WARMUP_TAU)
        compute = float(mb.compute_s[0]) * warm * noise[0]
        overhead = float(mb.overhead_s[0]) * noise[1]
        # The first minibatch after a switch waits for a whole fetch: the workers' queue is empty.
        stall = float(mb.fetch_s[0] if i == 0 and self.num_workers > 0 else mb.stall_s[0]) * noise[2]
        total = stall + compute + overhead
        t0 = self.state.clock.now()
        self.state.timeline.add(t0, t0 + stall, self._p_stall)
        t1 = self.state.clock.advance(total)
        self.state.timeline.add(t0 + stall, t1, self._p_busy)
        return MinibatchTiming(stall_s=stall, compute_s=compute, total_s=total, start_s=t0, end_s=t1)

    def complexity(self) -> Complexity:
        b = self.wc.batch_size
        flops = self.wc.kernel_flops(b).sum() / b
        return Complexity(
            macs_fwd=None, params=self.wc.params, flops_train=int(flops), param_bytes=self.wc.param_bytes,
            activation_bytes=None, leaf_modules=None, kernel_count=self.wc.kernel_count,
            null_reason="simulated: the twin traces whole training steps (no forward-only MACs, "
                        "activation bytes or module count)")

    def cpu_s_per_sample(self) -> float | None:
        mode = self._mode or self.state.mode
        per_sample = self.wc.data_cpu_s_per_sample + (
            self.wc.decode_mpix_per_sample * self.physics.shared["jpeg_decode_s_per_mpix"])
        return float(per_sample / self.physics.cpu_speed(mode.cpu_mhz, mode.emc_mhz))

    def threads(self) -> int | None:
        mode = self._mode or self.state.mode
        return int(mode.cpu_cores)

    def accelerator(self) -> str:
        return TWIN_ACCELERATOR

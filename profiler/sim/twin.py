"""The digital twin's model: a workload's complexity + a power mode -> one minibatch's stall, compute, power.

Mechanisms (per minibatch, vectorised over power modes; constants from :mod:`profiler.sim.physics`):

- GPU kernels: each kernel's roofline time from FLOPs / (eff x FP32 peak) and bytes / (eff x bandwidth)
  (a soft-cornered roofline, see :meth:`DevicePhysics.kernel_time_s`) plus a fixed per-kernel latency.
- Kernel launch: the main thread issues kernels one by one at ``launch_s / cpu_speed`` each; the GPU
  runs kernel i at max(end of kernel i-1, its issue time). GPU compute = the end of the last kernel,
  so small networks are launch (CPU) bound and large ones GPU bound, with no switch in the model.
- Data: a worker needs ``batch x CPU cost per sample / cpu_speed`` per minibatch, slowed when workers
  contend; w >= 1 workers pipeline with compute: stall = hand-off + max(0, fetch / parallel workers -
  (compute + framework + hand-off)); without workers the main thread fetches: stall = fetch.
- CPU speed: the core's clock plus memory stalls that follow the memory clock's period
  (:meth:`DevicePhysics.cpu_speed`), for the launches, the framework, the hand-off and the fetch alike.
- Contention: the main thread's CPU work slows when workers need more than the free cores, and when
  there are more processes than cores, in proportion to how busy the workers are.
- Power: module baseload + dynamic CPU/GPU/DRAM power from the utilisations (:meth:`DevicePhysics.power_w`);
  a kernel's fixed latency counts in the GPU's at the shared ``gpu_latency_power_share`` (few SMs work
  through it), so a launch-bound network draws far less GPU power than its busy time suggests.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from jetpredict.models.catalogue import ModeArrays
from jetpredict.models.profile_rows import DEFAULT_NUM_WORKERS
from jetpredict.profiler.sim.kernel_costs import WorkloadComplexity
from jetpredict.profiler.sim.physics import DevicePhysics

#: Fixed-point iterations for the main-thread contention factor (converges in 2-3).
CONTENTION_ITERATIONS = 3


@dataclass
class MinibatchModel:
    """Noise-free mean of one steady-state minibatch per mode (arrays, seconds / W / fractions)."""

    stall_s: np.ndarray
    compute_s: np.ndarray
    overhead_s: np.ndarray
    total_s: np.ndarray
    gpu_busy_s: np.ndarray
    launch_s: np.ndarray
    fetch_s: np.ndarray
    gpu_util: np.ndarray  # share of the step at GPU work, latency at gpu_latency_power_share
    cpu_util: np.ndarray
    mem_util: np.ndarray
    power_w: np.ndarray
    base_power_w: np.ndarray


class Twin:
    """Turns a workload's measured complexity into per-minibatch timings and power on one device."""

    def __init__(self, physics: DevicePhysics, complexity: WorkloadComplexity) -> None:
        self.physics = physics
        self.complexity = complexity

    def minibatch(self, modes, batch_size: int | None = None,
                  num_workers=DEFAULT_NUM_WORKERS) -> MinibatchModel:
        """The mean minibatch at each mode (``modes``: anything :meth:`ModeArrays.of` takes)."""
        ph, wc, c, sh = self.physics, self.complexity, self.physics.constants, self.physics.shared
        arrays = ModeArrays.of(modes)
        b = int(batch_size or wc.batch_size)
        cores, cpu, emc = arrays.cpu_cores, arrays.cpu_mhz, arrays.emc_mhz
        # A preset that gates part of the GPU runs its kernels (math and load/store paths alike) as the
        # whole GPU would at that share of the clock; the kernel latency does not change.
        gpu = arrays.gpu_throughput_mhz
        workers = np.broadcast_to(np.asarray(num_workers, dtype=float), cores.shape)
        speed = ph.cpu_speed(cpu, emc)

        args = (wc.kernel_flops(b)[:, None], wc.kernel_bytes(b)[:, None], wc.kinds[:, None],
                gpu[None, :], emc[None, :])
        kt = ph.kernel_time_s(*args)
        gpu_busy = kt.sum(axis=0)
        # DRAM busy time: every kernel's traffic at DRAM's effective bandwidth (DRAM power follows it).
        mem_busy = ph.dram_time_s(wc.kernel_bytes(b)[:, None], emc[None, :]).sum(axis=0)

        per_sample = wc.data_cpu_s_per_sample + wc.decode_mpix_per_sample * sh["jpeg_decode_s_per_mpix"]
        fetch = b * per_sample / speed
        par = ph.loader_parallelism(cores, workers)
        fetch_w = fetch * (1.0 + sh["worker_contention"] * np.maximum(par - 1.0, 0.0))
        collate = c.handoff_s_per_mb * b * wc.sample_bytes / 1e6 / speed
        handoff = c.handoff_s / speed + collate
        has_workers = workers > 0

        # More processes than cores (main + workers): busy workers preempt the main thread.
        oversub = np.maximum(0.0, 1.0 + workers - cores) / cores
        slow = np.ones_like(speed)
        for _ in range(CONTENTION_ITERATIONS):
            launch = c.launch_s * slow / speed
            compute = self._queue(kt, launch)
            framework = c.framework_s * slow / speed
            ho = handoff * slow
            consume = compute + framework + ho
            piped = ho + np.maximum(0.0, fetch_w / np.maximum(par, 1e-9) - consume)
            stall = np.where(has_workers, piped, fetch + collate * slow)
            total = stall + compute + framework
            load = np.where(has_workers, np.minimum(par, fetch_w / total), 0.0)
            slow = np.maximum(1.0, (1.0 + load) / cores) * (1.0 + sh["sched_interference"] * oversub * load)

        # The main thread spins while it waits on the GPU, so it counts as one busy core.
        cpu_util = np.minimum(1.0, (1.0 + load) / cores)
        # A tiny kernel's fixed latency keeps few SMs at work: it draws that share of the busy GPU's power.
        idle_latency = (1.0 - sh["gpu_latency_power_share"]) * c.gpu_kernel_latency_s * kt.shape[0]
        gpu_util = np.minimum(1.0, np.maximum(gpu_busy - idle_latency, 0.0) / total)
        mem_util = np.minimum(1.0, mem_busy / total)
        return MinibatchModel(
            stall_s=stall, compute_s=compute, overhead_s=framework, total_s=total, gpu_busy_s=gpu_busy,
            launch_s=launch * kt.shape[0], fetch_s=fetch_w, gpu_util=gpu_util, cpu_util=cpu_util,
            mem_util=mem_util, power_w=ph.power_w(arrays, gpu_util, cpu_util, mem_util),
            base_power_w=ph.base_power_w(arrays))

    @staticmethod
    def _queue(kernel_s: np.ndarray, launch_s: np.ndarray) -> np.ndarray:
        """End time of the last kernel when the CPU issues one every ``launch_s`` and the GPU runs them
        in order: g_i = max(g_{i-1}, i x launch) + t_i, i.e. g_n = max_j (j x launch + t_j + ... + t_n)."""
        suffix = np.cumsum(kernel_s[::-1], axis=0)[::-1]
        issue = np.arange(1, kernel_s.shape[0] + 1, dtype=float)[:, None] * launch_s[None, :]
        return (issue + suffix).max(axis=0)

    def epoch(self, modes, batch_size: int | None = None,
              num_workers=DEFAULT_NUM_WORKERS) -> dict[str, np.ndarray]:
        """Steady-state epoch figures per mode, in profile-row units (s per epoch, W)."""
        mb = self.minibatch(modes, batch_size, num_workers)
        n = self.complexity.minibatches_per_epoch(batch_size)
        return {"epoch_time_s": mb.total_s * n, "stall_time_s": mb.stall_s * n,
                "compute_time_s": mb.compute_s * n, "avg_power_w": mb.power_w,
                "epoch_energy_j": mb.power_w * mb.total_s * n, "base_power_w": mb.base_power_w,
                "minibatches_per_epoch": np.full(mb.total_s.shape, n)}

"""DataLoader settings of a training run: the batch size and worker count, with their defaults and checks,
shared by the real backend (:mod:`profiler.workloads`) and the twin's (:mod:`profiler.sim.backend`)."""

from __future__ import annotations

import os

from jetpredict.models.profile_rows import DEFAULT_NUM_WORKERS
from jetpredict.profiler.flags import check_range


def default_num_workers(cpu_cores: int | None = None) -> int:
    """DataLoader workers when none are asked for: the POMACS setup's 4, but no more than the machine's
    cores (``cpu_cores``, default this machine's), since more workers than cores only contend."""
    cores = os.cpu_count() if cpu_cores is None else cpu_cores
    return max(1, min(DEFAULT_NUM_WORKERS, int(cores or 1)))


def loader_settings(batch_size: int | None, num_workers: int | None, *, default_batch_size: int,
                    cpu_cores: int | None = None) -> tuple[int, int]:
    """(batch size, DataLoader workers) with defaults filled in and checked; a bad one raises
    :class:`InputError` with field ``batch_size`` or ``workers`` whose message names the flag
    (``--batch-size``, ``--workers``). ``cpu_cores``: as in :func:`default_num_workers`."""
    batch = default_batch_size if batch_size is None else int(batch_size)
    workers = default_num_workers(cpu_cores) if num_workers is None else int(num_workers)
    return check_range("batch_size", batch, 1), check_range("workers", workers, 0)

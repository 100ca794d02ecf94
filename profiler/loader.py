"""DataLoader settings of a training run: the batch size and worker count, with their defaults and checks,
shared by the real backend (:mod:`profiler.workloads`) and the twin's (:mod:`profiler.sim.backend`)."""

from __future__ import annotations

import math
import os

from jetpredict.models.errors import InputError, cli_flag
from jetpredict.models.profile_rows import DEFAULT_NUM_WORKERS, FIELD_BY_NAME
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
    # The row format's own bounds (num_workers <= MAX_CORES, batch_size <= MAX_COUNT): a value the measured
    # row would fail is refused here, before any mode is switched and measured.
    batch_max = float(FIELD_BY_NAME["batch_size"].maximum or math.inf)
    workers_max = float(FIELD_BY_NAME["num_workers"].maximum or math.inf)
    return check_range("batch_size", batch, 1, batch_max), check_range("workers", workers, 0, workers_max)


def check_batch_fits(batch_size: int, samples: int, workload: str | None = None) -> None:
    """InputError naming ``--batch-size`` when one minibatch would hold more than the dataset's ``samples``; an
    empty dataset is the workload's fault, not the batch size's (field ``workload``, naming ``workload``)."""
    if samples < 1:
        whose = f"{cli_flag('workload')} {workload!r}: its" if workload else "the workload's"
        raise InputError(f"{whose} dataset is empty ({samples} samples): no minibatch can be drawn from it; "
                         "give it at least one batch of samples", "workload")
    if samples < batch_size:
        raise InputError(f"{cli_flag('batch_size')} {batch_size} is larger than the dataset ({samples} samples)",
                         "batch_size")

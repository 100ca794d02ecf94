"""Training backends: something that runs one minibatch at a time and says how long its parts took.

:class:`MinibatchTiming` and :class:`TrainingBackend` import without torch, so the digital twin can
produce timings for :mod:`profiler.runner` on a machine without PyTorch. :class:`TorchBackend` trains a
real workload: per minibatch it times the *fetch stall* (waiting on the DataLoader iterator plus the
host-to-device copy) and the *compute* (zero_grad, forward, loss, backward, step). On CUDA, compute is
timed with CUDA events recorded after a synchronize; on the CPU with ``time.perf_counter()``.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jetpredict.models.errors import InputError

if TYPE_CHECKING:
    from jetpredict.models.catalogue import PowerMode
    from jetpredict.profiler.complexity import Complexity
    from jetpredict.profiler.workloads import BuiltWorkload


@dataclass(frozen=True)
class MinibatchTiming:
    """One minibatch, in s. ``start_s``/``end_s`` are ``time.perf_counter()`` stamps (or the twin's clock)
    that bound it, so energy can be integrated over exactly the measured window."""

    stall_s: float
    compute_s: float
    total_s: float
    start_s: float
    end_s: float

    def as_dict(self) -> dict[str, float]:
        return {"stall_s": self.stall_s, "compute_s": self.compute_s, "total_s": self.total_s,
                "start_s": self.start_s, "end_s": self.end_s}


class TrainingBackend(ABC):
    """Runs minibatches of one workload. ``prepare(mode)`` after each mode switch, then
    ``next_minibatch()`` repeatedly; ``close()`` at the end."""

    #: Filled by subclasses: what the profile row reports about the run.
    workload: str = ""
    batch_size: int = 0
    num_workers: int = 0
    minibatches_per_epoch: int = 0

    @abstractmethod
    def prepare(self, mode: PowerMode | None) -> None:
        """Get ready to train at ``mode`` (already applied by the controller)."""

    @abstractmethod
    def next_minibatch(self) -> MinibatchTiming:
        """Train one minibatch and time it."""

    def complexity(self) -> Complexity | None:
        """The workload's complexity (per sample), or None when unknown."""
        return None

    def cpu_s_per_sample(self) -> float | None:
        """CPU seconds the data pipeline spends on one sample (decode + augment + collate), or None."""
        return None

    def threads(self) -> int | None:
        """Compute threads in use (host runs report this as ``cpu_cores``)."""
        return None

    def accelerator(self) -> str:
        """``cuda`` or ``cpu`` (or ``sim``): where compute runs."""
        return "cpu"

    def data_source(self) -> str | None:
        """Where minibatches come from (``synthetic``, ``user``, ``folder:DIR``), or None."""
        return None

    def user_code_line(self, exc: BaseException) -> str | None:
        """``FILE:LINE`` in the workload's own code where ``exc`` was raised, or None (a backend that runs no
        user code, or a failure outside it)."""
        return None

    def close(self) -> None:  # noqa: B027  (optional hook: most backends hold nothing)
        """Release workers and memory."""

    def __enter__(self) -> TrainingBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class TorchBackend(TrainingBackend):
    """Real PyTorch training of a :class:`~profiler.workloads.BuiltWorkload` on CUDA if present, else CPU."""

    def __init__(self, workload: str, batch_size: int | None = None, num_workers: int | None = None,
                 data_dir: str | None = None, device: str | None = None, threads: int | None = None,
                 seed: int = 0) -> None:
        import torch
        from jetpredict.profiler.workloads import build_workload

        self._torch = torch
        if threads is not None:
            torch.set_num_threads(int(threads))
        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.built: BuiltWorkload = build_workload(workload, batch_size, num_workers, data_dir, device, seed)
        self.workload = self.built.spec.name
        self.batch_size = self.built.batch_size
        self.num_workers = self.built.num_workers
        self.minibatches_per_epoch = self.built.minibatches_per_epoch
        self.device = self.built.device
        self._loader: Any = None
        self._iter: Any = None
        self._complexity: Complexity | None = None
        self._cpu_s_per_sample: float | None = None

    # -- TrainingBackend
    def prepare(self, mode: PowerMode | None) -> None:
        # Measured per mode: on a Jetson the CPU clock and cores of the mode set this cost.
        self._cpu_s_per_sample = self._measure_cpu_s_per_sample()
        if self._loader is None:
            self._loader = self.built.make_loader()
        self._iter = iter(self._loader)

    def next_minibatch(self) -> MinibatchTiming:
        torch = self._torch
        if self._iter is None:
            self.prepare(None)
        cuda = self.device.type == "cuda"
        t0 = time.perf_counter()
        try:
            batch = next(self._iter)
        except StopIteration:  # an epoch boundary: restarting the iterator is part of the stall
            self._iter = iter(self._loader)
            batch = next(self._iter)
        inputs, targets = self._to_device(batch[0]), self._to_device(batch[1])
        if cuda:
            torch.cuda.synchronize(self.device)
        t1 = time.perf_counter()
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
        loss = self._step(inputs, targets)
        if cuda:
            end.record()
            end.synchronize()
            compute_s = start.elapsed_time(end) / 1e3
        t2 = time.perf_counter()
        if not cuda:
            compute_s = t2 - t1
        self._check_loss(loss)
        return MinibatchTiming(stall_s=t1 - t0, compute_s=compute_s, total_s=t2 - t0, start_s=t0, end_s=t2)

    def complexity(self) -> Complexity:
        if self._complexity is None:
            # Here, as in __init__: workloads imports torch, which the twin's use of this module must not need.
            from jetpredict.profiler.complexity import measure_complexity
            from jetpredict.profiler.workloads import user_code_failed

            try:
                example = self.built.example_input()
            except Exception as exc:  # the user's dataset or batches: before any mode is switched
                raise InputError(user_code_failed(self.workload, "reading its first sample", exc),
                                 "workload") from exc
            self._complexity = measure_complexity(self.built.model, example)
        return self._complexity

    def cpu_s_per_sample(self) -> float | None:
        return self._cpu_s_per_sample

    def threads(self) -> int:
        return int(self._torch.get_num_threads())

    def accelerator(self) -> str:
        return self.device.type

    def data_source(self) -> str:
        return self.built.data_source

    def user_code_line(self, exc: BaseException) -> str | None:
        from jetpredict.profiler.workloads import where_raised

        return where_raised(exc)

    def close(self) -> None:
        # Dropping the iterator and loader shuts persistent DataLoader workers down.
        self._iter = None
        self._loader = None

    # -- internals
    def _to_device(self, value: Any) -> Any:
        torch = self._torch
        if isinstance(value, torch.Tensor):
            return value.to(self.device, non_blocking=True)
        if isinstance(value, dict):
            return {k: self._to_device(v) for k, v in value.items()}
        if isinstance(value, tuple | list):
            return type(value)(self._to_device(v) for v in value)
        return value

    def _step(self, inputs: Any, targets: Any) -> Any:
        """One training step; returns its loss (a tensor, not read here: reading it would synchronise)."""
        b = self.built
        b.optimizer.zero_grad(set_to_none=True)
        outputs = b.model(**inputs) if isinstance(inputs, dict) else b.model(inputs)
        loss = b.loss_fn(outputs, targets)
        loss.backward()
        b.optimizer.step()
        return loss

    def _check_loss(self, loss: Any) -> None:
        """FloatingPointError (``loss is nan`` / ``inf``) when the minibatch's loss is not finite: a diverged
        model's times are not the workload the user means. Called once the minibatch's timing has closed (on
        CUDA its step is already synchronised), so it adds no time to the row; every minibatch is checked, since
        the backend does not know which one is a mode's last (--warmup 0 leaves only measured ones)."""
        torch = self._torch
        if not bool(torch.isfinite(loss).all()):
            raise FloatingPointError(f"loss is {'nan' if bool(torch.isnan(loss).any()) else 'inf'}: the model "
                                     "diverged (a learning rate too high, or bad inputs or targets), and a diverged "
                                     "model's timing is not the workload's; fix the training first")

    def _measure_cpu_s_per_sample(self, samples: int | None = None) -> float | None:
        """CPU time (this thread) to produce samples serially, as one DataLoader worker would, per sample."""
        dataset = self.built.dataset
        if dataset is None or not hasattr(dataset, "__getitem__") or not hasattr(dataset, "__len__"):
            return None  # the workload supplies its own batches: no per-sample pipeline to time
        n = min(len(dataset), samples or max(2 * self.batch_size, 32))
        from torch.utils.data import default_collate

        start = time.thread_time()
        items = [dataset[i] for i in range(n)]
        default_collate(items)
        return (time.thread_time() - start) / n

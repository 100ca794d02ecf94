"""The torch backend's clocks: a CUDA minibatch's stall ends once the copy to the GPU has finished and its
compute is the CUDA events' time in seconds; the data pipeline's CPU time is per sample. Real torch (the CPU
wheel) and the built-in lenet5-mnist workload; a spy stands in for CUDA only, which the CPU wheel lacks."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from jetpredict.profiler import backends
from jetpredict.profiler.backends import TorchBackend

pytestmark = pytest.mark.usefixtures("torch_one_thread")

#: The backend's perf_counter, scripted: the minibatch starts at 10 s, its stall ends at 10.5 s, it ends at 11 s.
CLOCK_S = (10.0, 10.5, 11.0)
#: What the spy's CUDA events say the step took, in ms (as CUDA's elapsed_time gives it).
EVENT_MS = 250.0


def test_a_cuda_minibatch_is_timed_between_synchronizes_in_seconds(monkeypatch):
    """The order is the point: the copy to the GPU is asynchronous, so the stall's stamp comes after a
    synchronize (else the copy lands in compute); the end event is waited on before its time is read."""
    import torch

    backend = TorchBackend("lenet5-mnist", 8, 0, device="cpu")
    backend.prepare(None)
    events: list[str] = []
    clock = iter(CLOCK_S)

    def perf_counter() -> float:
        events.append("clock")
        return next(clock)

    class Event:
        def __init__(self, enable_timing: bool = False) -> None:
            assert enable_timing, "an event without timing has no elapsed_time"

        def record(self, stream: object = None) -> None:
            events.append("record")

        def synchronize(self) -> None:
            events.append("end.synchronize")

        def elapsed_time(self, end: Event) -> float:
            events.append("elapsed_time")
            return EVENT_MS

    monkeypatch.setattr(backends, "time", SimpleNamespace(perf_counter=perf_counter, thread_time=time.thread_time))
    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: events.append("synchronize"))
    backend.device = SimpleNamespace(type="cuda")
    monkeypatch.setattr(backend, "_to_device", lambda value: value)  # the batch stays on the CPU's model
    t = backend.next_minibatch()
    assert events == ["clock", "synchronize", "clock", "record", "record", "end.synchronize", "elapsed_time",
                      "clock"]
    assert t.compute_s == EVENT_MS / 1e3
    assert (t.stall_s, t.total_s, t.start_s, t.end_s) == (0.5, 1.0, 10.0, 11.0)


#: CPU time (s) each sample of :class:`BusyDataset` costs.
SAMPLE_CPU_S = 0.005


class BusyDataset:
    """100 samples shaped as MNIST's, each costing :data:`SAMPLE_CPU_S` of this thread's CPU time."""

    def __len__(self) -> int:
        return 100

    def __getitem__(self, i: int) -> tuple[object, int]:
        import torch

        end = time.thread_time() + SAMPLE_CPU_S
        while time.thread_time() < end:
            pass
        return torch.zeros(1, 28, 28), 0


def test_the_data_pipelines_cpu_seconds_are_per_sample():
    """CPU time, so a loaded machine does not add to it; the bounds allow the collate and loop overhead."""
    backend = TorchBackend("lenet5-mnist", 8, 0, device="cpu")
    backend.built.dataset = BusyDataset()
    backend.prepare(None)
    assert SAMPLE_CPU_S <= backend.cpu_s_per_sample() < 4 * SAMPLE_CPU_S

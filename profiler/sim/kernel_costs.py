"""Per-kernel complexity of one training step, measured on the host, as the digital twin's input.

One real training step (forward, loss, backward, SGD step) of the workload runs on the host CPU under a
torch dispatch mode that records every ATen operator that would launch a GPU kernel: its FLOPs (torch's
own FLOP formulas), the bytes it reads and writes, and its kind (dense conv/matmul, depthwise conv, or
memory-bound). Tracing at two batch sizes gives, per kernel, a fixed part and a per-sample part, so the
twin can evaluate any batch size. The data pipeline's CPU cost per sample is timed on the host by
drawing samples from the workload's dataset (decode + augmentation, as the DataLoader workers do).

Results of the built-in workloads are cached in ``profiler/sim/data/workloads/<id>.json`` so that sweeps and tests
need no torch: ``python -m tools.retrace_workloads`` re-traces them and prints how they differ from
the cache; ``--write`` rewrites it (the data pipeline's CPU time is this host's, so a rewrite moves every figure
built on the cache: the calibration, the reference sweeps, the bundled models).
"""

from __future__ import annotations

import json
import math
import platform
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from jetpredict.models.errors import InputError, UnknownWorkloadError
from jetpredict.models.profiling_protocol import BATCH_SIZE

WORKLOADS_DIR = Path(__file__).resolve().parent / "data" / "workloads"
KIND_DENSE, KIND_DEPTHWISE, KIND_MEMORY = 0, 1, 2
#: Source images decoded per sample (megapixels) for datasets stored as compressed files. GLD-23k
#: images are JPEGs of up to 800 px on the long side (~800x600); in-memory MNIST/CIFAR arrays decode nothing.
DECODE_MPIX_PER_SAMPLE = {"GLD-23k": 0.48}
#: CUDA's multi-tensor-apply handles about this many tensors per launch of a foreach kernel.
FOREACH_TENSORS_PER_LAUNCH = 110
TRACE_BATCHES = (2, 4)


class TraceFailed(RuntimeError):
    """The workload's own code failed while one training step was traced: the message names the workload, the
    step and the exception (:func:`~profiler.workloads.user_code_failed`); the cause is chained."""


@dataclass
class WorkloadComplexity:
    """What one training step of a workload costs, per kernel (arrays) and per sample.

    ``flops_fixed``/``flops_per_sample`` (FLOP) and ``bytes_fixed``/``bytes_per_sample`` (B) give each
    kernel's cost at batch size N as fixed + N x per-sample. ``kinds``: 0 dense, 1 depthwise, 2 memory.
    ``data_cpu_s_per_sample``: host CPU seconds to produce one sample; ``decode_mpix_per_sample``:
    megapixels of compressed image decoded per sample in the real pipeline (0 = none);
    ``sample_bytes``: bytes of one input tensor handed from the DataLoader to the main process.
    """

    workload: str
    dataset: str
    batch_size: int
    dataset_size: int
    flops_fixed: np.ndarray
    flops_per_sample: np.ndarray
    bytes_fixed: np.ndarray
    bytes_per_sample: np.ndarray
    kinds: np.ndarray
    data_cpu_s_per_sample: float
    decode_mpix_per_sample: float
    sample_bytes: float
    params: int = 0
    param_bytes: int = 0
    host: str = ""

    def minibatches_per_epoch(self, batch_size: int | None = None) -> int:
        return math.ceil(self.dataset_size / (batch_size or self.batch_size))

    def kernel_flops(self, batch_size: int) -> np.ndarray:
        return self.flops_fixed + batch_size * self.flops_per_sample

    def kernel_bytes(self, batch_size: int) -> np.ndarray:
        return self.bytes_fixed + batch_size * self.bytes_per_sample

    @property
    def kernel_count(self) -> int:
        return int(self.kinds.size)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        for k in ("flops_fixed", "flops_per_sample", "bytes_fixed", "bytes_per_sample"):
            out[k] = [float(f"{v:.4g}") for v in np.asarray(out[k], dtype=float)]
        out["kinds"] = [int(v) for v in self.kinds]
        return out

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> WorkloadComplexity:
        arrays = {k: np.asarray(raw[k], dtype=float)
                  for k in ("flops_fixed", "flops_per_sample", "bytes_fixed", "bytes_per_sample")}
        return cls(workload=raw["workload"], dataset=raw["dataset"], batch_size=int(raw["batch_size"]),
                   dataset_size=int(raw["dataset_size"]), kinds=np.asarray(raw["kinds"], dtype=int),
                   data_cpu_s_per_sample=float(raw["data_cpu_s_per_sample"]),
                   decode_mpix_per_sample=float(raw["decode_mpix_per_sample"]),
                   sample_bytes=float(raw["sample_bytes"]), params=int(raw.get("params", 0)),
                   param_bytes=int(raw.get("param_bytes", 0)), host=str(raw.get("host", "")), **arrays)


def cached_workloads() -> list[str]:
    return sorted(p.stem for p in WORKLOADS_DIR.glob("*.json"))


def load_complexity(workload: str) -> WorkloadComplexity:
    """The cached complexity of a built-in workload (no torch needed)."""
    path = WORKLOADS_DIR / f"{workload}.json"
    if not path.is_file():
        raise UnknownWorkloadError(f"no cached complexity for workload {workload!r}; cached: "
                                   f"{', '.join(cached_workloads())}", "workload")
    return WorkloadComplexity.from_json(json.loads(path.read_text(encoding="utf-8")))


# ------------------------------------------------------------------ tracing (needs torch)

def _tensors(value: Any) -> list[Any]:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, list | tuple):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return []


def _trace_step(model: Any, loss_fn: Any, x: Any, y: Any) -> list[tuple[str, float, float, int, int]]:
    """(op name, FLOPs, bytes, kind, kernels) of every kernel-launching op in one training step."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry

    aten = torch.ops.aten
    dense = {aten.mm, aten.addmm, aten.bmm, aten.baddbmm}
    conv = {aten.convolution, aten._convolution, aten.convolution_backward}
    # Ops that only allocate or re-describe memory launch no kernel.
    no_kernel = {aten.detach, aten.empty, aten.empty_like, aten.empty_strided, aten._local_scalar_dense,
                 aten.lift_fresh, aten.set_, aten.alias}
    records: list[tuple[str, float, float, int, int]] = []

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: N802
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            packet = func.overloadpacket
            if func.is_view or packet in no_kernel:
                return out
            ins, outs = _tensors(args) + _tensors(kwargs), _tensors(out)
            seen: set[int] = set()
            nbytes = 0
            for t in ins + outs:
                key = t.untyped_storage().data_ptr() if t.numel() else id(t)
                if key not in seen:
                    seen.add(key)
                    nbytes += t.numel() * t.element_size()
            if packet in conv:
                # 2 x outputs x (C_in/groups x kh x kw) per pass; torch's formula ignores groups in the
                # backward pass, so count convolutions here: one pass per requested gradient.
                if packet is aten.convolution_backward:
                    grad_out, weight, groups = args[0], args[2], args[-2]
                    passes = sum(1 for m in args[-1][:2] if m)
                else:
                    grad_out, weight, groups, passes = outs[0], args[1], args[8], 1
                flops = 2.0 * grad_out.numel() * math.prod(weight.shape[1:]) * passes
                kind = KIND_DEPTHWISE if int(groups) > 1 else KIND_DENSE
            elif packet in dense:
                flops, kind = float(flop_registry[packet](*args, **kwargs, out_val=out)), KIND_DENSE
            else:
                kind, flops = KIND_MEMORY, float(sum(t.numel() for t in outs))
            kernels = 1
            if str(packet).startswith("aten._foreach"):
                n = len(_tensors(args[0]))
                kernels = max(1, math.ceil(n / FOREACH_TENSORS_PER_LAUNCH))
            elif packet is aten.convolution_backward:
                kernels = sum(1 for m in args[-1] if m)  # one kernel per requested gradient
            records.append((str(packet), flops, float(nbytes), kind, kernels))
            return out

    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, foreach=True)
    # One untraced step creates the momentum buffers, as on every step after the first.
    for traced in (False, True):
        optimizer.zero_grad(set_to_none=True)
        if traced:
            with Recorder():
                loss = loss_fn(model(x), y)
                loss.backward()
                optimizer.step()
        else:
            loss_fn(model(x), y).backward()
            optimizer.step()
    return records


def _expand(records: list[tuple[str, float, float, int, int]]) -> list[tuple[str, float, float, int]]:
    """One entry per kernel: an op launching k kernels becomes k kernels sharing its cost."""
    out = []
    for name, flops, nbytes, kind, k in records:
        out.extend([(name, flops / k, nbytes / k, kind)] * k)
    return out


def _trace_batch(spec: Any, n: int) -> tuple[Any, Any, Any]:
    """(inputs, targets, loss) of ``n`` samples for tracing one step.

    A workload that brings its own data and loss (a language model: token windows and next-token loss)
    is traced on its own samples; a classification workload on random inputs of its shape with
    cross-entropy over its classes.
    """
    import torch

    parts = spec.parts
    if parts is not None and (parts.dataset is not None or parts.batches is not None):
        if parts.dataset is not None:
            from torch.utils.data import default_collate

            x, y = default_collate([parts.dataset[i] for i in range(n)])[:2]
        else:
            batch = next(iter(parts.batches()))
            x, y = batch[0][:n], batch[1][:n]
        return x, y, parts.loss
    if spec.input_shape is None or spec.num_classes is None:
        raise InputError(f"workload {spec.name!r}: the twin needs an input shape and class count, or a "
                         "dataset (or batches) and loss from the factory", "workload")
    return torch.randn((n, *spec.input_shape)), torch.randint(0, spec.num_classes, (n,)), torch.nn.CrossEntropyLoss()


def measure_workload(name: str, samples: int = 48, seed: int = 0) -> WorkloadComplexity:
    """Trace one training step at two batch sizes and time the data pipeline, on the host CPU."""
    import torch
    from jetpredict.profiler.workloads import build_workload, resolve_workload, user_code_failed

    spec = resolve_workload(name)
    # Samples per epoch: the dataset's, else the factory's minibatches at the twin's batch size; a factory
    # that gives neither is an InputError here, before any tracing, never an empty (0 s, 0 J) epoch.
    samples_per_epoch = spec.dataset_size or spec.minibatches_per_epoch(BATCH_SIZE) * BATCH_SIZE
    traces = []
    for n in TRACE_BATCHES:
        torch.manual_seed(seed)
        model = spec.model_factory()
        model.train()
        try:
            x, y, loss_fn = _trace_batch(spec, n)
            traces.append(_expand(_trace_step(model, loss_fn, x, y)))
        except InputError:
            raise
        except Exception as exc:  # the user's model or data: name the workload and the step, not torch alone
            raise TraceFailed(user_code_failed(name, "tracing one training step", exc)) from exc
    a, b = traces
    if [r[0] for r in a] != [r[0] for r in b]:
        raise InputError(f"workload {name!r}: the kernel sequence depends on the batch size; cannot "
                         "separate fixed and per-sample costs", "workload")
    n1, n2 = TRACE_BATCHES
    fa, fb = np.array([r[1] for r in a]), np.array([r[1] for r in b])
    ba, bb = np.array([r[2] for r in a]), np.array([r[2] for r in b])
    f_ps = np.maximum((fb - fa) / (n2 - n1), 0.0)
    b_ps = np.maximum((bb - ba) / (n2 - n1), 0.0)

    built = build_workload(spec, batch_size=n2, num_workers=0, seed=seed)
    dataset = built.dataset
    if dataset is not None:
        samples = min(samples, len(dataset)) if hasattr(dataset, "__len__") else samples
        dataset[0]  # warm caches
        t0 = time.process_time()
        for i in range(samples):
            dataset[i]
        cpu_s = (time.process_time() - t0) / samples
    else:  # the factory yields ready batches: time drawing a few of them
        t0, drawn = time.process_time(), 0
        for k, batch in enumerate(spec.parts.batches()):  # type: ignore[union-attr]
            drawn += len(_tensors(batch)[0])
            if k >= 3:
                break
        cpu_s = (time.process_time() - t0) / max(drawn, 1)
    return WorkloadComplexity(
        workload=name, dataset=spec.dataset, batch_size=BATCH_SIZE, dataset_size=int(samples_per_epoch),
        flops_fixed=np.maximum(fa - n1 * f_ps, 0.0), flops_per_sample=f_ps,
        bytes_fixed=np.maximum(ba - n1 * b_ps, 0.0), bytes_per_sample=b_ps,
        kinds=np.array([r[3] for r in a], dtype=int), data_cpu_s_per_sample=cpu_s,
        decode_mpix_per_sample=DECODE_MPIX_PER_SAMPLE.get(spec.dataset, 0.0),
        sample_bytes=float(x[0].numel() * x[0].element_size()),
        params=sum(p.numel() for p in model.parameters() if p.requires_grad),
        param_bytes=sum(p.numel() * p.element_size() for p in model.parameters()),
        host=f"{platform.machine()} {platform.processor() or platform.system()}, torch {torch.__version__}")

"""Re-trace the built-in workloads' per-kernel costs on this host (build time) and print them beside the
digital twin's cached ones; ``--write`` rewrites the cache (``profiler/sim/data/workloads/``), only to add or
change a workload: the costs depend on the host, and every twin figure built on them moves.

    python -m tools.retrace_workloads [--workload NAME ...] [--write [--out-dir DIR]]
"""

from __future__ import annotations

import json
from pathlib import Path

from jetpredict.models.atomic_files import write_out_file
from jetpredict.models.errors import UnknownWorkloadError
from jetpredict.models.profiling_protocol import BATCH_SIZE
from jetpredict.profiler.builtin_workloads import BUILTIN_WORKLOADS
from jetpredict.profiler.sim import kernel_costs
from jetpredict.profiler.sim.kernel_costs import WORKLOADS_DIR, WorkloadComplexity, load_complexity


def _against_cache(wc: WorkloadComplexity) -> str:
    """How a re-trace differs from the cached costs of its workload (ratios new / cached)."""
    try:
        old = load_complexity(wc.workload)
    except UnknownWorkloadError:
        return "not cached before"
    ratios = {"GFLOP": (wc.kernel_flops(BATCH_SIZE).sum(), old.kernel_flops(BATCH_SIZE).sum()),
              "GB": (wc.kernel_bytes(BATCH_SIZE).sum(), old.kernel_bytes(BATCH_SIZE).sum()),
              "CPU per sample": (wc.data_cpu_s_per_sample, old.data_cpu_s_per_sample)}
    return "against the cache: " + ", ".join(f"{k} x{new / was:.3g}" for k, (new, was) in ratios.items())


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m tools.retrace_workloads",
        description="Re-trace the built-in workloads' per-kernel costs on this host and print them beside the "
                    "cached ones; nothing is written without --write.")
    parser.add_argument("--workload", action="append", choices=sorted(BUILTIN_WORKLOADS),
                        help="only this workload (repeatable; default: every built-in one)")
    parser.add_argument("--write", action="store_true",
                        help="rewrite the cached costs (not reproducible across hosts: every figure built on "
                             "them moves; see docs/digital-twin.md, Limits)")
    parser.add_argument("--out-dir", type=Path, default=WORKLOADS_DIR, help="where --write writes")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)  # per-sample CPU cost of one DataLoader worker = one core
    for name in args.workload or BUILTIN_WORKLOADS:
        wc = kernel_costs.measure_workload(name)
        print(f"{name}: {wc.kernel_count} kernels, {wc.kernel_flops(BATCH_SIZE).sum() / 1e9:.2f} GFLOP and "
              f"{wc.kernel_bytes(BATCH_SIZE).sum() / 1e9:.2f} GB per minibatch of {BATCH_SIZE}, "
              f"{wc.data_cpu_s_per_sample * 1e3:.3f} ms CPU per sample; {_against_cache(wc)}")
        if args.write:
            write_out_file(args.out_dir / f"{name}.json", (json.dumps(wc.to_json()) + "\n").encode("utf-8"))
    if not args.write:
        print(f"nothing written (--write rewrites {args.out_dir})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

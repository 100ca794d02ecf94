"""The profiling protocol's defaults, defined once: the profiler runs it (``jetpredict profile``) and the
planner estimates its duration per mode (``predictor.planning.profile_time_s``)."""

from __future__ import annotations

#: After a power-mode switch, clocks and the fan settle this long before anything is timed (s).
SETTLE_S = 5.0
#: Base power is averaged idle over this window after each switch when a meter is present (s).
IDLE_S = 3.0
#: Warm-up minibatches (cuDNN autotuning, the page cache), not timed.
WARMUP_MINIBATCHES = 10
#: Timed minibatches per mode.
MEASURED_MINIBATCHES = 40
#: The most warm-up or timed minibatches per mode: the raw sidecar keeps every one's timings, and a mode
#: is a sample of an epoch, not an epoch (a typo such as 4000000 is refused, not run for days).
MAX_MINIBATCHES_PER_MODE = 10_000
#: The longest settle or idle wait per mode (s): a wait is for clocks and the fan, not a pause.
MAX_WAIT_S = 600.0
#: Minibatch size a workload trains with unless ``--batch-size`` says otherwise.
BATCH_SIZE = 16
#: The largest relative standard error of a mode's ``epoch_time_s`` (its timed minibatches' mean, scaled to an
#: epoch) the profiler takes without a warning: about the predictor's smallest median time error on the real
#: sweeps from 4 profiled modes (1.7-4.4% over the three workloads and references, ``bench/results/real_cv.md``),
#: so the measurement's own spread does not swamp the model's.
NOISY_EPOCH_TIME_REL_SE = 0.02

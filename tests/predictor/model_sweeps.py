"""Stand-in sweeps shared by the few-shot model's tests (``test_model.py``, ``test_model_contract.py``,
``test_total_only_split.py``): AGX Xavier's published rows, a synthetic workload's rows on named modes (times
in s, power in W, energy in J), and those modes as knob arrays (MHz)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from jetpredict.models.catalogue import ModeArrays
from jetpredict.models.profile_files import read_profile_csv
from jetpredict.predictor.model import Prediction, WorkloadModel
from jetpredict.predictor.reference import REFERENCE_DIR

#: AGX Xavier's published sweeps (the bundled reference's rows).
REF = read_profile_csv(REFERENCE_DIR / "agx-xavier-published.csv")
#: The stand-in sweeps' modes by name: (cores, CPU MHz, GPU MHz, EMC MHz).
MODES = {"a": (4, 1200, 670, 1333), "b": (8, 1200, 670, 1333), "c": (8, 1200, 900, 1333),
         "d": (8, 1200, 900, 1600), "e": (8, 2100, 900, 1600), "f": (2, 2100, 900, 1600),
         "g": (8, 2265, 1377, 2133), "h": (8, 2265, 1377, 1066), "i": (8, 2265, 1377, 1333),
         "j": (8, 2265, 1377, 1600), "low": (8, 1036.8, 420.75, 1600), "low2": (4, 960, 420.75, 1331.2)}


def fv2(f, f_max):
    """Dynamic power f V^2 relative to the top clock, V rising as a power law (not the model's curve)."""
    r = f / f_max
    return r * (0.55 + 0.45 * r ** 1.5) ** 2


def sweep(cpu_ms: float, gpu_ms: float, modes, workload="w", power=True, components=True, stall_ms=1.0,
          contention=(0.8, 1.0)) -> pd.DataFrame:
    """Rows of a workload whose minibatch is CPU launch work + GPU work + data-pipeline stall (ms at the
    top clocks); ``contention``: how much the launch and stall work slow down on fewer cores than threads."""
    rows = []
    for m in modes:
        c, cpu, gpu, emc = MODES[m]
        launch = cpu_ms * 2265.6 / cpu * (1 + contention[0] * max(0, 5 - c) / c)
        kernels = gpu_ms * 1377 / gpu + 0.2 * gpu_ms * 2133 / emc
        stall = stall_ms * 2265.6 / cpu * (1 + contention[1] * max(0, 5 - c) / c)
        t = 1000 * (launch + kernels + stall + 0.3) / 1e3
        base = 3.5 + 2.5 * fv2(emc, 2133) + 0.8 * fv2(gpu, 1377) + 0.5 * c / 8 * fv2(cpu, 2265.6)
        busy = kernels / (launch + kernels + stall)
        p = base + 10 * busy * fv2(gpu, 1377) + 3 * busy * fv2(emc, 2133) + 1.2 * min(c, 5) * fv2(cpu, 2265.6)
        rows.append(dict(device="agx-xavier", workload=workload, mode=m, cpu_cores=c, cpu_mhz=cpu, gpu_mhz=gpu,
                         emc_mhz=emc, num_workers=4, batch_size=16, minibatches_per_epoch=1000, epoch_time_s=t,
                         stall_time_s=stall if components else np.nan,
                         compute_time_s=(launch + kernels) if components else np.nan,
                         avg_power_w=p if power else np.nan, epoch_energy_j=p * t if power else np.nan,
                         base_power_w=base if power else np.nan, source="simulated: test"))
    return pd.DataFrame(rows)


def knobs(modes) -> ModeArrays:
    k = np.array([MODES[m] for m in modes], dtype=float)
    return ModeArrays(k[:, 0], k[:, 1], k[:, 2], k[:, 3])


def predict_modes(model: WorkloadModel, modes, confidence: float = 0.9) -> Prediction:
    return model.predict(knobs(modes), confidence)

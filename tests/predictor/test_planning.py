"""D-optimal choice of the modes to profile, and the profiling-time estimate."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from jetpredict.models.catalogue import MODE_FIELDS, ModeArrays, load_device
from jetpredict.models.errors import InputError
from jetpredict.predictor import features as F
from jetpredict.predictor import planning
from jetpredict.predictor.bundled import load_reference


def _random_design(seed: int, n: int = 14, p: int = 4) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.column_stack([np.ones(n), rng.uniform(0, 1, (n, p - 1))])


@pytest.mark.parametrize("seed", range(4))
def test_d_optimal_is_near_the_exhaustive_optimum(seed):
    x = _random_design(seed)
    chosen = planning.d_optimal(x, 4)
    assert len(set(chosen)) == 4
    best = max(planning.log_det(x, list(c)) for c in itertools.combinations(range(len(x)), 4))
    # Greedy + exchange is a local search: within a few percent of det, usually exact.
    assert planning.log_det(x, chosen) >= best - 0.1


@pytest.mark.parametrize("seed", range(3))
def test_no_single_swap_improves_the_design(seed):
    x = _random_design(seed, n=30, p=5)
    chosen = planning.d_optimal(x, 5)
    score = planning.log_det(x, chosen)
    for slot, cand in itertools.product(range(5), range(len(x))):
        if cand in chosen:
            continue
        trial = list(chosen)
        trial[slot] = cand
        assert planning.log_det(x, trial) <= score + 1e-9


def test_d_optimal_beats_random_choices():
    x = _random_design(7, n=200, p=5)
    chosen = planning.d_optimal(x, 4)
    rng = np.random.default_rng(0)
    random_scores = [planning.log_det(x, rng.choice(200, 4, replace=False)) for _ in range(200)]
    assert planning.log_det(x, chosen) > max(random_scores)


@pytest.mark.parametrize("budget", [0, -2, 15])
def test_budget_out_of_range(budget):
    with pytest.raises(InputError) as err:
        planning.d_optimal(_random_design(0), budget)
    assert err.value.field == "budget"


def test_design_uses_the_models_time_terms_scaled():
    modes = ModeArrays([2, 8, 8], [1000.0, 2000.0, 2000.0], [500.0, 500.0, 500.0], [1000.0, 2000.0, 1500.0])
    x = planning.design_matrix(modes, kappa_cpu=0.5, kappa_pipe=1.0, num_workers=4)
    cols = dict(zip((*F.TOTAL_TERMS, *planning.PLANNING_EXTRA_TERMS), x.T, strict=True))
    assert cols["one"].tolist() == [1, 1, 1]
    assert not cols["gpu"].any()  # GPU clock never varies: no information
    inv_emc = 1 / F.effective_emc_mhz(modes.emc_mhz)  # the memory clock left to the workload
    assert cols["emc"][2] == pytest.approx((inv_emc[2] - inv_emc[1]) / (inv_emc[0] - inv_emc[1]))
    # 2 cores at 1 GHz with 4 workers: the most contended, slowest CPU term -> 1; 8 cores at 2 GHz -> 0.
    assert cols["cpu"].tolist() == [1, 0, 0] and cols["pipe"].tolist() == [1, 0, 0]
    # CPU-side memory work (contention / f_emc): the contended 2-core mode at the slow memory clock is the
    # largest; the two 8-core modes differ by their memory clock alone.
    assert cols["cpu_emc"][0] == pytest.approx(1.0) and cols["cpu_emc"][1] == pytest.approx(0.0)
    cpu_emc = F.contention(modes.cpu_cores, 4, 0.5) * inv_emc  # on the memory clock left, as the model's terms
    assert cols["cpu_emc"][2] == pytest.approx((cpu_emc[2] - cpu_emc[1]) / (cpu_emc[0] - cpu_emc[1]))


def test_agx_plan_moves_every_knob_independently():
    ref = load_reference(load_device("agx-xavier"))
    a = load_device("agx-xavier").modes().arrays().columns()
    x = planning.design_matrix(ModeArrays.from_frame(a), ref.kappa_cpu, ref.kappa_pipe)
    chosen = planning.d_optimal(x, 4)
    picked = np.column_stack([1.0 / a[k][chosen] for k in ("cpu_mhz", "gpu_mhz", "emc_mhz")])
    for j in range(picked.shape[1]):
        assert len(set(picked[:, j])) >= 2, "each clock must take at least two levels"
    # No two clocks move in lockstep (the seed's confounding of CPU and GPU clock).
    corr = np.corrcoef(picked.T)
    assert np.all(np.abs(corr[np.triu_indices(3, 1)]) < 0.99)


def test_profile_time_counts_settle_idle_and_minibatches():
    t = planning.profile_time_s(np.array([0.1, 1.0]), settle_s=5, idle_window_s=5, warmup=10, minibatches=40)
    assert t.tolist() == pytest.approx([15.0, 60.0])


def _grid(n_per_knob: int = 3) -> np.ndarray:
    levels = [np.arange(1, n_per_knob + 1, dtype=float) * k for k in (1.0, 100.0, 50.0, 300.0)]
    return np.array(list(itertools.product(*levels)))


def test_identifying_exchange_varies_every_knob_and_keeps_the_best_such_design():
    knobs = _grid()
    # A design matrix that ignores the last knob entirely: D-optimality alone never varies it.
    x = np.column_stack([np.ones(len(knobs)), knobs[:, 0] / 3, knobs[:, 1] / 300, knobs[:, 2] / 150])
    start = planning.d_optimal(x, 4)
    chosen = planning.identifying_exchange(x, knobs, start)
    assert planning.varying_knobs(knobs, chosen).all()
    assert len(set(chosen)) == 4
    # Among designs that vary every knob, no single exchange does better.
    score = planning.log_det(x, chosen)
    for slot, cand in itertools.product(range(4), range(len(x))):
        trial = list(chosen)
        trial[slot] = cand
        if cand not in chosen and planning.varying_knobs(knobs, trial).all():
            assert planning.log_det(x, trial) <= score + 1e-9


def test_identifying_exchange_leaves_what_cannot_vary():
    knobs = _grid()
    knobs[:, 3] = 800.0  # one memory clock among the candidates
    x = np.column_stack([np.ones(len(knobs)), knobs[:, 0] / 3])
    chosen = planning.identifying_exchange(x, knobs, [0, 1])
    assert planning.varying_knobs(knobs, chosen).tolist()[3] is False
    assert planning.identifying_exchange(x, knobs, [5]) == [5]  # one mode cannot vary anything


@pytest.mark.parametrize("device_id", ["agx-xavier", "xavier-nx", "nano", "orin-agx", "orin-nx", "orin-nano"])
def test_planning_region_offers_two_values_of_every_knob(device_id):
    device = load_device(device_id)
    a = device.modes().arrays().columns()
    region = planning.operating_region(device, a["cpu_cores"], a["cpu_mhz"], a["gpu_mhz"], a["emc_mhz"])
    top = F.device_maxima(device)
    for knob in ("cpu_cores", "cpu_mhz", "gpu_mhz", "emc_mhz"):
        values = np.unique(a[knob][region])
        assert len(values) >= 2, knob
        if knob != "cpu_cores":  # every clock's floor is half its maximum or the second-highest step
            assert values.min() >= min(planning.MIN_CLOCK_SHARE * top[knob], np.unique(a[knob])[-2])


def test_core_contrast_is_repaired_without_losing_varied_knobs():
    knobs = _grid()
    # Only clocks in the design: D-optimality never asks for two modes that differ in cores alone.
    x = np.column_stack([np.ones(len(knobs)), knobs[:, 1] / 300, knobs[:, 2] / 150, knobs[:, 3] / 900])
    chosen = planning.identifying_exchange(x, knobs, planning.d_optimal(x, 4), core_contrast=True)
    assert planning.core_contrasts(knobs, chosen)
    assert planning.varying_knobs(knobs, chosen).all()
    assert not planning.core_contrasts(knobs, [0, 1])  # 1c vs 1c at other GPU clocks: no contrast


def test_no_contrast_asked_when_the_candidates_cannot_give_one():
    knobs = _grid()
    knobs[:, 0] = np.arange(len(knobs)) % 2 + 1  # cores tied to the clock setting: never a pure contrast
    knobs[:, 1] = np.arange(len(knobs)) * 10.0
    assert not planning.contrast_possible(knobs, 4)
    assert not planning.contrast_possible(_grid(), 1)  # one mode cannot contrast anything


@pytest.mark.parametrize("device_id", ["agx-xavier", "xavier-nx", "nano", "orin-agx", "orin-nx", "orin-nano"])
def test_default_plan_identifies_the_cpu_side(device_id):
    from jetpredict.predictor import service

    planned = service.plan_profiling(device_id, 4)
    modes = planned.modes
    for knob in ("cpu_cores", "cpu_mhz", "emc_mhz"):
        assert modes[knob].nunique() >= 2, knob
    # Most cores first among tied candidates: the plan profiles the device's top core count, so the many-core
    # modes people run lie inside the profiled range (fewest first, AGX Xavier's plan took 5 cores and 43% of
    # the candidates extrapolated on cpu_cores).
    assert modes["cpu_cores"].max() == load_device(device_id).modes().arrays().cpu_cores.max()
    assert "cpu_cores" not in planned.extrapolated
    # A core contrast at one clock setting: two modes whose CPU, GPU and memory clocks are all equal.
    same_clocks = modes.groupby(["cpu_mhz", "gpu_mhz", "emc_mhz"])["cpu_cores"].nunique()
    assert (same_clocks >= 2).any(), modes
    # ... and the memory clock moves at one CPU clock and core count, so its effect on CPU-side work is
    # not aliased with the CPU clock's.
    knobs = modes[["cpu_cores", "cpu_mhz", "gpu_mhz", "emc_mhz"]].to_numpy(dtype=float)
    assert not np.allclose(np.corrcoef(1 / knobs[:, 1], 1 / knobs[:, 3])[0, 1] ** 2, 1.0)


@pytest.mark.parametrize("device_id, preset", [("agx-xavier", "MODE_10W"), ("orin-agx", "MODE_15W"),
                                               ("orin-nano", "7W")])
def test_a_gated_preset_among_the_candidates_is_planned_with_its_part_of_the_gpu(device_id, preset):
    # Planned as the whole GPU at its clock, MODE_10W's profiling took 34.6 s where fit and predict, which
    # read the label as gated, give 48.1 s.
    device = load_device(device_id)
    candidates = pd.DataFrame([p.listing() for p in device.presets])
    planned = planning.plan(device, candidates, len(candidates))
    row = planned.modes.set_index("mode").loc[preset]
    alone = candidates[candidates["mode"] == preset]
    gated, whole = device.labelled_modes(alone), ModeArrays.from_frame(alone)
    assert gated.gpu_share[0] < 1.0
    seconds = [planning.profile_time_s(planning.minibatch_time_s(device, m))[0] for m in (gated, whole)]
    assert row["est_profile_s"] == pytest.approx(seconds[0]) and seconds[0] > 1.1 * seconds[1]


def test_a_one_mode_plan_counts_the_candidates_above_and_below_the_profiled_mode_as_extrapolated():
    """One profiled mode leaves every other value of each knob outside its range. The plan's share per knob
    is that of the candidates above it or below it, counted here from the planning region itself (AGX
    Xavier: cores 86%, CPU 93%, GPU 86%, EMC 75% of 2,940; counting only modes below the range, it said
    every knob of the candidates lies inside the profiled ranges)."""
    from jetpredict.predictor import service

    device = load_device("agx-xavier")
    planned = service.plan_profiling(device, 1)
    every = pd.DataFrame(device.modes().arrays().columns())
    region = planning.operating_region(device, *(every[k].to_numpy() for k in MODE_FIELDS))
    candidates = every[region].drop_duplicates(subset=list(MODE_FIELDS))
    assert planned.candidates == len(candidates) and len(planned.modes) == 1
    profiled = planned.modes.iloc[0]
    above = {k: float((candidates[k] > profiled[k]).mean()) for k in MODE_FIELDS}
    below = {k: float((candidates[k] < profiled[k]).mean()) for k in MODE_FIELDS}
    assert all(share > 0 for share in above.values())  # the region reaches above the profiled mode on every knob
    assert planned.extrapolated == pytest.approx({k: above[k] + below[k] for k in MODE_FIELDS})
    assert "every knob of the" not in planned.summary()

"""The regime evidence's core contrast: pairs of modes that differ in cores only, rows merged per mode."""

import numpy as np
from jetpredict.models.catalogue import ModeArrays
from jetpredict.predictor.regime import core_contrast


def test_core_contrast_pairs_modes_within_a_clock_setting_only():
    # Setting A (2265.6/1377/2133) at 2, 4 and 8 cores, 4 cores measured twice; setting B at 8 cores only;
    # setting C (EMC 1600) at 2 and 8 cores.
    cores = np.array([2, 4, 4, 8, 8, 2, 8], dtype=float)
    emc = np.array([2133, 2133, 2133, 2133, 1331.2, 1600, 1600], dtype=float)
    gpu = np.array([1377, 1377, 1377, 1377, 1377, 1377, 1377], dtype=float)
    cpu = np.full(7, 2265.6)
    ln_t = np.array([3.0, 2.4, 2.6, 2.0, 9.0, 4.0, 3.5])
    # A: (2,4) 3.0-2.5, (2,8) 3.0-2.0, (4,8) 2.5-2.0; C: (2,8) 4.0-3.5; B pairs with nothing.
    expected = np.mean([0.5, 1.0, 0.5, 0.5])
    got = core_contrast(ModeArrays(cores, cpu, gpu, emc), ln_t)
    assert got is not None and abs(got - expected) < 1e-12
    # The row order does not matter.
    order = np.array([6, 3, 0, 4, 2, 5, 1])
    shuffled = ModeArrays(cores[order], cpu[order], gpu[order], emc[order])
    assert abs(core_contrast(shuffled, ln_t[order]) - expected) < 1e-12


def test_core_contrast_is_none_without_a_cores_only_pair():
    modes = ModeArrays(np.array([8.0, 8.0, 4.0]), np.array([2265.6, 2265.6, 1190.4]),
                       np.array([1377.0, 905.25, 1377.0]), np.array([2133.0, 2133.0, 2133.0]))
    assert core_contrast(modes, np.array([1.0, 2.0, 3.0])) is None
    one = ModeArrays(np.array([8.0, 8.0]), np.array([2265.6] * 2), np.array([1377.0] * 2), np.array([2133.0] * 2))
    assert core_contrast(one, np.array([1.0, 1.2])) is None  # one mode measured twice is no pair

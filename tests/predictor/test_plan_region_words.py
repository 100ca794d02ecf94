"""``plan``'s words for its default candidates say what :func:`predictor.planning.operating_region` does: a
knob whose top value alone reaches its floor keeps its next value down (Orin Nano's EMC: 665.6 MHz, 31% of
2133, is planned over), so "every clock >= 50% of its maximum" alone is not the region."""

from __future__ import annotations

import numpy as np
import pytest
from jetpredict.models.catalogue import load_device
from jetpredict.predictor.limits import MIN_CLOCK_SHARE
from jetpredict.predictor.planning import operating_region

from jetpredict.cli import main

CLAUSE = "a knob whose top value alone passes keeps its next value down"


def test_the_lowered_floor_is_real_on_orin_nano():
    device = load_device("orin-nano")
    a = device.modes().arrays()
    region = a.emc_mhz[operating_region(device, a.cpu_cores, a.cpu_mhz, a.gpu_mhz, a.emc_mhz)]
    assert set(np.unique(region)) == {665.6, 2133.0} and MIN_CLOCK_SHARE * 2133.0 > 665.6


def test_plan_help_and_message_state_the_lowered_floor(capsys):
    with pytest.raises(SystemExit):
        main(["plan", "--help"])
    assert CLAUSE in " ".join(capsys.readouterr().out.split())
    assert main(["plan", "--device", "orin-nano", "--budget", "4", "--format", "csv"]) == 0
    assert CLAUSE in " ".join(capsys.readouterr().err.split())

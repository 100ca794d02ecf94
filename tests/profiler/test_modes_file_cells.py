"""``profile --modes FILE``: a knob cell that holds no number is named with what it holds (or as empty)."""

from __future__ import annotations

import pytest
from jetpredict.models.catalogue import load_device
from jetpredict.models.errors import InputError
from jetpredict.profiler.mode_lists import modes_to_profile

HEADER = "mode,cpu_cores,cpu_mhz,gpu_mhz,emc_mhz\n"


@pytest.mark.parametrize(("cell", "rule"), [("N/A", "gpu_mhz must be a number, got 'N/A'"),
                                            ("fast", "gpu_mhz must be a number, got 'fast'"),
                                            ("", "gpu_mhz is required and empty")])
def test_a_knob_that_holds_no_number_is_named_with_its_cell(tmp_path, cell, rule):
    f = tmp_path / "modes.csv"
    f.write_text(HEADER + "a,4,1190.4,675.75,1600\nb,4,1190.4," + cell + ",1600\n")
    with pytest.raises(InputError) as err:
        modes_to_profile(load_device("agx-xavier"), str(f))
    assert err.value.field == "gpu_mhz"
    assert err.value.message == f"--modes {f} line 3: {rule}"

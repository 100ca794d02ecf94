"""The shared input checks name the field and the rule, and load no pandas (the Flower planners and the
command line check values with them before any prediction)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from jetpredict.models.errors import InputError
from jetpredict.predictor import checks
from jetpredict.predictor.limits import MAX_EPOCHS


def test_the_checks_load_no_pandas():
    code = "import sys, jetpredict.predictor.checks; print('pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(("check", "value", "field"), [
    (checks.check_objective, "fastest", "objective"),
    (lambda v: checks.check_limit(v, "max_power_w"), -3, "max_power_w"),
    (lambda v: checks.check_limit(v, "max_epoch_time_s"), float("nan"), "max_epoch_time_s"),
    (lambda v: checks.check_limit(v, "max_power_w"), "many", "max_power_w"),
    (lambda v: checks.check_limit(v, "max_power_w"), True, "max_power_w"),
    (checks.check_confidence, 0.4, "confidence"),
    (checks.check_confidence, 90, "confidence"),
    (checks.check_confidence, "high", "confidence"),
])
def test_bad_limits_name_the_field(check, value, field):
    with pytest.raises(InputError) as err:
        check(value)
    assert err.value.field == field


@pytest.mark.parametrize("epochs", [0, -1, 2.5, True])
def test_bad_epochs(epochs):
    with pytest.raises(InputError, match="epochs"):
        checks.check_epochs(epochs)


def test_epochs_take_the_limit_itself_and_refuse_one_more_naming_epochs():
    assert checks.check_epochs(MAX_EPOCHS) == MAX_EPOCHS
    assert checks.check_epochs(np.int64(MAX_EPOCHS)) == MAX_EPOCHS
    for over in (MAX_EPOCHS + 1, np.int64(MAX_EPOCHS + 1)):
        with pytest.raises(InputError, match=f"epochs must be a whole number from 1 to {MAX_EPOCHS}") as err:
            checks.check_epochs(over)
        assert err.value.field == "epochs"

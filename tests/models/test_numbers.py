"""The one check of a number a caller gives: the field and the rule in every refusal."""

from __future__ import annotations

import math

import pytest
from jetpredict.models.errors import InputError
from jetpredict.models.numbers import checked_number


@pytest.mark.parametrize("value", [True, "fast", None, math.nan, math.inf, -1.0, 10**400, -(10**400)])
def test_a_refused_number_names_the_field_and_the_rule(value):
    with pytest.raises(InputError) as err:
        checked_number(value, "deadline_s", high=1e6)
    assert err.value.field == "deadline_s" and "between 0 and 1e+06" in err.value.message
    assert len(err.value.message) < 120


def test_an_accepted_number_comes_back_as_a_float():
    assert checked_number("12.5", "deadline_s") == 12.5 and checked_number(3, "x", low=3, low_inclusive=True) == 3.0

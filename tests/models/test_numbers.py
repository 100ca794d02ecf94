"""The one check of a number a caller gives: the field and the rule in every refusal; the readers of a
cell or a JSON number as a finite float."""

from __future__ import annotations

import math

import numpy as np
import pytest
from jetpredict.models.errors import InputError
from jetpredict.models.numbers import checked_number, finite_or_none, json_finite_float, number_or_nan


@pytest.mark.parametrize("value", [True, "fast", None, math.nan, math.inf, -1.0, 10**400, -(10**400)])
def test_a_refused_number_names_the_field_and_the_rule(value):
    with pytest.raises(InputError) as err:
        checked_number(value, "deadline_s", high=1e6)
    assert err.value.field == "deadline_s" and "between 0 and 1e+06" in err.value.message
    assert len(err.value.message) < 120


def test_an_accepted_number_comes_back_as_a_float():
    assert checked_number("12.5", "deadline_s") == 12.5 and checked_number(3, "x", low=3, low_inclusive=True) == 3.0


@pytest.mark.parametrize("value", [None, "fast", math.nan, -math.inf, 10**400, -(10**400)])
def test_a_cell_that_is_no_finite_number_reads_as_none(value):
    assert finite_or_none(value) is None and json_finite_float(value) is None


def test_a_json_number_is_a_number_not_a_bool_or_text():
    assert [finite_or_none(v) for v in (True, "2.5", 3)] == [1.0, 2.5, 3.0]
    assert [json_finite_float(v) for v in (True, "2.5", 3, 2.5)] == [None, None, 3.0, 2.5]


@pytest.mark.parametrize("value", [math.inf, 0, 0.0, -0.0])
def test_the_default_rule_is_a_finite_number_above_0(value):
    with pytest.raises(InputError, match=r"^f must be a finite number > 0, got "):
        checked_number(value, "f")


@pytest.mark.parametrize("value", [True, np.bool_(False), None, "x"])
def test_a_cell_that_holds_no_number_a_boolean_included_reads_as_nan(value):
    assert math.isnan(number_or_nan(value))


def test_a_cell_that_holds_a_number_reads_as_it():
    assert number_or_nan("2.5") == 2.5 and number_or_nan(3) == 3.0

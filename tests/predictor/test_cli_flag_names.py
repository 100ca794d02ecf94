"""The predictor's command line names the flag a person typed (``--max-power-w``), not the field the checks it
shares with the HTTP service name (``max_power_w``); and its answers say only what they are."""

from __future__ import annotations

import errno

import numpy as np
import pytest
from jetpredict.models.errors import InputError, ModeRowError, flag_named
from jetpredict.predictor import service
from jetpredict.predictor.bundled import load_model
from jetpredict.predictor.cli import out_error, widening_words

from jetpredict.cli import main

RECOMMEND = ["recommend", "--objective", "min-time"]


@pytest.mark.parametrize(("argv", "said"), [
    ([*RECOMMEND, "--max-power-w", "0"], "--max-power-w must be a finite number > 0, got 0.0"),
    ([*RECOMMEND, "--max-epoch-time-s", "-1"], "--max-epoch-time-s must be a finite number > 0, got -1.0"),
    ([*RECOMMEND, "--epochs", "0"], "--epochs must be a whole number from 1 to"),
    ([*RECOMMEND, "--confidence", "90"], "--confidence must be between 0.5 and 0.999 (e.g. 0.9 for 90%), got 90.0"),
    ([*RECOMMEND, "--max-power-w", "15000"], "--max-power-w 15000 W is above what a Jetson AGX Xavier"),
    (["predict", "--all", "--epochs", "0"], "--epochs must be a whole number from 1 to"),
    (["predict", "--presets", "--confidence", "2"], "--confidence must be between 0.5 and 0.999"),
])
def test_a_refused_flag_value_is_named_by_its_flag(work, capsys, argv, said):
    argv = [argv[0], "--model", str(work / "resnet.json"), *argv[1:]]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"jetpredict {argv[0]}: error: {said}" in err, err


@pytest.mark.parametrize(("flag", "value", "said"), [
    ("--max-power-w", "0", "--max-power-w must be a finite number > 0"),
    ("--confidence", "90", "--confidence must be between 0.5 and 0.999"),
    ("--max-epoch-time-s", "0", "--max-epoch-time-s must be a finite number > 0"),
])
def test_plan_after_names_the_flag_too(work, capsys, flag, value, said):
    assert main(["plan", "--device", "agx-xavier", "--after", str(work / "resnet.csv"), flag, value]) == 2
    assert f"jetpredict plan: error: {said}" in capsys.readouterr().err


def test_the_service_keeps_naming_its_fields(work):
    """The HTTP service's answers key errors by JSON field: the checks themselves are unchanged."""
    model = load_model(work / "resnet.json")
    with pytest.raises(InputError) as caught:
        service.recommend(model, "min-time", max_power_w=15000.0)
    assert caught.value.field == "max_power_w" and caught.value.message.startswith("max_power_w=15000 W is above")
    with pytest.raises(InputError) as caught:
        service.recommend(model, "min-time", epochs=0)
    assert caught.value.message.startswith("epochs must be")


def test_flag_named_renames_only_a_leading_field_it_is_given():
    err = InputError("max_power_w must be a finite number > 0, got 0.0", "max_power_w")
    named = flag_named(err, {"max_power_w", "epochs"})
    assert named.message == str(named) == "--max-power-w must be a finite number > 0, got 0.0"
    assert type(named) is InputError and named.field == "max_power_w"
    assert err.message.startswith("max_power_w")  # the original is left as it was
    cap = flag_named(InputError("max_power_w=15000 W is above 60 W", "max_power_w"), {"max_power_w"})
    assert cap.message == "--max-power-w 15000 W is above 60 W"
    # a field the command line has no flag for, a message that does not start with it: as it was
    other = InputError("max_power_w must be > 0", "max_power_w")
    assert flag_named(other, {"epochs"}) is other
    inner = InputError("unknown device 'foo'", "device")
    assert flag_named(inner, {"device"}) is inner
    row = ModeRowError(3, ": cpu_cores must be >= 1", "cpu_cores")
    assert flag_named(row, {"cpu_cores"}) is row


def test_recommend_table_without_a_feasible_mode_says_only_the_error(work, capsys):
    assert main([*RECOMMEND, "--model", str(work / "resnet.json"), "--max-epoch-time-s", "1"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and "no mode meets max_epoch_time_s=1" in captured.err


def test_widening_words_say_wider_only_where_the_median_is():
    assert widening_words(np.array([1.2, 1.3, 1.5])) == ("wider (time intervals 1.30x as wide as inside them, "
                                                         "median; up to 1.50x)")
    # Most no wider: the median is 1.00x, a few reach 1.04x.
    assert widening_words(np.array([1.0, 1.0, 1.001, 1.04])) == (
        "mostly no wider (time intervals 1.00x as wide as inside them, median; up to 1.04x)")
    assert widening_words(np.array([1.0, 1.001])) == "no wider (time intervals at most 1.00x as wide as inside them)"


def test_plan_after_min_energy_says_the_picks_energy(work, capsys):
    assert main(["plan", "--device", "agx-xavier", "--after", str(work / "resnet.csv"),
                 "--objective", "min-energy"]) == 0
    err = capsys.readouterr().err
    pick = err.split("min-energy: recommended ")[1].split(";")[0]
    assert " J/epoch, " in pick and " s/epoch (time interval" in pick, pick
    assert main(["plan", "--device", "agx-xavier", "--after", str(work / "resnet.csv")]) == 0
    pick = capsys.readouterr().err.split("min-time: recommended ")[1].split(";")[0]
    assert " s/epoch (" in pick and "J/epoch" not in pick, pick


@pytest.mark.parametrize(("exc", "kind"), [
    (OSError(errno.EIO, "Write out of bounds."), OSError),  # a library's own sentence, with its full stop
    (OSError("buffer out of bounds."), OSError),
    (OSError(errno.ENOENT, "No such file or directory"), InputError),
])
def test_an_out_error_joins_its_reason_without_doubled_stops(exc, kind):
    raised = out_error("a.png", exc, "plot")
    assert type(raised) is kind and ".;" not in str(raised), raised
    assert str(raised).startswith("cannot write --plot a.png: ") and str(raised).endswith(
        "; any previous file is unchanged")

"""``--help`` of the verbs defined in jetpredict/cli.py, profiler/cli.py and profiler/status.py: every flag says
what it takes, and a default that comes from the predictor is stated as its number."""

from __future__ import annotations

import argparse

import pytest
from jetpredict.predictor.limits import DEFAULT_CONFIDENCE

from jetpredict.cli import build_parser

#: The verbs those modules register, and the predictor's (predictor/cli.py).
VERBS = ("devices", "status", "restore", "profile", "plan", "fit", "predict", "recommend")


def _verb(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def _help_of(verb: str, flag: str) -> str:
    """The flag's help as --help prints it (its %-fields filled), on one line."""
    parser = _verb(verb)
    action = next(a for a in parser._actions if flag in a.option_strings)
    return " ".join(parser._get_formatter()._expand_help(action).split())


@pytest.mark.parametrize("verb", VERBS)
def test_every_flag_has_help(verb):
    bare = [a.option_strings[0] for a in _verb(verb)._actions if a.option_strings and not a.help]
    assert bare == [], f"{verb}: {bare} have no help"


@pytest.mark.parametrize("verb", ["devices", "status"])
def test_format_says_its_choices_and_default(verb):
    said = _help_of(verb, "--format")
    assert "(default table)" in said and "json" in said


def test_profile_confidence_states_the_predictors_number():
    """It said '(default: the predictor's)', with no number."""
    assert f"default {DEFAULT_CONFIDENCE:g}" in _help_of("profile", "--confidence")


def test_profile_target_width_states_the_predictors_number():
    """It said '(default: the predictor's)', with no number."""
    from jetpredict.predictor.limits import DEFAULT_TARGET_WIDTH_REL

    assert f"(default {DEFAULT_TARGET_WIDTH_REL:g})" in _help_of("profile", "--target-width")


def test_a_broken_device_file_stops_every_verb_in_one_line(tmp_path):
    """The catalogue is read while the parser is built (the service's settings name the devices), so a broken
    ``models/devices/*.toml`` stopped even ``--help`` with a traceback; now one line naming the file, exit 2."""
    import shutil
    import subprocess
    import sys

    from jetpredict.models import catalogue

    folder = tmp_path / "devices"
    shutil.copytree(catalogue.DEVICES_DIR, folder)
    nano = folder / "nano.toml"
    nano.write_text(nano.read_text().replace("cuda_cores", "cuda_cores_typo", 1))
    code = ("import sys; from jetpredict.models import catalogue; catalogue.DEVICES_DIR = __import__('pathlib')"
            f".Path({str(folder)!r}); from jetpredict.cli import main; sys.exit(main(sys.argv[1:]))")
    for argv in (["--help"], ["devices"]):
        done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120)
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1
        assert done.stderr.startswith("jetpredict: error: device file ") and "nano.toml" in done.stderr

"""``--help`` of the verbs defined in jetpredict/cli.py, profiler/cli.py and profiler/status.py: every flag says
what it takes, and a default that comes from the predictor is stated as its number."""

from __future__ import annotations

import argparse

import pytest
from jetpredict.predictor.limits import DEFAULT_CONFIDENCE

from jetpredict.cli import build_parser

#: The verbs those modules register.
VERBS = ("devices", "status", "restore", "profile")


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

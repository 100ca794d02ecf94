"""A line said while a progress bar is drawn (an adaptive round's line, a noisy mode's warning) starts a line of
its own on standard error, also in a log file, where tqdm's bar leaves no newline before it."""

from __future__ import annotations

import sys

import pytest
from jetpredict.models.errors import say, say_above_bars

tqdm = pytest.importorskip("tqdm").tqdm


@pytest.mark.parametrize("speak, own_line", [(say, False), (say_above_bars, True)])
def test_a_line_said_under_a_bar_starts_its_own_line(capsys, speak, own_line):
    bar = tqdm(total=10, file=sys.stderr, dynamic_ncols=True, leave=True)
    bar.update(3)
    bar.refresh()
    speak("adaptive: after 2 mode(s)")
    bar.close()
    err = capsys.readouterr().err
    before = err[:err.index("adaptive: after 2 mode(s)")]
    # Said plainly, the line is glued to the bar's last drawing ("... 3/10 [...]adaptive: ..."): that is the defect.
    assert before.endswith(("\r", "\n")) == own_line, repr(before[-40:])


def test_without_a_bar_it_is_a_plain_line(capsys):
    say_above_bars("a noisy mode")
    assert capsys.readouterr().err == "a noisy mode\n"

"""The README's HTTP API tour, run as a new user would (:mod:`readme_tours`): its shell blocks in order, in
an empty directory, against the ``jetpredict serve`` the tour starts, with this environment's ``jetpredict``.
``tests/test_fresh_install.py`` runs it on the base install too."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from readme_tours import API_LINE, http_tour_blocks, run_http_tour

pytestmark = [pytest.mark.slow,  # starts processes or servers (see README: the fast pass)
              pytest.mark.skipif(shutil.which("curl") is None, reason="the tour uses curl (.ci/run installs it)")]


def test_tour_starts_the_server_and_names_its_address():
    first = [line.strip() for line in http_tour_blocks()[0].splitlines()]
    assert "jetpredict serve &" in first and API_LINE in first


def test_readme_http_tour_runs_top_to_bottom(tmp_path):
    jetpredict = shutil.which("jetpredict")
    run_http_tour(tmp_path, Path(jetpredict).parent if jetpredict else Path(sys.executable).parent)

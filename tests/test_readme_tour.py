"""The README's command-line tour, run top to bottom as a new user would, in an empty directory.

The tour has two blocks: the install command, run once in the clone, and the tour, whose every line runs
in an empty directory. The test checks that every requirement the install names (the base dependencies
and its extras, from pyproject.toml) is installed here, and fails with that command otherwise; then
every tour line runs through bash in a fresh empty directory and must exit 0. Only lines marked
``# on a Jetson:`` are not run (they need a Jetson); the test checks they are exactly ``jetpredict``
commands, so nothing else is left out.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib
from packaging.requirements import Requirement
from readme_tours import sh_blocks

pytestmark = pytest.mark.slow  # starts processes or servers (see README: the fast pass)

ROOT = Path(__file__).resolve().parents[1]
JETSON_MARK = "# on a Jetson:"


def _blocks() -> list[str]:
    return sh_blocks("Command line tour")


def install_line() -> str:
    """The tour's install command: the one line of the section's first block, run in the clone."""
    lines = [line.strip() for line in _blocks()[0].splitlines() if line.strip()]
    assert len(lines) == 1, f"the install block should be one command, got {lines}"
    return lines[0]


def tour_lines() -> list[str]:
    """The lines of the tour block (comments included), continuation lines joined."""
    block = _blocks()[1]
    lines, pending = [], ""
    for raw in block.splitlines():
        line = pending + raw.strip()
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        if line:
            lines.append(line)
    return lines


def _unmet(install: str) -> list[str]:
    """Requirements of ``pip install -e ".[extras]"`` that are not installed (or not at a good version)."""
    extras = re.search(r'\.\[([\w,]+)\]', install)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = list(project["dependencies"])
    for extra in (extras.group(1).split(",") if extras else []):
        wanted += project["optional-dependencies"][extra]
    unmet = []
    for spec in wanted:
        req = Requirement(spec)
        if req.marker is not None and not req.marker.evaluate():
            continue
        try:
            version = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            unmet.append(f"{req} (missing)")
            continue
        if req.specifier and not req.specifier.contains(version, prereleases=True):
            unmet.append(f"{req} (have {version})")
    return unmet


def test_tour_is_marked_and_installable():
    install = install_line()
    assert install.startswith('python3 -m pip install -e ".['), install  # from the clone, once
    unmet = _unmet(install)
    assert not unmet, f"the tour needs `{install.split('#')[0].strip()}`; missing here: {unmet}"
    lines = tour_lines()
    assert not any("pip install" in line for line in lines), "the tour block must run in an empty directory"
    jetson = [line[len(JETSON_MARK):].strip() for line in lines if line.startswith(JETSON_MARK)]
    assert jetson and all(line.startswith(("sudo jetpredict ", "jetpredict ")) for line in jetson), jetson


@pytest.mark.timeout(600)
def test_readme_command_line_tour_runs_top_to_bottom(tmp_path):
    lines = tour_lines()
    commands = [line for line in lines if not line.startswith("#")]
    assert not any(tmp_path.iterdir())  # an empty directory, as the README says
    assert len(commands) >= 12
    bindir = Path(sys.executable).parent
    env_path = f"{bindir}:{subprocess.os.environ.get('PATH', '')}"
    for command in commands:
        proc = subprocess.run(["bash", "-c", f"set -o pipefail; {command}"], cwd=tmp_path, capture_output=True,
                              text=True, timeout=300, env={**subprocess.os.environ, "PATH": env_path})
        assert proc.returncode == 0, f"README line failed ({proc.returncode}): {command}\n{proc.stderr[-2000:]}"
        assert "Traceback" not in proc.stderr, f"{command}\n{proc.stderr[-2000:]}"

    # what the tour promised, file by file
    assert len((tmp_path / "modes.csv").read_text().splitlines()) == 1 + 29232
    plan = (tmp_path / "plan.csv").read_text().splitlines()
    assert plan[0].startswith("mode,cpu_cores,cpu_mhz,gpu_mhz,emc_mhz") and len(plan) == 5
    rows = (tmp_path / "p.csv").read_text().splitlines()
    assert len(rows) == 5 and all(",simulated," in r for r in rows[1:])
    assert (tmp_path / "host.csv").read_text().splitlines()[1].startswith("host,lenet5-mnist,")
    assert len((tmp_path / "all.csv").read_text().splitlines()) == 1 + 29232
    assert (tmp_path / "pareto.svg").read_text().lstrip().startswith("<?xml")
    best = json.loads((tmp_path / "best.json").read_text())
    assert best["best"] is not None and best["best"]["epoch_time_s_high"] <= 120

"""The README's command-line tour, run top to bottom as a new user would, in an empty directory.

The tour's first line is its install command; the test checks that every requirement it names (the
base dependencies and its extras, from pyproject.toml) is installed here, and fails with that command
otherwise. Every other line runs through bash and must exit 0. Only lines marked ``# on a Jetson:``
are not run (they need a Jetson and root); the test checks they are exactly the ``sudo`` lines, so
nothing else is left out.
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

ROOT = Path(__file__).resolve().parents[1]
JETSON_MARK = "# on a Jetson:"


def tour_lines() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Command line tour"):]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
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
    lines = tour_lines()
    install = lines[0]
    assert install.startswith("python3 -m pip install -e "), install
    unmet = _unmet(install)
    assert not unmet, f"the tour needs `{install.split('#')[0].strip()}`; missing here: {unmet}"
    jetson = [line for line in lines if line.startswith(JETSON_MARK)]
    assert jetson and all(line[len(JETSON_MARK):].strip().startswith("sudo jetpredict ") for line in jetson)


@pytest.mark.timeout(600)
def test_readme_command_line_tour_runs_top_to_bottom(tmp_path):
    lines = tour_lines()
    commands = [line for line in lines[1:] if not line.startswith("#")]
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

"""Flower is an optional extra: the package installs and imports without it, and the integration names the
extra when Flower is missing."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]


def run_python(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                          timeout=120)


def test_flower_and_ray_are_only_in_the_flower_extra():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = " ".join(project["dependencies"]).lower()
    assert "flwr" not in names and "ray" not in names
    for extra, deps in project["optional-dependencies"].items():
        if extra != "flower":
            assert not any(d.lower().startswith(("flwr", "ray")) for d in deps), extra
    assert any(d.startswith("flwr[simulation]") for d in project["optional-dependencies"]["flower"])
    assert "jetpredict.integrations" in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "packages"]


def test_import_without_flower_names_the_extra():
    # None in sys.modules makes "import flwr" fail as it does when Flower is not installed.
    result = run_python("""
        import sys
        sys.modules["flwr"] = None
        import jetpredict.integrations
        try:
            import jetpredict.integrations.flower
        except ImportError as err:
            print("ImportError:", err)
        else:
            print("imported")
    """)
    assert result.returncode == 0, result.stderr
    assert "ImportError:" in result.stdout and "pip install 'jetpredict[flower]'" in result.stdout, result.stdout


@pytest.mark.slow
def test_the_rest_of_the_package_never_imports_flower():
    result = run_python("""
        import sys
        import jetpredict.cli, jetpredict.predictor.service, jetpredict.profiler.campaign, jetpredict.api.app
        jetpredict.cli.build_parser()
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("flwr", "ray")))
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"

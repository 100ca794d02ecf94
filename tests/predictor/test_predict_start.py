"""A prediction from a fitted model fits nothing, so its command does not import the fit's optimiser
(scipy.optimize: 0.14 s of every ``jetpredict predict`` or ``recommend`` start)."""

from __future__ import annotations

import subprocess
import sys

import pytest

CODE = r"""
import sys
from jetpredict.cli import main
code = main(sys.argv[1:])
print(code, "scipy.optimize" in sys.modules, file=sys.stderr)
"""


@pytest.mark.parametrize("verb", [["predict", "--presets"], ["recommend", "--objective", "min-time", "--max-power-w", "15"]],
                         ids=["predict", "recommend"])
def test_a_prediction_from_a_fitted_model_imports_no_optimiser(work, verb):
    model = work / "resnet.json"
    done = subprocess.run([sys.executable, "-c", CODE, verb[0], "--model", str(model), *verb[1:]],
                          capture_output=True, text=True, timeout=120)
    assert done.stderr.splitlines()[-1] == "0 False", done.stderr[-2000:]

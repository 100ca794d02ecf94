"""The predictor (and so the service) must not import the digital twin, the profiler or torch."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

CODE = r"""
import importlib, json, pkgutil, sys
import jetpredict.predictor as predictor
walked = [info.name for info in pkgutil.walk_packages(predictor.__path__, "jetpredict.predictor.")]
for name in walked:
    importlib.import_module(name)
bad = sorted(m for m in sys.modules if m == "torch" or m.startswith(("torch.", "jetpredict.profiler")))
print(json.dumps({"walked": walked, "bad": bad}))
"""


@pytest.mark.slow
def test_predictor_and_all_its_modules_import_neither_the_twin_nor_torch():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["walked"], "walked no predictor modules"
    assert result["bad"] == [], f"predictor imports {result['bad']}"

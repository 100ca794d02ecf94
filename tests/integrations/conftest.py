"""Fixtures of the integration tests: a fake device root (the profiler tests' fakes), a fitted workload, and
the Flower fleet example's package on the import path."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from flower_fixtures import resnet_records

#: The Flower fleet example app (examples/flower_fleet/flower_fleet), imported by the app's tests.
EXAMPLE_APP = Path(__file__).resolve().parents[2] / "examples" / "flower_fleet"
if str(EXAMPLE_APP) not in sys.path:
    sys.path.append(str(EXAMPLE_APP))


@pytest.fixture(scope="session")
def resnet_model():
    """A workload model fitted on :func:`flower_fixtures.resnet_records`, in process as ``jetpredict fit`` does."""
    from jetpredict.models.profile_rows import validate_records
    from jetpredict.predictor.bundled import fit_workload

    return fit_workload(validate_records(resnet_records()))


@pytest.fixture(scope="session")
def lenet_models():
    """``lenet5-mnist`` models of the example's first two Jetson types, fitted on 4 twin-profiled modes each."""
    pytest.importorskip("flwr", reason="the Flower example needs the [flower] extra")
    from flower_fleet.fleet import fit_fleet_models
    from flower_fleet.task import DEVICES

    return fit_fleet_models(seed=0, devices=DEVICES[:2])

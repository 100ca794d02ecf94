"""Fixtures of the integration tests: a fake device root (the profiler tests' fakes) and a fitted workload."""

from __future__ import annotations

import pytest
from flower_fixtures import resnet_records


@pytest.fixture(scope="session")
def resnet_model():
    """A workload model fitted on :func:`flower_fixtures.resnet_records`, in process as ``jetpredict fit`` does."""
    from jetpredict.models.profile_rows import validate_records
    from jetpredict.predictor.bundled import fit_workload

    return fit_workload(validate_records(resnet_records()))

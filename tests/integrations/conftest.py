"""Fixtures of the integration tests: a fake device root (the profiler tests' fakes) and a fitted workload."""

from __future__ import annotations

from pathlib import Path

import pytest
from flower_fixtures import resnet_records

from tests.profiler.fakes import FakeRoot


@pytest.fixture
def fake_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeRoot:
    """An empty fake root; ``JETPREDICT_SYSFS_ROOT`` points at it for the test."""
    root = FakeRoot(tmp_path / "root")
    monkeypatch.setenv("JETPREDICT_SYSFS_ROOT", str(root.path))
    return root


@pytest.fixture(scope="session")
def resnet_model():
    """A workload model fitted on :func:`flower_fixtures.resnet_records`, in process as ``jetpredict fit`` does."""
    from jetpredict.models.profile_rows import validate_records
    from jetpredict.predictor.bundled import fit_workload

    return fit_workload(validate_records(resnet_records()))

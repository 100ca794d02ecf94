"""Fixtures for the profiler hardware tests: a fake device root per test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes import FakeRoot

FIXTURES = Path(__file__).with_name("fixtures")


@pytest.fixture
def fake_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeRoot:
    """An empty fake root; ``JETPREDICT_SYSFS_ROOT`` points at it for the test."""
    root = FakeRoot(tmp_path / "root")
    monkeypatch.setenv("JETPREDICT_SYSFS_ROOT", str(root.path))
    return root


@pytest.fixture(scope="session")
def tegrastats_samples() -> list[dict]:
    return json.loads((FIXTURES / "tegrastats_samples.json").read_text())["samples"]

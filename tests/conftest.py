"""Fixtures shared by every test folder: a fake device root (sysfs, nvpmodel, tegrastats) per test."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.profiler.fakes import FakeRoot


@pytest.fixture
def fake_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeRoot:
    """An empty fake root; ``JETPREDICT_SYSFS_ROOT`` points at it for the test."""
    root = FakeRoot(tmp_path / "root")
    monkeypatch.setenv("JETPREDICT_SYSFS_ROOT", str(root.path))
    return root

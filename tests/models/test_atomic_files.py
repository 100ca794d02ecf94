"""A file replaced whole keeps its permissions, and a failed replacement leaves the old bytes and no temp file."""

from __future__ import annotations

import os
import stat

import pytest
from jetpredict.models import atomic_files
from jetpredict.models.atomic_files import replace_file


def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_file_gets_the_umasks_bits_an_old_one_keeps_its_own_and_mode_wins(tmp_path):
    old_umask = os.umask(0o027)
    try:
        new = tmp_path / "new.json"
        replace_file(new, b"1")
        assert new.read_bytes() == b"1" and _mode(new) == 0o640
        os.chmod(new, 0o604)
        replace_file(new, b"2")
        assert new.read_bytes() == b"2" and _mode(new) == 0o604
        replace_file(new, b"3", mode=0o600)
        assert new.read_bytes() == b"3" and _mode(new) == 0o600
    finally:
        os.umask(old_umask)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.json"]


@pytest.mark.parametrize("step", ["fsync", "replace"])
def test_a_failure_leaves_the_old_bytes_and_no_temporary_file(tmp_path, monkeypatch, step):
    path = tmp_path / "state.json"
    path.write_bytes(b"old")

    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic_files.os, step, fail)
    with pytest.raises(OSError, match="No space"):
        replace_file(path, b"new")
    monkeypatch.undo()
    assert path.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_a_name_at_the_byte_limit_is_replaced_through_a_temporary_name_within_it(tmp_path):
    # 83 three-byte characters: a 253-byte name (255 is the limit); cut by characters, its temporary name
    # was 271 bytes.
    path = tmp_path / ("模" * 83 + ".csv")
    assert len(path.name.encode()) == 253
    replace_file(path, b"rows")
    atomic_files.probe_folder(path)
    assert path.read_bytes() == b"rows"
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]

"""``profile`` on a full disk (ENOSPC while its outputs are written): the previous CSV and sidecar stay a pair,
never the CSV a mode ahead of its sidecar, and the error names the file and what ``--out`` holds; a mode whose
training fails says the same of the modes before it."""

from __future__ import annotations

import json
import re

import pytest
from jetpredict.profiler import campaign
from jetpredict.profiler.backends import TorchBackend
from jetpredict.profiler.campaign import run_campaign
from test_campaign import _cfg, _csv_modes, _host_parts

pytestmark = pytest.mark.usefixtures("torch_one_thread")


def _full_disk_for(monkeypatch, name: str, now: bool = False) -> None:
    """From now, or once the outputs were probed (``_Outputs.start``), creating the temporary file beside
    ``name`` fails as on a full disk (ENOSPC: no block or inode left); every other file opens as usual."""
    import errno
    import os

    real_open, real_start, armed = os.open, campaign._Outputs.start, [True] if now else []

    def start(self, *a, **kw) -> None:
        real_start(self, *a, **kw)
        armed.append(True)

    temporary = re.compile(rf"\.{re.escape(name)}\.[0-9a-f]+\.tmp")  # atomic_files.temp_name's pattern

    def open_(path, flags, *a, **kw):
        if armed and temporary.fullmatch(os.path.basename(path)) and flags & os.O_CREAT:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return real_open(path, flags, *a, **kw)

    monkeypatch.setattr(campaign._Outputs, "start", start)
    monkeypatch.setattr(os, "open", open_)


@pytest.mark.parametrize("full", ["p.csv.json", "p.csv"])
def test_a_full_disk_keeps_the_previous_pair_and_names_the_file(tmp_path, monkeypatch, capsys, full):
    """The auditor's disk-full profile: the CSV was renamed into place before its sidecar was written, so the
    failed sidecar left the new run's rows beside the previous run's sidecar, and the error named no file."""
    from jetpredict.cli import main

    csv, sidecar = tmp_path / "p.csv", tmp_path / "p.csv.json"
    csv.write_text("the previous run's rows\n")
    sidecar.write_text('{"previous": true}\n')
    _full_disk_for(monkeypatch, full)
    argv = ["profile", "--device", "host", "--workload", "lenet5-mnist", "--batch-size", "8", "--workers", "0",
            "--warmup", "1", "--minibatches", "2", "--modes", "1", "--no-progress", "--out", str(csv)]
    assert main(argv) == 1  # a failure to write, as the other verbs' full disk
    err = capsys.readouterr().err
    assert f"cannot write --out {tmp_path / full}: No space left on device" in err, err
    assert "an existing --out is as it was" in err
    assert csv.read_text() == "the previous run's rows\n" and sidecar.read_text() == '{"previous": true}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.csv", "p.csv.json"]  # no temporary left


def _fail_from_the_second_mode(tmp_path, monkeypatch, name: str, fail, match: str | None = None,
                               error: type[Exception] = OSError) -> Exception:
    """A two-mode campaign writing --out ``name``, where ``fail()`` is called as mode 2 starts (to break
    the writes, or to raise): the ``error`` it raises, matching ``match``."""
    backend = TorchBackend("lenet5-mnist", 8, 0)
    real_prepare = backend.prepare

    def prepare(mode) -> None:
        if mode.mode == "second":
            fail()
        real_prepare(mode)

    monkeypatch.setattr(backend, "prepare", prepare)
    with pytest.raises(error, match=match) as err:
        run_campaign(_cfg(tmp_path, name=name, minibatches=2), _host_parts(backend, "first", "second"))
    return err.value


def test_a_full_disk_after_a_mode_keeps_the_modes_before_it_in_both_files(tmp_path, monkeypatch):
    """Mode 2's sidecar cannot be written: the CSV and the sidecar both hold mode 1, never the CSV ahead."""
    error = _fail_from_the_second_mode(tmp_path, monkeypatch, "p.csv",
                                       lambda: _full_disk_for(monkeypatch, "p.csv.json", now=True),
                                       "cannot write --out .*p.csv.json: No space left on device")
    assert "hold the 1 mode(s) measured before it" in str(error)
    assert _csv_modes(tmp_path / "p.csv") == ["first"]
    assert [m["mode"] for m in json.loads((tmp_path / "p.csv.json").read_text())["modes"]] == ["first"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.csv", "p.csv.json"]


def _rename_fails_from_now(monkeypatch, call: int, code: int) -> None:
    """From now, the ``call``-th rename (``os.replace``, 1-based) fails with ``code`` (ENOSPC, EIO)."""
    import errno
    import os

    real, calls = os.replace, []

    def replace(src, dst, *a, **kw):
        calls.append(dst)
        if len(calls) == call:
            raise OSError(code, os.strerror(code), str(dst))
        return real(src, dst, *a, **kw)

    assert code in (errno.ENOSPC, errno.EIO)
    monkeypatch.setattr(os, "replace", replace)


@pytest.mark.parametrize("code", [28, 5], ids=["ENOSPC", "EIO"])
@pytest.mark.parametrize("call", [1, 2], ids=["first rename", "second rename"])
def test_a_failed_rename_after_a_mode_keeps_the_modes_before_it_in_both_files(tmp_path, monkeypatch, call, code):
    """Mode 2's CSV or sidecar cannot be renamed into place: both files still hold mode 1. Before one pair
    writer, the sidecar's failed rename (the second) left the CSV a mode ahead of its sidecar."""
    import os

    error = _fail_from_the_second_mode(tmp_path, monkeypatch, "p.csv",
                                       lambda: _rename_fails_from_now(monkeypatch, call, code),
                                       f"cannot write --out .*: {os.strerror(code)}")
    assert "hold the 1 mode(s) measured before it" in str(error)
    monkeypatch.undo()
    assert _csv_modes(tmp_path / "p.csv") == ["first"]
    assert [m["mode"] for m in json.loads((tmp_path / "p.csv.json").read_text())["modes"]] == ["first"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.csv", "p.csv.json"]  # no temporary or backup left


def test_a_full_disk_after_a_mode_keeps_a_json_out_whole(tmp_path, monkeypatch):
    """``--out FILE.json``: mode 2's document cannot be written; the file still holds mode 1, whole and
    readable (written in place, the failed write would have left it truncated)."""
    error = _fail_from_the_second_mode(tmp_path, monkeypatch, "p.json",
                                       lambda: _full_disk_for(monkeypatch, "p.json", now=True),
                                       "cannot write --out .*p.json: No space left on device")
    assert "hold the 1 mode(s) measured before it" in str(error)
    doc = json.loads((tmp_path / "p.json").read_text())
    assert [m["mode"] for m in doc["modes"]] == [r["mode"] for r in doc["rows"]] == ["first"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.json"]


def test_a_full_disk_before_the_first_mode_is_refused_before_any_mode_runs(tmp_path, monkeypatch):
    """No room beside ``--out`` from the start: refused as bad input (exit 2) before a mode is switched or
    measured, not found out after the first mode's minutes of profiling."""
    prepared: list[str] = []
    backend = TorchBackend("lenet5-mnist", 8, 0)
    monkeypatch.setattr(backend, "prepare", lambda mode: prepared.append(mode.mode))
    _full_disk_for(monkeypatch, "p.csv", now=True)
    with pytest.raises(campaign.InputError, match="cannot write --out .*p.csv: No space left on device") as err:
        run_campaign(_cfg(tmp_path), _host_parts(backend, "first"))
    assert err.value.field == "out" and prepared == []
    assert list(tmp_path.iterdir()) == []


def test_a_training_failure_says_how_many_modes_it_leaves_on_disk(tmp_path, monkeypatch):
    """Mode 2's training fails: the error says the 1 mode before it is in both files, and it is."""
    from jetpredict.profiler.runner import TrainingFailed

    def fail() -> None:
        raise TrainingFailed("simulated failure in mode second")

    error = _fail_from_the_second_mode(tmp_path, monkeypatch, "p.csv", fail, error=TrainingFailed)
    assert str(error).endswith(f"; the 1 mode(s) profiled before it are in {tmp_path / 'p.csv'}, "
                                   f"{tmp_path / 'p.csv.json'}"), error
    assert _csv_modes(tmp_path / "p.csv") == ["first"]

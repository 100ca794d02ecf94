"""A state file whose pid or created_at is corrupted is refused by name, with its rule: ``jetpredict restore``
says so in one line and keeps the file (the saved mode), instead of a traceback or a false "still running"."""

from __future__ import annotations

import errno
import json
import os
import sys
import time

import pytest
from jetpredict.models.catalogue import load_device
from jetpredict.profiler.powermode import state as state_file
from jetpredict.profiler.powermode.state import StateFileError

from jetpredict.cli import main


@pytest.fixture
def orin(fake_root, monkeypatch):
    """An Orin NX fake root in MAXN whose state dir is ``<root>/var/lib/jetpredict``."""
    monkeypatch.delenv(state_file.STATE_DIR_ENV, raising=False)
    fake_root.add_jetson(load_device("orin-nx"))
    return fake_root


def _write(root, **fields) -> str:
    """A state file of this boot restoring nvpmodel id 1, with ``fields`` set (None: left out)."""
    path = root.real("/var/lib/jetpredict") / state_file.STATE_FILE_NAME
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    doc = {"schema_version": 1, "kind": "jetson", "device": "orin-nx", "snapshot": {"id": 1, "clocks": None},
           "original": {"mode": "10W"}, "pid": 999999, "boot_id": state_file.boot_id(),
           "created_at": time.time()} | fields
    text = json.dumps({k: v for k, v in doc.items() if v is not None})
    path.write_text(text)
    path.chmod(0o600)
    return text


BAD = [
    ("pid", 99999999999999999999, "pid 99999999999999999999 is not a process id"),
    ("pid", 2**31, "pid 2147483648 is not a process id"),
    ("pid", -1, "pid -1 is not a process id"),
    ("pid", 0, "pid 0 is not a process id"),
    ("pid", "1234", "pid '1234' is not a process id"),
    ("pid", True, "pid True is not a process id"),
    ("pid", 12.0, "pid 12.0 is not a process id"),
    ("created_at", 1e300, "created_at 1e+300 is not a time"),
    ("created_at", float("inf"), "created_at inf is not a time"),
    ("created_at", float("nan"), "created_at nan is not a time"),
    ("created_at", -5.0, "created_at -5.0 is not a time"),
    ("created_at", "yesterday", "created_at 'yesterday' is not a time"),
    ("created_at", False, "created_at False is not a time"),
]


@pytest.mark.parametrize("name, value, says", BAD, ids=[f"{n}={v!r}" for n, v, _ in BAD])
def test_restore_refuses_a_corrupted_field_by_name_and_keeps_the_file(orin, capsys, name, value, says):
    text = _write(orin, **{name: value})
    assert main(["restore"]) == 1
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err and "still running" not in err
    assert "must be" in err  # the rule, not only the value
    path = orin.real("/var/lib/jetpredict") / state_file.STATE_FILE_NAME
    assert path.read_text() == text  # the saved mode stays for a person to act on
    assert orin.calls() == []  # nothing switched
    with pytest.raises(StateFileError, match=name):
        state_file.read_state(path)


def test_a_missing_pid_is_refused_not_taken_for_pid_0(orin, capsys):
    _write(orin, pid=None)
    assert main(["restore"]) == 1
    err = capsys.readouterr().err
    assert "pid is missing" in err and "still running" not in err
    assert (orin.real("/var/lib/jetpredict") / state_file.STATE_FILE_NAME).is_file()


def test_the_status_verb_reports_a_corrupted_file_in_words(orin, capsys):
    _write(orin, created_at=1e300)
    from jetpredict.profiler.status import pending_restore

    pending = pending_restore()
    assert pending is not None and pending.error is not None and "created_at" in pending.error


def test_valid_fields_still_restore(orin, capsys):
    _write(orin, pid=os.getpid() + 2**22, created_at=0.0)  # no such process; the epoch is a time
    assert main(["restore"]) == 0
    assert "restored the original power mode 10W on orin-nx" in capsys.readouterr().err
    assert not (orin.real("/var/lib/jetpredict") / state_file.STATE_FILE_NAME).exists()


def test_a_file_without_created_at_still_reads(orin):
    _write(orin, created_at=None)  # describe-only: an unknown time is shown as the epoch, as before
    path = orin.real("/var/lib/jetpredict") / state_file.STATE_FILE_NAME
    assert state_file.read_state(path).created_at_s == 0.0


def test_the_file_keeps_its_keys_though_the_attributes_name_their_units(orin, capsys):
    """The attributes are ``created_at_s``/``start_time_ticks``; the file's keys stay ``created_at``/``start_time``:
    a SIGKILLed run's file from before the rename is restored by this ``restore``, and a file this version writes
    is one an older ``restore`` reads."""
    written = state_file.RestoreState(kind="jetson", device="orin-nx", snapshot={"id": 1, "clocks": None})
    doc = written.to_json()
    assert (doc["created_at"], doc["start_time"]) == (written.created_at_s, written.start_time_ticks)
    assert not {"created_at_s", "start_time_ticks"} & set(doc)
    # Every key a version-1 file of an earlier jetpredict holds, as that version wrote them.
    _write(orin, pid=os.getpid() + 2**22, created_at=1_700_000_000.5, start_time=12345, conf_path=None,
           jetson_clocks=False, host="jetson", kept=False, over_applied=False)
    path = orin.real("/var/lib/jetpredict") / state_file.STATE_FILE_NAME
    record = state_file.read_state(path)
    assert (record.created_at_s, record.start_time_ticks) == (1_700_000_000.5, 12345)
    assert main(["restore"]) == 0
    assert "restored the original power mode 10W on orin-nx" in capsys.readouterr().err
    assert not path.exists()


def test_a_run_does_not_overwrite_a_state_file_it_cannot_read(orin, capsys):
    """A profile run took an unreadable state file for none and overwrote it with the mode in force: the
    only record of the mode an unfinished run had changed was gone, and a later restore put back the
    changed one. The run stops before switching anything, naming the file's problem; the file stays."""
    text = _write(orin, pid=-1)
    status = orin.read("/var/lib/nvpmodel/status")
    code = main(["profile", "--device", "jetson", "--workload", "lenet5-mnist", "--modes", "15W",
                 "--minibatches", "2", "--warmup", "0", "--no-progress", "--out", str(orin.real("/tmp") / "p.csv")])
    assert code != 0
    err = capsys.readouterr().err
    assert "pid -1 is not a process id" in err and "cannot be read" in err
    assert (orin.real("/var/lib/jetpredict") / state_file.STATE_FILE_NAME).read_text() == text
    assert orin.read("/var/lib/nvpmodel/status") == status  # nothing switched


class _GoneStream:
    """Standard error once its reader is gone (EPIPE) or the terminal hung up (EIO): every write fails."""

    def __init__(self, code: int = errno.EPIPE) -> None:
        self.code = code

    def write(self, text: str) -> int:
        raise OSError(self.code, os.strerror(self.code))  # OSError picks the subclass: BrokenPipeError for EPIPE

    def flush(self) -> None:
        raise OSError(self.code, os.strerror(self.code))


def test_a_failed_restore_exits_1_though_standard_error_is_gone(orin, monkeypatch):
    """The refusal could not be written, and ``main`` took the broken pipe for ``| head``: exit 0, as if the
    original mode were back."""
    _write(orin, pid=None)
    monkeypatch.setattr(sys, "stderr", _GoneStream())
    assert main(["restore"]) == 1


def test_a_restore_that_put_the_mode_back_exits_0_though_its_terminal_hung_up(orin, monkeypatch):
    """Its line to a hung-up terminal (EIO: ``main`` takes only a broken pipe for ``| head``) is dropped, not
    reported as a failed restore: exit 0, the mode back and the file gone."""
    _write(orin)
    monkeypatch.setattr(sys, "stderr", _GoneStream(errno.EIO))
    assert main(["restore"]) == 0
    assert orin.read("/var/lib/nvpmodel/status") == "pmode:0001"
    assert not (orin.real("/var/lib/jetpredict") / state_file.STATE_FILE_NAME).exists()

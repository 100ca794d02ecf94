"""``jetpredict serve`` on a SQLite data directory (or database file) this process may not write: refused at
start naming the flag or variable that gave it (exit 2). Before, an empty folder failed on the lock file's
bare ``[Errno 13]``, and an existing database started, answering 503 "reads still work" to reads that failed.

Root ignores file modes, so serve runs as root without CAP_DAC_OVERRIDE (``setpriv``), which obeys them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

import pytest
from api_fixtures import import_wsgi, stored_sqlite
from jetpredict.api.serve_cli import APP_LOAD_ERROR_EXIT

from tools.testing import busy_port, free_port

_DROP = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search,-fowner"]


def _modes_bind_us() -> bool:
    """Whether a process started through :data:`_DROP` is refused a folder of mode 555."""
    if shutil.which("setpriv") is None:
        return False
    with tempfile.TemporaryDirectory() as folder:
        os.chmod(folder, 0o555)
        done = subprocess.run([*_DROP, sys.executable, "-c", f"import os; print(os.access({folder!r}, os.W_OK))"],
                              capture_output=True, text=True)
    return done.returncode == 0 and done.stdout.strip() == "False"


pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not _modes_bind_us(), reason="cannot make a process obey file modes (needs setpriv, and root to drop "
    "CAP_DAC_OVERRIDE; a user other than root obeys them, but may not run this interpreter)")]


def _serve(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    with busy_port() as port:  # a start that passes the checks stops at the port, never serves
        return subprocess.run([*_DROP, sys.executable, "-m", "jetpredict", "serve", "--server", "flask", "--port",
                               str(port), *args], env={**os.environ, "JETPREDICT_API_KEYS": "k", **(env or {})},
                              capture_output=True, text=True, timeout=120)


def test_an_empty_folder_that_cannot_be_written_is_refused_by_its_flag(tmp_path):
    data = tmp_path / "data"
    data.mkdir(mode=0o555)
    done = _serve("--data-dir", str(data))
    assert done.returncode == 2, done.stderr
    assert f"--data-dir {data} is not writable" in done.stderr and "Errno" not in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_a_database_that_cannot_be_written_is_refused_by_the_variable(tmp_path):
    db = stored_sqlite(tmp_path / "data")
    os.chmod(db, 0o444)
    os.chmod(tmp_path / "data", 0o555)
    done = _serve(env={"JETPREDICT_DATA_DIR": str(tmp_path / "data")})
    assert done.returncode == 2, done.stderr
    assert f"JETPREDICT_DATA_DIR {tmp_path / 'data'} is not writable" in done.stderr, done.stderr
    assert db in done.stderr and "read-only" in done.stderr and "Traceback" not in done.stderr


def test_a_writable_folder_still_starts(tmp_path):
    done = _serve("--data-dir", str(tmp_path / "data"))
    assert done.returncode == 2 and "the port is in use" in done.stderr, done.stderr
    assert "not writable" not in done.stderr


@pytest.mark.parametrize("where", ["folder", "parent"])
def test_the_wsgi_entry_point_refuses_an_unwritable_folder_as_serve_does(tmp_path, where):
    # README: `gunicorn jetpredict.api.wsgi:app` works too; it bypasses serve's checks, and failed on a
    # bare PermissionError (the lock file's, or the folder's mkdir) in a traceback.
    parent = tmp_path / "parent"
    parent.mkdir(mode=0o555 if where == "parent" else 0o755)
    data = parent / "data"
    if where == "folder":
        data.mkdir(mode=0o555)
    done = import_wsgi(*_DROP, JETPREDICT_DATA_DIR=str(data))
    assert done.returncode == APP_LOAD_ERROR_EXIT
    assert f"JETPREDICT_DATA_DIR {data} " in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


@pytest.mark.parametrize("preload", [[], ["--preload"]])
def test_gunicorn_stops_on_the_refusal_instead_of_restarting_workers(tmp_path, preload):
    # A worker's SystemExit(1) makes gunicorn's master start another, which fails alike, without end.
    (tmp_path / "parent").mkdir(mode=0o555)
    done = subprocess.run([*_DROP, sys.executable, "-m", "gunicorn", "jetpredict.api.wsgi:app", "-b", f"127.0.0.1:{free_port()}",
                           *preload], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "JETPREDICT_DATA_DIR": str(tmp_path / "parent" / "data")})
    assert done.returncode != 0
    assert done.stderr.count("jetpredict.api.wsgi: error: JETPREDICT_DATA_DIR") == 1, done.stderr

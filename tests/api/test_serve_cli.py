"""``jetpredict serve``: "listening on" only once the port is bound, a busy port fails at once in words,
and the line says which server runs."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from jetpredict.api.serve_cli import gunicorn_available

from tools.testing import busy_port, free_port

pytestmark = pytest.mark.slow  # starts processes or servers (see README: the fast pass)


def _serve(tmp_path, port: int, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "JETPREDICT_API_KEYS": "k"}
    return subprocess.Popen([sys.executable, "-m", "jetpredict", "serve", "--port", str(port), "--data-dir",
                             str(tmp_path), "--workers", "1", *extra], env=env, stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True)


@pytest.mark.parametrize("server, says", [("flask", "Flask server: Flask's threaded development server"),
                                          ("gunicorn", "gunicorn, 1 worker)")])
def test_listening_is_said_once_the_port_answers(tmp_path, server, says):
    port = free_port()
    proc = _serve(tmp_path, port, "--server", server)
    try:
        deadline = time.monotonic() + 60
        line = ""
        while time.monotonic() < deadline and "listening on" not in line:
            line = proc.stderr.readline()
            assert line or proc.poll() is None, "serve exited"
        assert f"listening on http://127.0.0.1:{port} ({says}" in line
        # the install hint only where gunicorn is missing, not when Flask was chosen beside it
        assert ("pip install 'jetpredict[server]'" in line) == (not gunicorn_available())
        # said after the bind: the port takes a connection right away (answers once the app is loaded)
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=30) as r:
            assert r.status == 200
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_busy_port_fails_at_once(tmp_path):
    with busy_port() as port:
        proc = _serve(tmp_path, port)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2  # a setting to change, as every other refused setting
    assert f"cannot listen on 127.0.0.1:{port}: the port is in use" in err and "--port" in err
    assert "listening on" not in err and "Traceback" not in err
    # Refused before gunicorn tries: none of its five "Connection in use ... Retrying in 1 second." rounds.
    assert "Retrying" not in err and "Connection in use" not in err


def test_a_bad_flag_is_named_as_the_flag_and_a_bad_variable_as_the_variable(monkeypatch, capsys):
    from jetpredict.cli import main

    monkeypatch.delenv("JETPREDICT_PORT", raising=False)
    assert main(["serve", "--port", "-1"]) == 2
    err = capsys.readouterr().err
    assert "--port=-1 is out of range: must be between 0 and 65535" in err and "JETPREDICT_PORT" not in err
    assert main(["serve", "--max-body-bytes", "0"]) == 2
    assert "--max-body-bytes=0 is out of range: must be at least 1" in capsys.readouterr().err
    monkeypatch.setenv("JETPREDICT_PORT", "-1")
    assert main(["serve"]) == 2
    assert "JETPREDICT_PORT=-1 is out of range" in capsys.readouterr().err
    # both bad: the flag is checked first and named (it is what the user just typed)
    monkeypatch.setenv("JETPREDICT_PORT", "70000")
    assert main(["serve", "--port", "-2"]) == 2
    assert "--port=-2 is out of range" in capsys.readouterr().err


def test_the_command_line_is_built_without_the_services_libraries():
    """Every verb's parser (``restore`` too) is built on import of ``serve``'s flags: neither SQLAlchemy nor Flask
    may load there, or a verb that never serves would pay for them, and fail without them."""
    code = ("import sys; from jetpredict.cli import build_parser; build_parser(); "
            "print(sorted(m for m in ('sqlalchemy', 'flask') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_an_empty_variable_means_the_default():
    """``JETPREDICT_PORT=`` (a compose file's blank entry) is the default, not "must be a whole number"."""
    from jetpredict.api.config import DEFAULT_PORT, DEFAULT_WORKERS, load_settings

    settings = load_settings(environ={"JETPREDICT_PORT": "", "JETPREDICT_WORKERS": ""})
    assert (settings.PORT, settings.WORKERS) == (DEFAULT_PORT, DEFAULT_WORKERS)
    settings = load_settings(environ={"JETPREDICT_PORT": str(DEFAULT_PORT + 1), "JETPREDICT_WORKERS": "1"})
    assert (settings.PORT, settings.WORKERS) == (DEFAULT_PORT + 1, 1)


def test_the_flags_reach_the_app_that_serve_starts(tmp_path, clean_env):
    """``serve`` exports its flags as ``JETPREDICT_*``: the app it starts (``create_app()`` in Flask's server
    and in each gunicorn worker) reads its settings from there, so a flag not exported would be ignored."""
    from pathlib import Path

    from jetpredict.api.app import create_app

    from jetpredict.cli import main

    with busy_port() as port:  # serve stops at the busy port (exit 2), after exporting its flags
        assert main(["serve", "--port", str(port), "--data-dir", str(tmp_path), "--server",
                     "flask", "--max-body-bytes", "2000000", "--cors-origins", "https://a.example"]) == 2
    app = create_app({"TESTING": True})
    settings = app.extensions["jetpredict"].settings
    app.extensions["jetpredict"].storage.dispose()
    assert settings.MAX_BODY_BYTES == 2_000_000 and app.config["MAX_CONTENT_LENGTH"] == 2_000_000
    assert settings.CORS_ORIGINS == ("https://a.example",) and Path(settings.DATA_DIR) == tmp_path


def test_a_gunicorn_start_stopped_by_a_busy_port_leaves_no_metrics_folder(tmp_path, clean_env):
    """The per-run metrics folder of a multi-worker start was made before the cleanup that removes it took
    charge: each start refused for a busy port (or a refused store) left a jetpredict-metrics-* folder in /tmp."""
    import tempfile

    from jetpredict.cli import main

    temp = tmp_path / "tmp"
    temp.mkdir()
    clean_env.setattr(tempfile, "tempdir", str(temp))
    with busy_port() as port:
        assert main(["serve", "--port", str(port), "--data-dir", str(tmp_path / "data"),
                     "--server", "gunicorn", "--workers", "2"]) == 2
    assert list(temp.iterdir()) == [] and "PROMETHEUS_MULTIPROC_DIR" not in os.environ

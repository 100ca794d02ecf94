"""``profile`` as a new user meets it: without torch or tqdm, and ``--upload``: checked before profiling,
retried when the service is busy, and refused or unreachable after profiling without losing the rows."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pandas as pd
import pytest
from jetpredict.models.profiling_protocol import BATCH_SIZE, MEASURED_MINIBATCHES
from jetpredict.profiler.builtin_workloads import BUILTIN_WORKLOADS

from tools.testing import free_port, published_rows

pytestmark = pytest.mark.slow  # starts processes or servers (see README: the fast pass)

SIM = ["profile", "--device", "sim:agx-xavier", "--workload", "lenet5-mnist", "--modes", "MAXN",
       "--warmup", "1", "--minibatches", "3"]

# Run the CLI with some modules made unimportable, as on an install without the [profiler] extra.
_WITHOUT = r"""
import importlib.abc, sys
BLOCKED = set(sys.argv[1].split(","))
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Block())
from jetpredict.cli import main
sys.exit(main(sys.argv[2:]))
"""


def _cli_without(modules: str, *argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _WITHOUT, modules, *argv], capture_output=True, text=True,
                          timeout=240, env=env)


def test_twin_profiles_without_torch_or_tqdm(tmp_path):
    out = tmp_path / "p.csv"
    proc = _cli_without("torch,tqdm", *SIM, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "no progress bar: tqdm is not installed" in proc.stderr
    assert "Traceback" not in proc.stderr
    lines = out.read_text().splitlines()
    assert len(lines) == 2 and lines[1].startswith("agx-xavier,lenet5-mnist,MAXN,")


def test_profile_help_without_torch_names_the_builtin_workloads_and_defaults():
    proc = _cli_without("torch", "profile", "--help")
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())  # argparse wraps the help text
    for name in BUILTIN_WORKLOADS:
        assert name in text.replace("- ", "-")
    assert f"minibatch size (default {BATCH_SIZE})" in text
    assert f"measured minibatches per mode (default {MEASURED_MINIBATCHES}, at most" in text


def test_host_profile_without_torch_says_what_to_install(tmp_path):
    out = tmp_path / "h.csv"
    proc = _cli_without("torch", "profile", "--device", "host", "--workload", "lenet5-mnist",
                        "--minibatches", "2", "--out", str(out))
    assert proc.returncode == 1
    assert "PyTorch, which is not installed" in proc.stderr and "jetpredict[profiler]" in proc.stderr
    assert "sim:DEVICE" in proc.stderr and "Traceback" not in proc.stderr


def _serve(**config: object):
    """An in-process jetpredict service on a free port with key ``right-key`` and ``config``: ``(url, app)``."""
    from jetpredict.api.app import create_app
    from werkzeug.serving import make_server

    with tempfile.TemporaryDirectory() as data:
        app = create_app({"DATA_DIR": data, "API_KEYS": "right-key", **config})
        server = make_server("127.0.0.1", 0, app, threaded=True)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        yield f"http://127.0.0.1:{server.server_port}", app
        server.shutdown()


@pytest.fixture(scope="module")
def service():
    """An in-process jetpredict service on a free port with key ``right-key``."""
    yield from _serve()


def _env(**keys: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("JETPREDICT_API_KEY", "JETPREDICT_API_KEYS")}
    env.update(keys)
    return env


def _profile(url: str, out: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "jetpredict", *SIM, "--no-progress", "--upload", url,
                           "--out", str(out)], capture_output=True, text=True, timeout=240, env=env)


@pytest.mark.parametrize("env, message", [
    ({}, "needs the service's API key in $JETPREDICT_API_KEY"),
    ({"JETPREDICT_API_KEY": "wrong-key"}, "refused the key from $JETPREDICT_API_KEY (403)"),
])
def test_upload_key_is_checked_before_profiling(service, tmp_path, env, message):
    url, _ = service
    out = tmp_path / "p.csv"
    proc = _profile(url, out, _env(**env))
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert "nothing was" in proc.stderr and not out.exists()


def test_unreachable_service_fails_before_profiling(tmp_path):
    out = tmp_path / "p.csv"
    proc = _profile(f"http://127.0.0.1:{free_port()}", out, _env(JETPREDICT_API_KEY="k"))
    assert proc.returncode == 2 and "cannot reach" in proc.stderr and not out.exists()


@pytest.mark.parametrize("url", ["", "   "])
def test_an_empty_upload_url_is_refused_before_profiling(tmp_path, url):
    """`--upload "$URL"` with URL unset profiled and uploaded nothing, without a word."""
    out = tmp_path / "p.csv"
    proc = _profile(url, out, _env(JETPREDICT_API_KEY="k"))
    assert proc.returncode == 2 and "--upload is empty" in proc.stderr and not out.exists(), proc.stderr


def test_upload_with_the_service_key_variable(service, tmp_path):
    """On the service's machine, $JETPREDICT_API_KEYS (the service's list) is enough."""
    url, app = service
    out = tmp_path / "p.csv"
    proc = _profile(url, out, _env(JETPREDICT_API_KEYS="right-key,other"))
    assert proc.returncode == 0, proc.stderr
    assert "uploaded 1 row(s)" in proc.stderr
    stored = app.test_client().get("/v1/workloads/lenet5-mnist").get_json()
    assert stored["rows_stored"] == 1


def test_twin_profiles_the_lstm_example(tmp_path):
    """A workload with its own dataset and loss (not a classifier) runs on the twin, from examples/."""
    out = tmp_path / "lstm.csv"
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-m", "jetpredict", "profile", "--device", "sim:agx-xavier",
                           "--workload", "examples.lstm_lm:lstm_language_model", "--modes", "MAXN,MODE_15W",
                           "--warmup", "1", "--minibatches", "3", "--no-progress", "--out", str(out)],
                          capture_output=True, text=True, timeout=240, cwd=root)
    assert proc.returncode == 0, proc.stderr
    rows = pd.read_csv(out)
    assert list(rows["mode"]) == ["MAXN", "MODE_15W"] and (rows["source"] == "simulated").all()
    assert rows.loc[1, "epoch_time_s"] > rows.loc[0, "epoch_time_s"]  # the 15 W mode is slower


@pytest.fixture(scope="module")
def small_service():
    """A jetpredict service (key ``right-key``) whose 64-byte body limit lets the key check's empty upload
    in and refuses a campaign's rows (413): ``(url, app)``."""
    yield from _serve(MAX_BODY_BYTES=64)


def test_an_upload_the_service_refuses_exits_2_with_its_message_and_keeps_the_rows(small_service, tmp_path,
                                                                                    monkeypatch, capsys):
    """The key check passes (the empty upload fits the service's limit); the rows do not: the service's own
    message is printed, the exit status is not 0, and the profiled row stays in the output file."""
    from jetpredict.cli import main

    url, _ = small_service
    monkeypatch.setenv("JETPREDICT_API_KEY", "right-key")
    out = tmp_path / "p.csv"
    assert main([*SIM, "--no-progress", "--upload", url, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"--upload: {url} answered 413: request body is " in err and "the limit is 64" in err, err
    assert "rows are kept in the output files" in err
    assert len(pd.read_csv(out)) == 1


def test_a_service_gone_before_the_upload_keeps_the_rows(tmp_path, monkeypatch):
    from jetpredict.models.errors import InputError
    from jetpredict.profiler import upload

    monkeypatch.setenv("JETPREDICT_API_KEY", "k")
    monkeypatch.setattr(upload, "UPLOAD_RETRIES", 0)  # refused at once; the retries have their own test
    with pytest.raises(InputError, match=r"cannot reach .* \(rows are kept in the output files\)") as err:
        upload.upload_rows(f"http://127.0.0.1:{free_port()}", [{"workload": "w"}])
    assert err.value.field == "upload"


def test_a_busy_service_is_asked_again_and_stores_the_rows_once(service, monkeypatch):
    """A proxy's 503 (Retry-After: 0) to the first upload: asked again under the same Idempotency-Key, the
    service stores the rows once."""
    from jetpredict.profiler import upload

    url, app = service
    keys: list[str | None] = []
    inner = app.wsgi_app

    def busy_once(environ, start_response):
        if environ["PATH_INFO"] == "/v1/profiles":
            keys.append(environ.get("HTTP_IDEMPOTENCY_KEY"))
            if len(keys) == 1:
                start_response("503 Service Unavailable", [("Content-Type", "application/json"),
                                                           ("Retry-After", "0")])
                return [b'{"code": "busy", "status": 503, "message": "busy"}']
        return inner(environ, start_response)

    monkeypatch.setattr(app, "wsgi_app", busy_once)
    monkeypatch.setenv("JETPREDICT_API_KEY", "right-key")
    answer = upload.upload_rows(url, published_rows(as_id="busy-once"))
    assert answer["rows_stored"] == 4 and len(keys) == 2 and keys[0] is not None and keys[0] == keys[1]
    assert app.test_client().get("/v1/workloads/busy-once").get_json()["rows_stored"] == 4


def test_the_key_check_names_the_services_refusal_and_refuses_a_url_that_is_no_jetpredict_service(service,
                                                                                                    monkeypatch):
    """A wrong key: the service's own words; a URL whose /v1/profiles is not the service's (404): refused
    before profiling, not taken for a service that took the key."""
    from jetpredict.models.errors import InputError
    from jetpredict.profiler import upload

    url, app = service
    monkeypatch.setenv("JETPREDICT_API_KEY", "wrong-key")
    said = app.test_client().post("/v1/profiles", json={"rows": []}, headers={"X-API-Key": "wrong-key"})
    assert said.status_code == 403 and said.get_json()["message"]
    with pytest.raises(InputError) as err:
        upload.check_service(url)
    assert f"(403): {said.get_json()['message']}; nothing was profiled" in err.value.message
    monkeypatch.setenv("JETPREDICT_API_KEY", "right-key")
    upload.check_service(url)  # the service, with its key: no error
    with pytest.raises(InputError, match=r"/elsewhere/v1/profiles answered 404 to a key check; is .* a "
                                         "jetpredict service"):
        upload.check_service(url + "/elsewhere")

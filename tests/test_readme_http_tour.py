"""The README's HTTP API tour, run as a new user would: its shell blocks in order, in an empty directory,
against the ``jetpredict serve`` the tour starts.

Three things are added around the tour, none inside it: the server's port (``JETPREDICT_PORT``, and the
tour's ``API=`` line pointed at it) so that the test never takes a port in use; a wait for ``/healthz``
after the ``API=`` line (a reader types the next command after the server has started; a script does not
wait); and ``curl`` made to fail on an HTTP error (``--fail-with-body``), so that a route the tour calls
wrongly fails the test instead of printing an error body.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from readme_blocks import sh_blocks

from tools.testing import STARTUP_TIMEOUT_S, free_port

pytestmark = [pytest.mark.slow,  # starts processes or servers (see README: the fast pass)
              pytest.mark.skipif(shutil.which("curl") is None, reason="the tour uses curl (.ci/run installs it)")]

API_LINE = "API=http://127.0.0.1:8080"


def tour_blocks() -> list[str]:
    return sh_blocks("HTTP API tour")


def _documents(text: str) -> list[dict]:
    """The JSON documents curl printed one after another (the answers end without a newline)."""
    decoder, out, at = json.JSONDecoder(), [], 0
    while (start := text.find("{", at)) >= 0:
        document, at = decoder.raw_decode(text, start)
        out.append(document)
    return out


def test_tour_starts_the_server_and_names_its_address():
    first = [line.strip() for line in tour_blocks()[0].splitlines()]
    assert "jetpredict serve &" in first and API_LINE in first


def test_readme_http_tour_runs_top_to_bottom(tmp_path):
    port = free_port()
    tries = int(STARTUP_TIMEOUT_S / 0.2)  # a server that never answers fails the next curl, not the timeout
    script = "\n".join(tour_blocks()).replace(
        API_LINE, f"API=http://127.0.0.1:{port}\n"
        f"for _ in $(seq {tries}); do command curl -sf $API/healthz >/dev/null && break; sleep 0.2; done")
    prelude = ("set -euo pipefail\n"
               "trap 'kill $(jobs -p) 2>/dev/null; wait' EXIT\n"
               "curl() { command curl --fail-with-body --max-time 300 \"$@\"; }\n")
    tools = [Path(shutil.which(name) or name).parent for name in ("jetpredict", "curl")]
    env = {"PATH": ":".join(map(str, [*tools, "/usr/bin", "/bin"])),
           "HOME": str(tmp_path), "JETPREDICT_PORT": str(port), "JETPREDICT_DATA_DIR": str(tmp_path / "data"),
           "JETPREDICT_ACCESS_LOG": "off"}
    run = subprocess.run(["bash", "-c", prelude + script], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    answers = _documents(run.stdout)
    upload = next(a for a in answers if "rows_stored" in a)
    assert upload["workload_id"] == "my-resnet" and upload["rows_stored"] == 4
    presets = next(a for a in answers if "predictions" in a)
    assert presets["count"] == len(presets["predictions"]) > 0
    # The tour says so: its rows carry no power, so power comes from the device reference.
    assert {p["power_source"] for p in presets["predictions"]} == {"reference"}
    recommendation = next(a for a in answers if a.get("objective") == "min-time")
    assert recommendation["feasible"] and recommendation["best"]["avg_power_w_high"] <= 15
    plan = next(a for a in answers if "deadline_s" in a)
    assert plan["feasible"] and len(plan["clients"]) == 50
    all_modes = json.loads((tmp_path / "all-modes.json").read_text())
    assert all_modes["count"] == 29232 and len(all_modes["predictions"]) == 29232

"""The READMEs' tours as a new user runs them: their shell blocks, and the HTTP tours (README.md's and
api/README.md's "A first session with curl") run against the server each starts (for
``tests/test_readme_http_tour.py`` on this environment and ``tests/test_fresh_install.py`` on the base
install).

Three things are added around an HTTP tour, none inside it: the server's port (``JETPREDICT_PORT``, and
the tour's ``API=`` line pointed at it) so that it never takes a port in use (the tour waits for
``/healthz`` itself, as a reader pasting its block needs); ``curl`` made to fail on an HTTP error (``--fail-with-body``), so that a route the
tour calls wrongly fails instead of printing an error body; and a trailer line curl prints after each answer
(status, bytes, content type: :data:`TRAILER`), which a ``-w`` of the tour's own replaces.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tools.testing import free_port

README = Path(__file__).resolve().parents[1] / "README.md"
#: The service's own README, whose "A first session with curl" is a longer tour of the same kind.
API_README = README.parent / "api" / "README.md"
#: The Flower fleet example's README, whose commands the Flower integration tests run.
FLOWER_README = README.parent / "examples" / "flower_fleet" / "README.md"
#: The HTTP tour's address line, pointed at the test's port.
API_LINE = "API=http://127.0.0.1:8080"
#: How a tour waits for the server it started before its first request (a reader pasting the block at once
#: would otherwise see no answer: ``curl -s`` hides a refused connection).
WAIT_LINE = "for _ in $(seq 30); do curl -sf $API/healthz >/dev/null && break; sleep 1; done"


def sh_blocks(heading: str, readme: Path = README) -> list[str]:
    """The text of each ```sh block in ``readme``'s section ``## {heading}`` (its ``###`` parts included), in
    order."""
    text = readme.read_text()
    section = text[text.index(f"## {heading}"):]
    section = section[:section.index("\n## ", 1)]
    return re.findall(r"```sh\n(.*?)```", section, re.S)


def http_tour_blocks() -> list[str]:
    return sh_blocks("HTTP API tour")


def api_first_session_blocks() -> list[str]:
    return sh_blocks("A first session with curl", API_README)


def _documents(text: str) -> list[dict]:
    """The JSON documents curl printed one after another (the answers end without a newline)."""
    decoder, out, at = json.JSONDecoder(), [], 0
    while (start := text.find("{", at)) >= 0:
        document, at = decoder.raw_decode(text, start)
        out.append(document)
    return out


@dataclass(frozen=True)
class Answer:
    """One curl call of a tour, from the trailer the test's curl prints after it."""

    status: int
    #: Bytes received, as sent (compressed where the answer was).
    size_bytes: int
    method: str
    url: str
    content_type: str
    #: What curl printed before its trailer (empty when ``-o`` saved the answer; a tour's ``-w`` line or a
    #: server's line printed meanwhile lands here too).
    body: str


@dataclass(frozen=True)
class TourRun:
    stdout: str
    answers: list[Answer]
    #: What was printed after the last trailer (a piped curl's output, whose trailer the pipe consumed).
    tail: str


#: The test's curl prints this after each answer, unless the tour's own ``-w`` replaces it. It holds no "{"
#: (:func:`_documents` finds answers by their braces) and no "jetpredict_" (a tour's grep of /metrics drops it).
TRAILER = r"\n@@answer\t%{http_code}\t%{size_download}\t%{method}\t%{url_effective}\t%{content_type}\n"
_TRAILER_LINE = re.compile(r"\n?@@answer\t(\d+)\t(\d+)\t(\S+)\t(\S+)\t(.*)\n")


def run_tour(blocks: list[str], workdir: Path, bin_dir: Path, env: dict[str, str] | None = None) -> TourRun:
    """Run a tour's shell ``blocks`` in order in the empty ``workdir`` with ``jetpredict`` and ``python3`` from
    ``bin_dir`` (its ``API=`` line pointed at a free port); fails when any command does, an HTTP error
    included."""
    port = free_port()
    assert WAIT_LINE in "\n".join(blocks), "the tour must wait for the server it starts, as its reader does"
    # The tour's wait polls with the real curl: the test's curl (below) adds --fail-with-body, which curl
    # refuses beside -f, so every poll would fail and the wait would run its full length.
    script = "\n".join(blocks).replace(API_LINE, f"API=http://127.0.0.1:{port}").replace(
        WAIT_LINE, WAIT_LINE.replace("curl -sf", "command curl -sf", 1))
    prelude = ("set -euo pipefail\n"
               "trap 'kill $(jobs -p) 2>/dev/null; wait' EXIT\n"
               f"curl() {{ command curl --fail-with-body --max-time 300 -w '{TRAILER}' \"$@\"; }}\n")
    curl_dir = Path(shutil.which("curl") or "curl").parent
    run_env = {**(env or {}), "PATH": ":".join(map(str, [bin_dir, curl_dir, "/usr/bin", "/bin"])),
               "HOME": str(workdir), "JETPREDICT_PORT": str(port), "JETPREDICT_DATA_DIR": str(workdir / "data"),
               "JETPREDICT_ACCESS_LOG": "off"}
    run = subprocess.run(["bash", "-c", prelude + script], cwd=workdir, env=run_env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    answers, at = [], 0
    for trailer in _TRAILER_LINE.finditer(run.stdout):
        status, size, method, url, content_type = trailer.groups()
        answers.append(Answer(int(status), int(size), method, url, content_type, run.stdout[at:trailer.start()]))
        at = trailer.end()
    return TourRun(run.stdout, answers, run.stdout[at:])


def run_http_tour(workdir: Path, bin_dir: Path, env: dict[str, str] | None = None) -> None:
    """Run the README's HTTP tour (:func:`run_tour`) and check what it printed and saved: every request
    succeeded and answered as the tour says."""
    answers = _documents(run_tour(http_tour_blocks(), workdir, bin_dir, env).stdout)
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
    all_modes = json.loads((workdir / "all-modes.json").read_text())
    assert all_modes["count"] == 29232 and len(all_modes["predictions"]) == 29232

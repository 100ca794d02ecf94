"""The README's HTTP API tour, and api/README.md's longer "A first session with curl", run as a new user would
(:mod:`readme_tours`): their shell blocks in order, in an empty directory, against the ``jetpredict serve``
each starts, with this environment's ``jetpredict``. ``tests/test_fresh_install.py`` runs the README's tour on
the base install too."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest
from readme_tours import (
    API_LINE,
    API_README,
    api_first_session_blocks,
    http_tour_blocks,
    run_http_tour,
    run_tour,
)

pytestmark = [pytest.mark.slow,  # starts processes or servers (see README: the fast pass)
              pytest.mark.skipif(shutil.which("curl") is None, reason="the tour uses curl (.ci/run installs it)")]


def test_tour_starts_the_server_and_names_its_address():
    first = [line.strip() for line in http_tour_blocks()[0].splitlines()]
    assert "jetpredict serve &" in first and API_LINE in first


def test_readme_http_tour_runs_top_to_bottom(tmp_path):
    jetpredict = shutil.which("jetpredict")
    run_http_tour(tmp_path, Path(jetpredict).parent if jetpredict else Path(sys.executable).parent)


def _quoted_gzip_mb(ask: str) -> float:
    """The "AGX Xavier, all modes, gzip" size (MB) api/README.md's compact-forms table quotes for ``ask``."""
    row = next(line for line in API_README.read_text().splitlines() if line.startswith("| ") and ask in line)
    return float(re.fullmatch(r".*\| ~([\d.]+) MB \|", row).group(1))


def _documented_columns() -> list[str]:
    """The column names of api/README.md's columns-layout example, in its order."""
    example = re.search(r"```json\n(.*?)```", API_README.read_text(), re.S).group(1)
    return re.findall(r'"(\w+)": \[', example[example.index('"columns"'):])


def test_api_first_session_starts_the_server_and_names_its_address():
    first = [line.split("#")[0].strip() for line in api_first_session_blocks()[0].splitlines()]
    assert "jetpredict serve &" in first and API_LINE in first


def test_api_readme_first_session_runs_top_to_bottom(tmp_path):
    """api/README.md's "A first session with curl", every block in order, checked against what its text says."""
    pytest.importorskip("pyarrow", reason="the session's Arrow request needs pyarrow on the server (else 406)")
    import pyarrow as pa

    jetpredict = shutil.which("jetpredict")
    tour = run_tour(api_first_session_blocks(), tmp_path,
                    Path(jetpredict).parent if jetpredict else Path(sys.executable).parent)
    answers = {(a.method, a.url.split("/", 3)[3]): a for a in tour.answers}  # keyed by method and path?query

    def json_of(method: str, path: str) -> dict:
        answer = answers[(method, path)]
        assert answer.content_type == "application/json", (path, answer.content_type)
        return json.loads(answer.body)

    assert "agx-xavier" in {d["id"] for d in json_of("GET", "v1/devices")["devices"]}
    presets = json_of("GET", "v1/devices/agx-xavier/power-modes")
    assert presets["space"] == "presets" and presets["total"] == len(presets["modes"]) > 0
    page = json_of("GET", "v1/devices/agx-xavier/power-modes?space=all&limit=5&offset=0")
    assert (page["total"], page["limit"], page["offset"], len(page["modes"])) == (29232, 5, 0, 5)

    upload = answers[("POST", "v1/profiles")]
    assert upload.status == 201  # the text: "The answer is 201"
    stored = json.loads(upload.body)
    assert (stored["workload_id"], stored["rows_stored"], len(stored["workloads"])) == ("my-resnet", 4, 1)
    assert stored["aliased_knobs"] == {"cpu_mhz": "not varied"}  # the text's example, for modes a-d
    assert json_of("GET", "v1/workloads/my-resnet")["aliased_knobs"] == {"cpu_mhz": "not varied"}
    found = json_of("GET", "v1/workloads?search=resnet&limit=100")
    assert found["limit"] == 100 and "my-resnet" in {w["id"] for w in found["workloads"]}

    predictions = [a for a in tour.answers if a.url.endswith("/v1/predictions")]
    rows = json.loads(predictions[0].body)
    # The text says so: the rows carry no power, so power comes from the device reference.
    assert rows["count"] == len(rows["predictions"]) > 0
    assert {p["power_source"] for p in rows["predictions"]} == {"reference"}
    all_modes = json.loads((tmp_path / "all-modes.json").read_text())
    assert (all_modes["count"], len(all_modes["predictions"]), all_modes["epochs"]) == (29232, 29232, 30)

    csv = next(a for a in predictions if a.content_type.startswith("text/csv"))
    header, *lines = csv.body.splitlines()
    assert len(lines) == 1 and lines[0].startswith("mine,4,1500.0,1100.0,1600.0,")

    saved_json = [a for a in predictions if a.body == "" and a.content_type == "application/json"]
    columns_answer = min(saved_json, key=lambda a: a.size_bytes)  # the rows answer (-o all-modes.json) is ~24 MB
    columns = json.loads((tmp_path / "all-modes.columns.json").read_text())
    assert columns["layout"] == "columns" and columns["count"] == 29232
    assert list(columns["columns"]) == _documented_columns()
    assert {len(c) for c in columns["columns"].values()} == {29232}
    # "in the order of GET /v1/devices/{device}/power-modes?space=all"
    assert columns["columns"]["mode"][:5] == [m["mode"] for m in page["modes"]]
    # Sizes as sent; the text quotes them roughly ("~1 MB"), so within a factor of 2.
    quoted_mb = _quoted_gzip_mb('"layout": "columns"')
    assert quoted_mb / 2 < columns_answer.size_bytes / 1e6 < quoted_mb * 2, columns_answer.size_bytes

    arrow_answer = next(a for a in predictions if a.content_type == "application/vnd.apache.arrow.stream")
    arrow = pa.ipc.open_stream((tmp_path / "all.arrows").read_bytes()).read_all()
    assert arrow.num_rows == 29232 and arrow.column_names == header.split(",")  # the CSV answer's columns
    assert json.loads(arrow.schema.metadata[b"jetpredict"])["count"] == 29232
    # The session's Arrow request asks no gzip: its zstd buffers alone keep it near the table's gzip size.
    quoted_mb = _quoted_gzip_mb("vnd.apache.arrow.stream")
    assert quoted_mb / 2 < arrow_answer.size_bytes / 1e6 < quoted_mb * 2, arrow_answer.size_bytes

    recommendation = json_of("POST", "v1/recommendations")
    assert recommendation["feasible"] and recommendation["best"]["avg_power_w_high"] <= 15
    assert recommendation["best"] in recommendation["pareto"]
    plan = json_of("POST", "v1/fleet-plans")
    assert plan["feasible"] and len(plan["clients"]) == 50

    health = answers[("GET", "healthz")]
    # The DELETE's own -w prints its status in place of the trailer, so it lands before the next answer.
    deleted, health_body = health.body.split("\n", 1)
    assert deleted == "204" and json.loads(health_body)["status"] == "ok"
    metrics = tour.tail.splitlines()  # what `| grep jetpredict_` kept
    assert metrics and all("jetpredict_" in line for line in metrics)
    assert any(line.startswith("jetpredict_http_request") for line in metrics)

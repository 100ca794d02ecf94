"""Predictions, recommendations and fleet plans say which knobs their fit's profiled modes do not separate
(``aliased_knobs``) and how far its own rows scatter about it (``rows_scatter_rel``), as ``jetpredict fit``
says on stderr and as the stored workload's fit says, for inline rows too (issue 18)."""

from __future__ import annotations

import csv
import io
import json
import re

import jsonschema
import pandas as pd
from api_fixtures import published_rows
from jetpredict.api.answers import arrow_available
from jetpredict.api.schemas import EXAMPLE_ROWS
from jetpredict.predictor.bundled import fit_workload
from jetpredict.predictor.fit_check import fit_caveats, merged_caveats

from jetpredict.cli import main

NOT_VARIED = {"cpu_mhz": "not varied"}
#: EXAMPLE_ROWS (cpu_mhz never varied) with epoch times the model's form cannot follow: `fit` warns.
BENT_ROWS = [{**r, "epoch_time_s": r["epoch_time_s"] * f} for r, f in zip(EXAMPLE_ROWS, (1, 1.3, 0.8, 1.25),
                                                                           strict=True)]


def _answers(client, workload: dict) -> dict[str, dict]:
    """The JSON prediction (rows and columns layouts) and recommendation answers for ``workload``."""
    out = {}
    for layout in ("rows", "columns"):
        r = client.post("/v1/predictions", json={"workload": workload, "modes": "presets", "layout": layout})
        assert r.status_code == 200, r.json
        out[f"predictions-{layout}"] = r.json
    r = client.post("/v1/recommendations", json={"workload": workload, "objective": "min-energy",
                                                 "constraints": {}})
    assert r.status_code == 200, r.json
    out["recommendations"] = r.json
    return out


def test_inline_rows_say_what_the_stored_fit_of_the_same_rows_says(client, auth):
    rows = published_rows()  # 4 rows, cpu_mhz 1200 in every one
    inline = _answers(client, {"rows": rows})
    assert client.post("/v1/profiles", json={"rows": rows}, headers=auth).status_code == 201
    stored = client.get("/v1/workloads/my-resnet").json
    assert stored["aliased_knobs"] == NOT_VARIED and stored["rows_scatter_rel"] > 0
    by_id = _answers(client, {"id": "my-resnet"})
    for name, answer in {**inline, **{f"{k} (stored)": v for k, v in by_id.items()}}.items():
        assert answer["aliased_knobs"] == NOT_VARIED, name
        assert answer["rows_scatter_rel"] == stored["rows_scatter_rel"], name
    doc = client.get("/openapi.json").json
    for name, body in (("PredictionResponse", inline["predictions-rows"]),
                       ("Recommendation", inline["recommendations"])):
        properties = doc["components"]["schemas"][name]["properties"]
        for field in ("aliased_knobs", "rows_scatter_rel"):
            jsonschema.validate(body[field], properties[field])


def test_compact_forms_carry_them_as_every_row_of_the_answer(client):
    workload = {"rows": published_rows()}
    json_answer = client.post("/v1/predictions", json={"workload": workload, "modes": "presets"}).json
    text = client.post("/v1/predictions", json={"workload": workload, "modes": "presets"},
                       headers={"Accept": "text/csv"}).get_data(as_text=True)
    lines = list(csv.DictReader(io.StringIO(text)))
    assert lines and {line["aliased_knobs"] for line in lines} == {"cpu_mhz (not varied)"}
    assert {float(line["rows_scatter_rel"]) for line in lines} == {json_answer["rows_scatter_rel"]}
    if not arrow_available():
        return
    import pyarrow as pa

    body = client.post("/v1/predictions", json={"workload": workload, "modes": "presets"},
                       headers={"Accept": "application/vnd.apache.arrow.stream"}).data
    table = pa.ipc.open_stream(body).read_all()
    assert set(table.column("aliased_knobs").to_pylist()) == {"cpu_mhz (not varied)"}
    assert table.schema.field("rows_scatter_rel").type == pa.float64()
    assert set(table.column("rows_scatter_rel").to_pylist()) == {json_answer["rows_scatter_rel"]}
    meta = json.loads(table.schema.metadata[b"jetpredict"])
    assert meta["aliased_knobs"] == NOT_VARIED and meta["rows_scatter_rel"] == json_answer["rows_scatter_rel"]


def test_the_scatter_is_the_one_fit_warns_of(client, tmp_path, capsys):
    profiles = tmp_path / "bent.csv"
    pd.DataFrame(BENT_ROWS).to_csv(profiles, index=False)
    assert main(["fit", "--device", "agx-xavier", "--profiles", str(profiles), "--out",
                 str(tmp_path / "m.json")]) == 0
    said = capsys.readouterr().err
    assert "cpu_mhz (not varied)" in said
    cli_percent = re.search(r"scatter ([0-9.]+)% \(RMS\)", said)
    assert cli_percent is not None, said
    for name, answer in _answers(client, {"rows": BENT_ROWS}).items():
        assert f"{answer['rows_scatter_rel']:.1%}" == f"{cli_percent.group(1)}%", name
        assert answer["aliased_knobs"] == NOT_VARIED, name


def test_a_fit_that_varies_every_knob_says_none(client, auth):
    rows = published_rows(n=6)  # a-f: cores, CPU, GPU and EMC clocks each varied, none with another
    for name, answer in _answers(client, {"rows": rows}).items():
        assert answer["aliased_knobs"] == {}, name
    assert client.post("/v1/profiles", json={"rows": rows}, headers=auth).status_code == 201
    assert client.get("/v1/workloads/my-resnet").json["aliased_knobs"] == {}


def test_fleet_plans_say_every_serving_fits_caveats_together(client, auth):
    rows = published_rows()
    assert client.post("/v1/profiles", json={"rows": rows}, headers=auth).status_code == 201
    stored = client.get("/v1/workloads/my-resnet").json
    plan = client.post("/v1/fleet-plans", json={
        "workload": {"id": "my-resnet"}, "deadline_s": 100000,
        "clients": [{"id": "a", "device": "agx-xavier"}, {"id": "b", "device": "orin-nx"}]}).json
    # Both clients are served by the Xavier fit (b by it transferred): its caveats are the plan's.
    assert plan["aliased_knobs"] == NOT_VARIED and plan["rows_scatter_rel"] == stored["rows_scatter_rel"]
    for c in plan["clients"]:  # and each client's own, beside its provenance
        assert (c["aliased_knobs"], c["rows_scatter_rel"]) == (NOT_VARIED, stored["rows_scatter_rel"]), c["id"]
    schemas = client.get("/openapi.json").json["components"]["schemas"]
    for field in ("aliased_knobs", "rows_scatter_rel"):
        jsonschema.validate(plan[field], schemas["FleetPlan"]["properties"][field])
        jsonschema.validate(plan["clients"][0][field], schemas["FleetClientPlan"]["properties"][field])


def test_a_plan_over_several_fits_takes_every_aliased_knob_and_the_largest_scatter():
    varied, bent = (fit_caveats(fit_workload(pd.DataFrame(rows))) for rows in (published_rows(n=6), BENT_ROWS))
    assert varied["aliased_knobs"] == {} and varied["rows_scatter_rel"] < bent["rows_scatter_rel"]
    assert merged_caveats([varied, bent]) == merged_caveats([bent, varied]) == {
        "aliased_knobs": NOT_VARIED, "rows_scatter_rel": bent["rows_scatter_rel"]}
    assert merged_caveats([{"aliased_knobs": None, "rows_scatter_rel": None}]) == {
        "aliased_knobs": {}, "rows_scatter_rel": None}

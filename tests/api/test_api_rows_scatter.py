"""An upload's fit says how far its own rows scatter about it (``rows_scatter_rel``), as ``jetpredict fit``
warns: the answer, the stored workload and the OpenAPI document agree."""

from __future__ import annotations

import csv

import jsonschema
import pytest
from api_fixtures import json_row, published_rows
from jetpredict.predictor.constants import LACK_OF_FIT_REL

from tools.testing import TWIN_ORIN_NANO_MODES, profile_twin_orin_nano


@pytest.fixture(scope="module")
def twin_rows(tmp_path_factory) -> list[dict]:
    """Five of the twin's memory-bound Orin Nano modes (tools.testing), as the JSON rows of ``twin-resnet``."""
    out = profile_twin_orin_nano(tmp_path_factory.mktemp("twin") / "rows.csv", TWIN_ORIN_NANO_MODES[:5])
    with out.open(newline="") as f:
        return [{**json_row(r), "workload": "twin-resnet"} for r in csv.DictReader(f)]


def test_the_fit_of_an_upload_gives_its_rows_scatter(client, auth, twin_rows):
    answers = {}
    for rows in (published_rows(n=6), twin_rows):  # one device per upload
        r = client.post("/v1/profiles", json={"rows": rows}, headers=auth)
        assert r.status_code == 201, r.json
        answers[r.json["workload_id"]] = r.json
    real, twin = (answers[w]["rows_scatter_rel"] for w in ("my-resnet", "twin-resnet"))
    assert 0 < real < LACK_OF_FIT_REL < twin  # real ResNet-18 a-f within noise; the twin's rows beyond it
    detail = client.get("/v1/workloads/twin-resnet").json
    assert detail["rows_scatter_rel"] == twin and detail["fits"][0]["rows_scatter_rel"] == twin
    doc = client.get("/openapi.json").json
    for name, body in (("UploadResult", answers["twin-resnet"]), ("WorkloadDetail", detail)):
        assert "rows_scatter_rel" in doc["components"]["schemas"][name]["properties"]
        jsonschema.validate(body, {**doc["components"]["schemas"][name], "components": doc["components"]})

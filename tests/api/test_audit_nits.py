"""Nits of the 2026-12-06 audit: no redirect built from the client's Host for a doubled slash, workload ids
made only of dots refused on upload (those stored before stay readable), compressed bodies answered 415."""

from __future__ import annotations

import gzip
import json

import pytest
from api_fixtures import published_rows
from jetpredict.api import upload_groups
from jetpredict.api.client_rows import workload_id_problem

MODES = [{"cpu_cores": 8, "cpu_mhz": 1190.4, "gpu_mhz": 675.75, "emc_mhz": 1600.0}]


# -- 3: doubled slashes ---------------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/assets//page.js", "/v1//devices", "//v1/devices"])
def test_a_doubled_slash_is_a_json_404_not_a_redirect_to_the_clients_host(client, path):
    r = client.get(path, headers={"Host": "evil.example"})
    assert r.status_code == 404 and "Location" not in r.headers
    assert r.json["code"] == 404


# -- 4: workload ids made only of dots ------------------------------------------------------------------
@pytest.mark.parametrize("workload_id", [".", "..", "...", " .. "])
def test_an_upload_refuses_a_workload_id_made_only_of_dots(client, auth, workload_id):
    rows = [{**row, "workload": workload_id} for row in published_rows()]
    r = client.post("/v1/profiles", json={"rows": rows}, headers=auth)
    assert r.status_code == 422, r.json
    message = r.json["errors"]["rows.0.workload"][0]
    assert message.startswith("workload id must not be made only of dots"), message
    assert client.get("/v1/workloads").json["total"] == 0


def test_an_id_with_dots_and_more_is_uploaded(client, auth):
    rows = [{**row, "workload": "v1..2"} for row in published_rows()]
    assert client.post("/v1/profiles", json={"rows": rows}, headers=auth).status_code == 201


def test_a_dots_id_stored_before_the_rule_is_still_read_predicted_and_deleted(app, client, auth, monkeypatch):
    # Stored as an upload stored it before uploads refused it (the id rules of reads, which it keeps).
    monkeypatch.setattr(upload_groups, "upload_id_problem", workload_id_problem)
    svc = app.extensions["jetpredict"]
    with app.test_request_context():
        svc.workloads.upload([{**row, "workload": ".."} for row in published_rows()], None)
    monkeypatch.undo()
    assert client.get("/v1/workloads/..").status_code == 200
    r = client.post("/v1/predictions", json={"workload": {"id": ".."}, "modes": MODES})
    assert r.status_code == 200, r.json
    assert client.delete("/v1/workloads/..", headers=auth).status_code == 204
    assert client.get("/v1/workloads").json["total"] == 0


# -- 5: compressed bodies ------------------------------------------------------------------------------
@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br", "GZIP"])
@pytest.mark.parametrize("path", ["/v1/predictions", "/v1/profiles"])
def test_a_compressed_body_is_415_naming_content_encoding(client, auth, path, encoding):
    body = gzip.compress(json.dumps({"workload": {"id": "x"}}).encode())
    r = client.post(path, data=body, content_type="application/json",
                    headers={**auth, "Content-Encoding": encoding})
    assert r.status_code == 415, r.json
    assert "Content-Encoding" in r.json["errors"]
    assert "uncompressed" in r.json["message"] and encoding in r.json["message"]


def test_identity_content_encoding_is_a_plain_body(client):
    r = client.post("/v1/predictions", json={"workload": {"id": "x"}, "modes": MODES},
                    headers={"Content-Encoding": "identity"})
    assert r.status_code == 404, r.json  # the body was read: the workload is not stored


def test_the_document_says_bodies_are_sent_uncompressed(client):
    assert "sent uncompressed" in client.get("/openapi.json").json["info"]["description"]

"""api/README.md states the rules a client meets: one device per upload (separate uploads per device work),
the workload id rule as the service applies it, and Arrow answers gzip-encoded when accepted."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from api_fixtures import published_rows
from jetpredict.api.config import MAX_WORKLOAD_ID_CHARS
from readme_tours import API_README

NANO = Path(__file__).resolve().parents[2] / "models" / "reference" / "nano-simulated.csv"


def _text() -> str:
    return " ".join(API_README.read_text(encoding="utf-8").split())


def _nano_rows(as_id: str) -> list[dict]:
    df = pd.read_csv(NANO)
    df = df[df["workload"] == "resnet18-cifar10"].iloc[:2]
    return [{**{k: v for k, v in r.items() if pd.notna(v)}, "workload": as_id} for r in df.to_dict("records")]


def test_one_device_per_upload_and_separate_uploads_per_device(client, auth):
    text = _text()
    assert "An upload holds the rows of **one device**" in text and "send each device's rows in an upload" in text
    both = client.post("/v1/profiles", json={"rows": [*published_rows(), *_nano_rows("my-resnet")]}, headers=auth)
    assert both.status_code == 422 and "same device" in both.json["message"]
    assert client.post("/v1/profiles", json={"rows": published_rows()}, headers=auth).status_code == 201
    second = client.post("/v1/profiles", json={"rows": _nano_rows("my-resnet")}, headers=auth)
    assert second.status_code == 201 and second.json["devices"] == ["agx-xavier", "nano"]


@pytest.mark.parametrize("workload_id", ["a/b", "a\\b", "a\x01b", "a\x7fb", "a\ud800b", "x" * (MAX_WORKLOAD_ID_CHARS + 1),
                                         "   "])
def test_an_id_the_stated_rule_refuses_is_refused(client, auth, workload_id):
    rows = [{**r, "workload": workload_id} for r in published_rows()]
    assert client.post("/v1/profiles", json={"rows": rows}, headers=auth).status_code == 422


def test_the_stated_workload_id_rule_is_the_services(client, auth):
    assert (f"A workload id is 1 to {MAX_WORKLOAD_ID_CHARS} characters, not blank, with no `/`, `\\`, control "
            "characters (U+0000-U+001F, U+007F) or unpaired surrogates") in _text()
    longest = [{**r, "workload": "x" * MAX_WORKLOAD_ID_CHARS} for r in published_rows()]
    assert client.post("/v1/profiles", json={"rows": longest}, headers=auth).status_code == 201


def test_arrow_answers_are_gzip_encoded_when_accepted(client, stored):
    pytest.importorskip("pyarrow")
    assert "JSON, CSV and Arrow answers are gzip-compressed when the request says `Accept-Encoding: gzip`" in _text()
    r = client.post("/v1/predictions", json={"workload": {"id": "my-resnet"}, "modes": "all"},
                    headers={"Accept": "application/vnd.apache.arrow.stream", "Accept-Encoding": "gzip"})
    assert r.status_code == 200 and r.mimetype == "application/vnd.apache.arrow.stream"
    assert r.headers["Content-Encoding"] == "gzip"

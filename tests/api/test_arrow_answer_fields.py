"""Arrow prediction answers hold the fields the CSV answer holds per row (the provenance too, not only in
the schema metadata), and are gzip-encoded when the client accepts gzip, as JSON and CSV answers are."""

from __future__ import annotations

import csv
import gzip
import io

import pytest

ARROW = "application/vnd.apache.arrow.stream"
BODY = {"workload": {"id": "my-resnet"}, "modes": "presets", "device": "orin-nano"}


def _arrow(client, body: dict, **headers):
    pa = pytest.importorskip("pyarrow")
    r = client.post("/v1/predictions", json=body, headers={"Accept": ARROW, **headers})
    assert r.status_code == 200 and r.mimetype == ARROW, r.data[:200]
    data = gzip.decompress(r.data) if r.headers.get("Content-Encoding") == "gzip" else r.data
    return r, pa.ipc.open_stream(data).read_all()


def test_arrow_holds_the_csv_answers_columns_with_the_same_values(client, stored):
    _, table = _arrow(client, BODY)
    text = client.post("/v1/predictions", json=BODY, headers={"Accept": "text/csv"}).get_data(as_text=True)
    lines = list(csv.DictReader(io.StringIO(text)))
    assert table.schema.names == list(lines[0])
    rows = table.to_pylist()
    assert len(rows) == len(lines)
    for row, line in zip(rows, lines, strict=True):
        assert (row["cross_device"], row["power_source"]) == (True, line["power_source"]) and line["cross_device"] == "True"
        assert row["device"] == line["device"] == "orin-nano" and row["workload_id"] == line["workload_id"] == "my-resnet"
        for name in ("reference_source", "workload_source", "model_version", "rows_device"):
            assert row[name] == line[name], name
        assert str(row["profiled_modes"]) == line["profiled_modes"] and str(row["revision"]) == line["revision"]
        assert row["workload_devices"] == line["workload_devices"] == "agx-xavier"
        assert row["confidence"] == pytest.approx(float(line["confidence"]))
    json_rows = client.post("/v1/predictions", json=BODY).json["predictions"]
    assert [(r["cross_device"], r["power_source"], r["confidence"]) for r in json_rows] == [
        (r["cross_device"], r["power_source"], pytest.approx(r["confidence"])) for r in rows]


def test_an_inline_answers_unknown_provenance_is_null_in_arrow(client, stored):
    from api_fixtures import published_rows

    _, table = _arrow(client, {"workload": {"rows": published_rows()}, "modes": "presets"})
    rows = table.to_pylist()
    assert rows and all(r["workload_id"] is None and r["revision"] is None for r in rows)
    assert str(table.schema.field("revision").type) == "int64"


def test_arrow_is_gzip_encoded_when_accepted(client, stored):
    r, table = _arrow(client, {**BODY, "modes": "all"}, **{"Accept-Encoding": "gzip"})
    assert r.headers["Content-Encoding"] == "gzip" and "Accept-Encoding" in r.headers["Vary"]
    plain, same = _arrow(client, {**BODY, "modes": "all"})
    assert "Content-Encoding" not in plain.headers and gzip.decompress(r.data) == plain.data
    assert same.equals(table)


def test_a_stored_and_an_inline_answer_have_one_arrow_schema(client, stored):
    """Unknown text (an inline answer's workload id) has the type known text has, so tables concatenate."""
    from api_fixtures import published_rows

    pa = pytest.importorskip("pyarrow")
    _, inline = _arrow(client, {"workload": {"rows": published_rows()}, "modes": "presets", "device": "orin-nano"})
    _, kept = _arrow(client, BODY)
    assert inline.schema.remove_metadata() == kept.schema.remove_metadata(), inline.schema
    both = pa.concat_tables([kept.replace_schema_metadata(None), inline.replace_schema_metadata(None)])
    assert both.num_rows == kept.num_rows + inline.num_rows
    assert both.column("workload_id").to_pylist() == ["my-resnet"] * kept.num_rows + [None] * inline.num_rows


def test_the_wide_columns_follow_the_predictors_provenance_order(client, stored, monkeypatch):
    """The CSV and Arrow forms take their answer-wide columns' order from predictor.service, not a copy."""
    from jetpredict.api import answers
    from jetpredict.predictor.service import PROVENANCE_COLUMNS

    def order(body: dict) -> list[str]:
        text = client.post("/v1/predictions", json=body, headers={"Accept": "text/csv"}).get_data(as_text=True)
        return [c for c in next(csv.reader(io.StringIO(text))) if c in PROVENANCE_COLUMNS]

    assert order(BODY) == list(PROVENANCE_COLUMNS)
    monkeypatch.setattr(answers, "PROVENANCE_COLUMNS", PROVENANCE_COLUMNS[::-1])
    # Another body: the answer of the first is cached as encoded.
    assert order({**BODY, "modes": "all"}) == list(PROVENANCE_COLUMNS[::-1])

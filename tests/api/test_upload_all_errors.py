"""One 422 names every problem of the rows sent: a cell of the wrong JSON type in one row and a value out of
its rule in another are both named, the value problem in the words ``jetpredict fit`` uses for the same rows
as CSV, so that a client fixes them all at once rather than learning of the next after each resend."""

from __future__ import annotations

import re

import pandas as pd
import pytest
from api_fixtures import published_rows

from jetpredict.cli import main


def _fit_errors(rows: list[dict], tmp_path, capsys) -> str:
    """What ``jetpredict fit`` says of ``rows`` written as a CSV file (it must refuse them)."""
    path = tmp_path / "rows.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    assert main(["fit", "--device", "agx-xavier", "--profiles", str(path), "--out", str(tmp_path / "m.json")]) != 0
    return capsys.readouterr().err


def _two_problems(as_id: str) -> list[dict]:
    """Published rows with a type error in row 2 and a value error (a negative epoch time) in row 1."""
    rows = published_rows(as_id=as_id)
    rows[2]["gpu_mhz"] = "fast"
    rows[1]["epoch_time_s"] = -5
    return rows


@pytest.mark.parametrize("route", ["/v1/profiles", "/v1/predictions"])
def test_a_type_error_and_a_value_error_in_other_rows_are_named_in_one_answer(client, auth, tmp_path, capsys,
                                                                             route):
    rows = _two_problems("both-errors")
    body = {"rows": rows} if route == "/v1/profiles" else {"workload": {"rows": rows}, "modes": "presets"}
    prefix = "rows" if route == "/v1/profiles" else "workload.rows"
    r = client.post(route, json=body, headers=auth)
    assert r.status_code == 422, r.json
    errors = r.json["errors"]
    assert set(errors) == {f"{prefix}.1.epoch_time_s", f"{prefix}.2.gpu_mhz"}, errors
    # The type error keeps the JSON rule's words; the value error is the CLI's, word for word.
    assert errors[f"{prefix}.2.gpu_mhz"] == ["must be a number (MHz) or null, got text 'fast'"]
    [said] = errors[f"{prefix}.1.epoch_time_s"]
    assert said == "must be > 0 s, got -5"
    cli = _fit_errors(rows, tmp_path, capsys)  # a CSV cell is text: the CLI ends "got '-5.0'"
    rule = said.split(", got")[0]
    assert f"line 3: epoch_time_s: {rule}, got" in cli and "line 4: gpu_mhz: must be a number (MHz)" in cli
    assert client.get("/v1/workloads/both-errors").status_code == 404  # nothing stored


def test_every_row_with_a_value_problem_is_named_beside_several_type_errors(client, auth):
    rows = published_rows(as_id="many-errors", n=6)
    rows[0]["cpu_cores"] = "8"  # text: the JSON rule
    rows[4]["batch_size"] = True
    rows[1]["cpu_cores"] = 2.5  # a count with a fraction: the CLI's rule
    rows[3]["stall_time_s"] = rows[3]["epoch_time_s"] * 2  # a part above its whole, across cells of one row
    rows[5]["emc_mhz"] = 1e9  # above the physical bound
    r = client.post("/v1/profiles", json={"rows": rows}, headers=auth)
    assert r.status_code == 422, r.json
    errors = r.json["errors"]
    assert list(errors) == ["rows.0.cpu_cores", "rows.1.cpu_cores", "rows.3.stall_time_s", "rows.4.batch_size",
                            "rows.5.emc_mhz"], errors  # by row, as the CLI lists them
    assert errors["rows.0.cpu_cores"][0].startswith("must be a number (count) or null, got text")
    assert errors["rows.4.batch_size"][0].startswith("must be a number (count) or null, got bool")
    assert errors["rows.1.cpu_cores"] == ["must be a whole number (count), got 2.5"]
    assert "exceeds epoch_time_s=" in errors["rows.3.stall_time_s"][0]
    assert "a physical bound" in errors["rows.5.emc_mhz"][0]
    assert r.json["message"].startswith("rows.0.cpu_cores: must be a number")
    assert client.get("/v1/workloads/many-errors").status_code == 404


def test_a_cell_of_the_wrong_type_is_named_once_by_its_type_rule(client, auth):
    """The CLI reads "fast" as a failed number too: the answer says the JSON rule only, not both."""
    rows = _two_problems("once")
    rows[1]["epoch_time_s"] = rows[0]["epoch_time_s"]
    rows[3]["epoch_time_s"] = "-5"  # text the CLI would parse, to a value its rule refuses
    r = client.post("/v1/profiles", json={"rows": rows}, headers=auth)
    assert r.status_code == 422, r.json
    errors = r.json["errors"]
    assert set(errors) == {"rows.2.gpu_mhz", "rows.3.epoch_time_s"}, errors
    assert [len(m) for m in errors.values()] == [1, 1]
    assert errors["rows.3.epoch_time_s"][0].startswith("must be a number (s) or null, got text '-5'")


def test_unknown_columns_are_named_beside_type_errors(client, auth):
    rows = published_rows(as_id="unknown-too")
    rows[0]["epoch_tme_s"] = 1.0
    rows[2]["gpu_mhz"] = "fast"
    r = client.post("/v1/profiles", json={"rows": rows}, headers=auth)
    assert r.status_code == 422, r.json
    assert set(r.json["errors"]) == {"rows.0.epoch_tme_s", "rows.2.gpu_mhz"}
    assert "did you mean 'epoch_time_s'" in r.json["errors"]["rows.0.epoch_tme_s"][0]


def test_unknown_columns_beyond_those_named_are_counted_under_the_rows_themselves(client, auth):
    from jetpredict.models.profile_rows import MAX_UNKNOWN_NAMED

    rows = published_rows(as_id="many-unknown")
    rows[1] = {**rows[1], **{f"x{i}": 1 for i in range(MAX_UNKNOWN_NAMED + 5)}, "gpu_mhz": "fast"}
    body = {"workload": {"rows": rows}, "modes": "presets"}
    r = client.post("/v1/predictions", json=body)
    assert r.status_code == 422, r.json
    errors = r.json["errors"]
    assert errors["workload.rows"] == ["and 5 more unknown column(s), not named here"]
    assert len([k for k in errors if k.startswith("workload.rows.1.x")]) == MAX_UNKNOWN_NAMED
    assert errors["workload.rows.1.gpu_mhz"][0].startswith("must be a number (MHz) or null")


def test_rows_are_compared_once_every_cell_is_of_its_type(client, auth):
    """Two rows measuring one mode 2x apart conflict. With a cell of the wrong type in the upload the answer
    names that cell (and each row's own problems); rows are compared once every cell is right, as the row
    checks compare them only when no row has a problem."""
    rows = published_rows(as_id="compare-later")
    twice = {k: rows[0][k] * 2 for k in ("epoch_time_s", "epoch_energy_j")}  # energy: same power, twice the time
    conflicting = {**rows[0], **twice}
    typed = [*rows, conflicting]
    typed[1] = {**typed[1], "gpu_mhz": str(typed[1]["gpu_mhz"])}  # text the CLI reads as the number
    r = client.post("/v1/profiles", json={"rows": typed}, headers=auth)
    assert r.status_code == 422 and set(r.json["errors"]) == {"rows.1.gpu_mhz"}, r.json
    fixed = client.post("/v1/profiles", json={"rows": [*rows, conflicting]}, headers=auth)
    assert fixed.status_code == 422 and "conflicting rows" in fixed.json["errors"][f"rows.{len(rows)}.epoch_time_s"][0]


def test_rows_past_the_cap_of_type_errors_are_not_looked_at(client, auth):
    """A whole file of bad cells is named up to MAX_CELL_TYPE_ERRORS cells, value problems included: the
    rows after the cap add nothing, so the answer stays bounded."""
    from jetpredict.api.schemas import MAX_CELL_TYPE_ERRORS

    bad = [{**r, "gpu_mhz": "fast", "epoch_time_s": -5} for r in published_rows(as_id="capped", n=10)] * 50
    r = client.post("/v1/profiles", json={"rows": bad}, headers=auth)
    assert r.status_code == 422
    rows_named = {int(re.match(r"rows\.(\d+)\.", k).group(1)) for k in r.json["errors"]}
    assert max(rows_named) == MAX_CELL_TYPE_ERRORS - 1
    assert len(r.json["errors"]) == 2 * MAX_CELL_TYPE_ERRORS

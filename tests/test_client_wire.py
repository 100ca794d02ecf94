"""What ``jetpredict.client.Client`` puts on the wire and makes of what comes back, against the local stubs of
``client_stub.py`` (a loopback HTTP server in a thread, no service): a NaN cell sent as null, an id with a
slash kept one path segment, the last page of a listing ending it, an error's field and rule in its message,
a proxy's page cut to an excerpt; a CSV file's cells as the JSON numbers or text they are sent as; the
timeout it is built with."""

from __future__ import annotations

import re

import pytest
from client_stub import error_body
from werkzeug.http import HTTP_STATUS_CODES

from jetpredict.client import API_KEY_RULE, BadRequest, Client, ServiceError, read_rows_csv


def test_a_nan_in_a_row_is_sent_as_null(stub):
    ok = stub([(201, {}, {"workload_id": "w"})])
    Client(ok.url, retries=0).upload_profiles([{"device": "nano", "epoch_energy_j": float("nan")}])
    assert ok.requests[0]["body"]["rows"][0]["epoch_energy_j"] is None


def test_an_id_with_a_slash_stays_one_path_segment(stub):
    ok = stub([(200, {}, {"id": "a/b"})])
    Client(ok.url).workload("a/b")
    assert ok.requests[0]["path"] == "/v1/workloads/a%2Fb"


def test_the_last_page_ends_the_listing_without_another_request(stub):
    pages = stub([(200, {}, {"total": 2, "limit": 2, "offset": 0, "modes": [{"mode": "a"}, {"mode": "b"}]}),
                  (200, {}, {"total": 2, "limit": 2, "offset": 2, "modes": []})])
    assert [m["mode"] for m in Client(pages.url).iter_power_modes("nano", page_size=2)] == ["a", "b"]
    assert len(pages.requests) == 1


@pytest.mark.parametrize("message, shown", [
    ("the rows are invalid", "the rows are invalid (rows.3.gpu_mhz: must be > 0)"),
    ("rows.3.gpu_mhz: must be > 0", "rows.3.gpu_mhz: must be > 0"),
    # The service's messages name an item as rows[3], the field as rows.3: the rule said once is enough.
    ("rows[3].gpu_mhz: must be > 0", "rows[3].gpu_mhz: must be > 0")],
    ids=["added", "already-named", "rule-already-said"])
def test_the_message_names_the_field_and_rule_once(stub, message, shown):
    bad = stub([(422, {}, error_body(422, message, {"rows.3.gpu_mhz": ["must be > 0"]}))])
    with pytest.raises(BadRequest) as err:
        Client(bad.url).workloads()
    assert str(err.value).endswith(f"answered 422: {shown}") and err.value.name == HTTP_STATUS_CODES[422]


def test_a_proxy_page_is_cut_to_a_short_excerpt(stub):
    page = stub([(500, {"Content-Type": "text/html"}, b"<html><body>" + b"word " * 200 + b"</body></html>")])
    with pytest.raises(ServiceError) as err:
        Client(page.url).devices()
    # MAX_EXCERPT_CHARS (120) of text: 117 and an ellipsis.
    assert str(err.value).endswith("(not a jetpredict error body: " + ("word " * 24)[:117] + "...)")


def test_csv_cells_keep_whole_numbers_and_non_finite_text(tmp_path):
    """A whole number stays an int; ``inf`` stays text, for the service's 422 to name the cell."""
    path = tmp_path / "rows.csv"
    path.write_text("device,cpu_cores,cpu_mhz,epoch_energy_j\nnano,4,1479.0,inf\n")
    row = read_rows_csv(path)[0]
    assert row == {"device": "nano", "cpu_cores": 4, "cpu_mhz": 1479.0, "epoch_energy_j": "inf"}
    assert type(row["cpu_cores"]) is int


def test_the_field_is_the_first_the_service_names(stub):
    bad = stub([(422, {}, error_body(422, "2 bad rows", {"rows.0.gpu_mhz": ["must be > 0"],
                                                         "rows.7.cpu_cores": ["must be >= 1"]}))])
    with pytest.raises(BadRequest) as err:
        Client(bad.url).workloads()
    assert err.value.field == "rows.0.gpu_mhz" and "(rows.0.gpu_mhz: must be > 0)" in str(err.value)


def test_csv_text_columns_stay_text_even_when_they_look_like_numbers(tmp_path):
    """nvpmodel modes are numbered ("0", "1"): sent as JSON numbers, the service would refuse the row."""
    path = tmp_path / "rows.csv"
    path.write_text("device,workload,mode,cpu_cores,epoch_time_s\nnano,123,0,4,1.5\n")
    row = read_rows_csv(path)[0]
    assert row["mode"] == "0" and row["workload"] == "123" and row["cpu_cores"] == 4


@pytest.mark.parametrize("timeout_s", [0, -1, float("inf"), float("nan")])
def test_a_timeout_that_is_no_finite_number_above_0_is_refused(timeout_s):
    with pytest.raises(ValueError, match="timeout_s"):
        Client("http://127.0.0.1:9", timeout_s=timeout_s)


@pytest.mark.parametrize(("key", "fault"), [("clé", "U+00E9 at character 3"), ("ключ", "U+043A at character 1"),
                                          ("two words", "U+0020 at character 4"), ("tab\tkey", "U+0009 at character 4")])
def test_an_api_key_that_is_not_printable_ascii_is_refused_naming_api_key(key, fault):
    """A client sends headers as latin-1 ('ключ' raised a bare UnicodeEncodeError on the first request) and
    the service reads them so: only visible ASCII arrives as the key it was configured as."""
    with pytest.raises(ValueError, match=rf"^api_key must be {re.escape(API_KEY_RULE)} .*; it has {re.escape(fault)}$"):
        Client("http://127.0.0.1:9", api_key=key)


def test_a_key_of_visible_ascii_is_kept_as_given():
    key = "!#$%&'*+-.^_`|~\"/:;<=>?@[]{}()0aZ"
    assert Client("http://127.0.0.1:9", api_key=key).api_key == key


@pytest.mark.parametrize("variable", ["JETPREDICT_API_KEY", "JETPREDICT_API_KEYS"])
def test_a_non_ascii_key_from_the_environment_is_refused_naming_the_variable(monkeypatch, variable):
    monkeypatch.delenv("JETPREDICT_API_KEY", raising=False)
    monkeypatch.setenv(variable, "clé")
    with pytest.raises(ValueError, match=rf"^\${variable} must be printable ASCII") as err:
        Client("http://127.0.0.1:9")
    assert "U+00E9 at character 3" in str(err.value) and "clé" not in str(err.value)

"""Nits of the 2026-12-06 audit: no redirect built from the client's Host for a doubled slash, workload ids
made only of dots refused on upload (those stored before stay readable), compressed bodies answered 415."""

from __future__ import annotations

import pytest


# -- 3: doubled slashes ---------------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/assets//page.js", "/v1//devices", "//v1/devices"])
def test_a_doubled_slash_is_a_json_404_not_a_redirect_to_the_clients_host(client, path):
    r = client.get(path, headers={"Host": "evil.example"})
    assert r.status_code == 404 and "Location" not in r.headers
    assert r.json["code"] == 404

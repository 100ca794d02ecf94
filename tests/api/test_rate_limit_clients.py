"""Whose bucket a request counts against (the client address, behind JETPREDICT_TRUSTED_PROXIES proxies), and
rate-limit settings that would refuse everything are refused at start."""

from __future__ import annotations

import pytest
from jetpredict.api.config import load_settings
from jetpredict.models.errors import InputError

#: A costly POST (the limiter counts it before the view answers 404 for the unknown workload).
BODY = {"workload": {"id": "not-stored"}, "modes": "presets"}


def _post(client, forwarded_for: str) -> int:
    return client.post("/v1/predictions", json=BODY, headers={"X-Forwarded-For": forwarded_for}).status_code


def test_without_trusted_proxies_a_forwarded_for_header_does_not_change_the_bucket(make_app):
    client = make_app(RATE_LIMIT="2/minute").test_client()
    statuses = [_post(client, f"10.0.0.{i}") for i in range(3)]
    assert statuses == [404, 404, 429], statuses  # one bucket: the socket's address


def test_one_trusted_proxy_gives_each_forwarded_client_its_bucket_and_trusts_only_its_own_hop(make_app):
    client = make_app(RATE_LIMIT="2/minute", TRUSTED_PROXIES=1).test_client()
    assert [_post(client, "10.0.0.1") for _ in range(2)] == [404, 404]
    assert _post(client, "10.0.0.2") == 404  # another client behind the same proxy: its own bucket
    # a client that writes a first hop itself is still the address the proxy appended
    assert _post(client, "203.0.113.9, 10.0.0.1") == 429
    assert _post(client, "203.0.113.9, 10.0.0.2") == 404


def test_two_trusted_proxies_take_the_client_two_hops_back(make_app):
    client = make_app(RATE_LIMIT="1/minute", TRUSTED_PROXIES=2).test_client()
    assert _post(client, "198.51.100.7, 10.0.0.1") == 404
    assert _post(client, "198.51.100.7, 10.0.0.9") == 429  # same client, another front proxy
    assert _post(client, "198.51.100.8, 10.0.0.1") == 404


@pytest.mark.parametrize("value", ["-1", "one", "1.5", "true"])
def test_a_bad_trusted_proxies_count_is_refused_naming_the_variable(value):
    with pytest.raises(InputError, match="JETPREDICT_TRUSTED_PROXIES") as err:
        load_settings(environ={"JETPREDICT_TRUSTED_PROXIES": value})
    assert "whole number" in err.value.message or "at least 0" in err.value.message, err.value.message


def test_a_trusted_proxies_count_is_read_and_defaults_to_none():
    assert load_settings(environ={"JETPREDICT_TRUSTED_PROXIES": "2"}).TRUSTED_PROXIES == 2
    assert load_settings(environ={}).TRUSTED_PROXIES == 0


@pytest.mark.parametrize("name", ["RATE_LIMIT", "RATE_LIMIT_ALL_MODES"])
@pytest.mark.parametrize("value", ["0/second", "0/minute", "10/second;0/minute", "0 per hour"])
def test_a_limit_of_zero_requests_is_refused_with_the_way_to_turn_limits_off(name, value):
    with pytest.raises(InputError, match=f"JETPREDICT_{name}=") as err:
        load_settings(environ={f"JETPREDICT_{name}": value})
    assert "use 'off' to disable" in err.value.message and err.value.field == name, err.value.message


@pytest.mark.parametrize("value", ["off", "0", "1/second", "600/minute;50/second"])
def test_limits_that_let_requests_through_and_off_are_still_taken(value):
    assert value == load_settings({"RATE_LIMIT": value}).RATE_LIMIT

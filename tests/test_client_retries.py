"""``jetpredict.client.Client``'s waits between attempts, against the local stubs of ``client_stub.py`` (a
loopback HTTP server in a thread, no service): the backoff doubles from ``backoff_s`` up to ``max_wait_s``,
``Retry-After`` dates are read in UTC and never below now, one equal to ``max_wait_s`` is waited, a fleet
plan, prediction or recommendation is retried as the read it is, and the health check is asked once. The
waits are recorded instead of slept, the jitter pinned to its top."""

from __future__ import annotations

import email.utils
from datetime import datetime, timedelta, timezone

import pytest
from client_stub import error_body

from jetpredict.client import Client, ConnectionFailed
from tools.testing import free_port

DEVICES = (200, {}, {"devices": []})


@pytest.mark.parametrize("backoff_s, max_wait_s, expected", [(0.25, 30.0, [0.25, 0.5]), (60.0, 0.2, [0.2, 0.2])],
                         ids=["doubled", "capped"])
def test_the_backoff_starts_at_backoff_s_doubles_and_stops_at_max_wait_s(stub, waits, backoff_s, max_wait_s,
                                                                           expected):
    busy = stub([(503, {}, error_body(503, "busy")), (503, {}, error_body(503, "busy")), DEVICES])
    assert Client(busy.url, retries=2, backoff_s=backoff_s, max_wait_s=max_wait_s).devices() == {"devices": []}
    assert waits == expected and len(busy.requests) == 3


@pytest.mark.parametrize("when, expected_s", [(datetime(2015, 10, 21, 7, 28, tzinfo=timezone.utc), 0.0),
                                              (timedelta(seconds=120), 120.0)],
                         ids=["past-date", "date-without-zone"])
def test_a_retry_after_date_is_read_in_utc_and_never_before_now(stub, waits, when, expected_s):
    """A date in the past means now; a date whose zone is ``-0000`` (RFC 5322: not stated) is UTC."""
    if isinstance(when, timedelta):
        when = datetime.now(timezone.utc).replace(tzinfo=None) + when
    header = email.utils.format_datetime(when)
    assert header.endswith("-0000" if when.tzinfo is None else "+0000")
    busy = stub([(503, {"Retry-After": header}, error_body(503, "busy")), DEVICES])
    assert Client(busy.url, retries=1, max_wait_s=300.0).devices() == {"devices": []}
    assert waits == [pytest.approx(expected_s, abs=5.0)] and waits[0] >= 0.0


def test_a_retry_after_equal_to_max_wait_s_is_waited(stub, waits):
    busy = stub([(503, {"Retry-After": "5"}, error_body(503, "busy")), DEVICES])
    assert Client(busy.url, retries=1, max_wait_s=5.0).devices() == {"devices": []}
    assert waits == [5.0] and len(busy.requests) == 2


@pytest.mark.parametrize("call", ["predictions", "recommendations"])
def test_a_prediction_or_recommendation_is_retried_after_a_busy_503(stub, waits, call):
    """Both store nothing, so a 503 'busy with heavy requests' is waited out as for a read."""
    busy = stub([(503, {"Retry-After": "1"}, error_body(503, "busy with heavy requests")), (200, {}, {"ok": 1})])
    api = Client(busy.url, retries=1)
    answer = api.predictions("w", modes="all") if call == "predictions" else api.recommendations("w", "min-time")
    assert answer == {"ok": 1} and len(busy.requests) == 2 and waits == [1.0]


def test_a_fleet_plan_is_retried_after_503_as_it_stores_nothing(stub, waits):
    busy = stub([(503, {"Retry-After": "0"}, error_body(503, "busy")), (200, {}, {"clients": []})])
    assert Client(busy.url, retries=1).fleet_plans("w", [{"id": "1", "device": "nano"}], 60.0) == {"clients": []}
    assert len(busy.requests) == 2 and waits == [0.0]


def test_health_answers_a_degraded_service_at_once_without_retrying(stub, waits):
    degraded = {"status": "degraded", "version": "x", "database": "unreachable", "store": "ok", "devices": 6}
    busy = stub([(503, {"Retry-After": "0"}, degraded), (200, {}, {"status": "ok"})])
    assert Client(busy.url, retries=3).health() == degraded
    assert len(busy.requests) == 1 and waits == []


def test_health_is_asked_once_even_when_nothing_answers(waits):
    with pytest.raises(ConnectionFailed) as err:
        Client(f"http://127.0.0.1:{free_port()}", retries=2).health()
    assert err.value.attempts == 1 and waits == []

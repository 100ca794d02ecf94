"""Slow clients against ``jetpredict serve`` under gunicorn: sockets that never finish their request head,
stop in the middle of a body, or never read their answer hold no thread beyond the read timeout; slow but
steady clients and idle keep-alive connections are served.

One worker of the default 4 threads: with two, the kernel hands each connection to either worker, and a probe
that lands on a worker the slow sockets missed is answered even by a server that hangs (the check could not
fail); what one worker does, each does."""

from __future__ import annotations

import http.client
import json
import socket
import time

import pytest
from api_fixtures import published_rows
from jetpredict.api.config import DEFAULT_THREADS
from jetpredict.api.serve_cli import KEEPALIVE_S

from tools.testing import LiveServer

pytestmark = pytest.mark.slow  # starts processes or servers (see README: the fast pass)

#: The read timeout the server runs with here (s), low to keep the tests short; the default is
#: api.config.DEFAULT_REQUEST_READ_TIMEOUT_S.
READ_TIMEOUT_S = 2
#: More slow sockets than the worker has threads, so that they could take every one.
SLOW_SOCKETS = DEFAULT_THREADS + 1
#: How long a test waits for an answer or a close before it calls the server hung (s): a liveness bound, far
#: above the read timeout x the rounds the slow sockets need (5 / 4 threads: 2 rounds of 2 s).
HUNG_S = 40.0


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with LiveServer(tmp_path_factory.mktemp("slow") / "data", server="gunicorn", workers=1,
                    extra_env={"JETPREDICT_REQUEST_READ_TIMEOUT_S": str(READ_TIMEOUT_S)}) as live:
        yield live


def _open(server: LiveServer, first_bytes: bytes) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", server.port), timeout=HUNG_S)
    s.sendall(first_bytes)
    return s


def _healthz_s(server: LiveServer) -> float:
    """Seconds /healthz took on a fresh connection; fails (timeout) past HUNG_S."""
    t0 = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=HUNG_S)
    try:
        conn.request("GET", "/healthz")
        response = conn.getresponse()
        assert response.status == 200 and json.loads(response.read())["status"] == "ok"
    finally:
        conn.close()
    return time.monotonic() - t0


def _closed_by_server_s(sock: socket.socket, t0: float) -> tuple[float, bytes]:
    """Seconds after ``t0`` at which the server closed ``sock``, and what it sent before."""
    received = b""
    try:
        while chunk := sock.recv(65536):  # socket timeout HUNG_S: a socket held longer fails the test
            received += chunk
    except ConnectionResetError:
        pass  # closed with unread bytes on the server's side: a reset, a close all the same
    finally:
        sock.close()
    return time.monotonic() - t0, received


def _log_text(server: LiveServer) -> str:
    return server.log_path.read_text(errors="replace")


_POST_HEAD = b"POST /v1/predictions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
#: What each slow socket sends before it stalls, and whether the server may answer it: a 4xx to the part of a
#: body that came (its JSON is cut); an unfinished head has no request to answer.
STALLED_REQUESTS = {
    "unfinished head": (b"GET /healthz HTTP/1.1\r\n", False),  # the audit's request
    "sized body": (_POST_HEAD + b"Content-Length: 1000\r\n\r\n{\"workload\": ", True),
    "chunked body": (_POST_HEAD + b"Transfer-Encoding: chunked\r\n\r\n5\r\n{\"wor", True),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("stall", STALLED_REQUESTS)
def test_stalled_requests_do_not_block_healthz_and_are_closed(server, stall):
    first_bytes, may_answer = STALLED_REQUESTS[stall]
    t0 = time.monotonic()
    slow = [_open(server, first_bytes) for _ in range(SLOW_SOCKETS)]
    try:
        time.sleep(0.5)  # accepted before the probe, so the probe queues behind them
        assert _healthz_s(server) < HUNG_S
        for sock in slow:
            elapsed_s, received = _closed_by_server_s(sock, t0)
            assert READ_TIMEOUT_S * 0.9 <= elapsed_s < HUNG_S
            # never a 2xx: no answer at all, or (a body) the app's 4xx
            assert received == b"" or (may_answer and received.startswith(b"HTTP/1.1 4")), received[:200]
    finally:  # a failed check leaves no socket holding the module's server
        for sock in slow:
            sock.close()
    assert "Traceback" not in _log_text(server)


def _every_mode_request(server: LiveServer, accept: str, receive_buffer: int) -> socket.socket:
    """A connection that has asked for a prediction of every AGX Xavier mode (``accept``: 16 MB of JSON, 8 MB of
    CSV), far more than the socket buffers hold; its receive buffer, ``receive_buffer`` bytes, set before it
    connects, so that the server's buffer fills whenever the client pauses."""
    body = json.dumps({"workload": {"rows": published_rows()}, "modes": "all"}).encode()
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    s.settimeout(HUNG_S)
    s.connect(("127.0.0.1", server.port))
    s.sendall((f"POST /v1/predictions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAccept: {accept}\r\n"
               f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body)
    return s


def _answer_and_length(received: bytes) -> tuple[bytes, int]:
    """The answer's body as received, and the length its 200 head promised."""
    head, _, answer = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head[:300]
    return answer, int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                            if line.lower().startswith(b"content-length:")))


@pytest.mark.timeout(150)
def test_answers_left_unread_do_not_block_healthz_and_are_cut(server):
    """Clients that ask for a large answer and never read it held a thread each in its write, with no time
    limit: as many as the worker has threads stopped it answering anyone. A send that waits the read timeout
    with no byte moved ends the connection."""
    cut = "the answer was not read within"
    before = _log_text(server).count(cut)
    slow = []
    try:
        # As many as the worker has threads (every one), one at a time: the next asks once this one's answer has
        # begun (a peek, which reads nothing), so each has passed the gate of every-mode answers (api.heavy: one
        # runs, two wait; a fixed pause let one answer 503 on a loaded machine).
        for _ in range(DEFAULT_THREADS):
            slow.append(_every_mode_request(server, "application/json", 4096))
            assert slow[-1].recv(1, socket.MSG_PEEK) == b"H"
        assert _healthz_s(server) < HUNG_S  # queued behind the slow sockets: answered once their threads are free
        deadline = time.monotonic() + HUNG_S
        while _log_text(server).count(cut) < before + DEFAULT_THREADS and time.monotonic() < deadline:
            time.sleep(0.2)
        for sock in slow:
            answer, length = _answer_and_length(_closed_by_server_s(sock, time.monotonic())[1])
            assert len(answer) < length  # cut: the server gave up on the unread rest
    finally:
        for sock in slow:
            sock.close()
    log = _log_text(server)
    assert "Traceback" not in log
    assert log.count(cut) == before + DEFAULT_THREADS


@pytest.mark.timeout(90)
def test_a_client_reading_a_large_answer_in_pieces_gets_all_of_it(server):
    """A pause after each of the first 4 MB, each half the read timeout (the other half is the margin of a loaded
    machine), while the server's buffer is full (it holds ~3 MB, and 1 MB or more is still to come): the 8 MB
    answer comes whole, though the server waits on the client twice the timeout in all (the limit is on one
    pause, not on a total)."""
    pauses_wanted, pause_s = 4, READ_TIMEOUT_S / 2  # twice the timeout in all
    sock = _every_mode_request(server, "text/csv", 65536)
    received, pauses = b"", 0
    try:
        while chunk := sock.recv(1 << 20):
            received += chunk
            if pauses < pauses_wanted and len(received) > (pauses + 1) << 20:
                time.sleep(pause_s)
                pauses += 1
    finally:
        sock.close()
    answer, length = _answer_and_length(received)
    assert len(answer) == length
    assert pauses == pauses_wanted  # the answer outlasted every pause


@pytest.mark.timeout(60)
def test_slow_steady_client_is_served_past_the_timeout(server):
    """A head in two pieces inside the timeout, then a body in pieces whose pauses are each shorter than it
    but add up past it: answered in full (the body's limit is a pause, not a total)."""
    body = json.dumps({"workload": {"rows": published_rows()}, "modes": "presets"}).encode()
    head = (f"POST /v1/predictions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    pause_s, pieces = READ_TIMEOUT_S / 2, 3  # pauses adding up past the timeout
    sock = _open(server, head[:20])
    time.sleep(pause_s)
    sock.sendall(head[20:])
    step = -(-len(body) // pieces)
    for i in range(pieces):
        time.sleep(pause_s)
        sock.sendall(body[i * step:(i + 1) * step])
    _, received = _closed_by_server_s(sock, time.monotonic())
    assert received.startswith(b"HTTP/1.1 200"), received[:300]
    answer = json.loads(received.partition(b"\r\n\r\n")[2])
    assert answer["predictions"]


@pytest.mark.timeout(60)
def test_keepalive_connection_idle_past_the_timeout_is_served(server):
    """Idle between two requests longer than the read timeout (inside gunicorn's keep-alive): the second
    request is answered on the same connection."""
    assert READ_TIMEOUT_S * 1.5 < KEEPALIVE_S  # the idle below outlasts the read timeout, not the keep-alive
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=HUNG_S)
    try:
        conn.request("GET", "/healthz")
        first = conn.getresponse()
        assert first.status == 200
        first.read()
        sock = conn.sock
        time.sleep(READ_TIMEOUT_S * 1.5)
        conn.request("GET", "/healthz")
        second = conn.getresponse()
        assert second.status == 200
        second.read()
        assert conn.sock is sock  # not a new connection: http.client reopens one silently once it was closed
    finally:
        conn.close()

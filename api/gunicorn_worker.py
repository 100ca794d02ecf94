"""gunicorn's threaded worker with a read timeout on each request, for ``jetpredict serve``.

gunicorn's ``gthread`` worker waits for a new connection's first byte without a thread, but once a byte has
come a thread reads the request head, then the app the body, from a blocking socket with no time limit: a
client that sends ``GET / HTTP/1.1\\r\\n`` and nothing more holds that thread for as long as it keeps the
socket open, and as many such clients as a worker has threads stop it answering anyone (gunicorn 27.0.1).

:class:`TimedReadWorker` reads through :class:`TimedReads`: the request head must have come within the read
timeout of the connection's accept (or, kept alive, of its next byte), and the body may pause no longer than
it between bytes (a client still sending, however slowly, is never cut). A read that runs out ends the
connection as the client's hang-up would (gunicorn then closes it with a debug line, no traceback) and logs
one line. Idle keep-alive connections are gunicorn's
``keepalive`` matter: they wait in its poller, outside any thread, and are not read until a byte comes.
Every read of the request goes through the parser's socket reader. The response is written to the socket
itself (files too: gunicorn's ``sendfile`` is off), each send waiting at most the read timeout for room
(``SO_SNDTIMEO``): a client that stops reading a large answer, one that fills the socket buffers, is dropped
once a send has waited that long with no byte moved (a few times the timeout after it stopped, as the buffers
drain), as one that stops sending is; one reading, however slowly, is never cut.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import time
from collections.abc import Callable

from gunicorn.http.unreader import SocketUnreader
from gunicorn.workers.gthread import TConn, ThreadWorker
from jetpredict.api.config import load_settings
from werkzeug.exceptions import ClientDisconnected

_HEAD, _BODY = "head", "body"


class TimedReads:
    """A client socket as the request parser reads it: ``recv`` waits at most until the head's deadline, or
    ``timeout_s`` for each body read. When that runs out it shuts the socket; a head's read then returns
    ``b""``, the end of the stream (gunicorn stops quietly), a body's raises werkzeug's
    :class:`ClientDisconnected` (the app answers 400, to no one, without a traceback: an end of stream in a
    chunked body was a 500 with one). Bytes already come are read even past the deadline: a client queued
    behind slow ones is served. Outside a request (phase ``None``) reads pass through, and whatever else is
    asked of it (``settimeout``, ``fileno``) is the socket's."""

    def __init__(self, sock: socket.socket, timeout_s: float, on_drop: Callable[[str | None], None]) -> None:
        self._sock = sock
        self.timeout_s = timeout_s
        self._on_drop = on_drop  # on_drop(phase): says that the client was dropped
        self.phase: str | None = None
        self._head_deadline = 0.0  # time.monotonic()
        self.dropped = False

    def start_head(self, deadline: float) -> None:
        """Read a request head, all of it by ``deadline`` (``time.monotonic()``)."""
        self.phase, self._head_deadline = _HEAD, deadline

    def start_body(self) -> None:
        self.phase = _BODY

    def stop(self) -> None:
        self.phase = None

    def recv(self, size: int) -> bytes:
        if self.phase is None:
            return self._sock.recv(size)
        wait_s = self.timeout_s if self.phase == _BODY else max(self._head_deadline - time.monotonic(), 0.0)
        prior = self._sock.gettimeout()
        self._sock.settimeout(wait_s)  # 0: what has come, without waiting
        try:
            return self._sock.recv(size)
        except (TimeoutError, BlockingIOError):  # socket.timeout is TimeoutError (Python >= 3.10)
            return self._drop()
        finally:
            with contextlib.suppress(OSError):
                self._sock.settimeout(prior)

    def hang_up(self) -> str | None:
        """End the connection as a slow client's and say so (``on_drop``); the phase it was read in, if any."""
        phase, self.dropped = self.phase, True
        self.phase = None
        # Shut both ways now: gunicorn's graceful close, which runs on the worker's main loop, would otherwise
        # wait up to 2 s for this client's FIN, which a slow client never sends.
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._on_drop(phase)
        return phase

    def _drop(self) -> bytes:
        if self.hang_up() == _BODY:
            raise ClientDisconnected()
        return b""

    def __getattr__(self, name: str):
        return getattr(self._sock, name)


def bound_sends(sock: socket.socket, timeout_s: float) -> None:
    """Make each send on the blocking ``sock`` wait at most ``timeout_s`` for room in its buffer, then fail with
    ``EAGAIN`` (Python's :class:`BlockingIOError`); a send that moves any bytes returns them, so only a client that
    reads nothing for that long is cut. Where the system refuses the option, sends stay unbounded."""
    whole = int(timeout_s)
    with contextlib.suppress(OSError, AttributeError):  # struct timeval {time_t; suseconds_t}: C longs
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO,
                        struct.pack("ll", whole, int((timeout_s - whole) * 1_000_000)))


class _TimedConn(TConn):
    """A connection whose HTTP/1 parser reads through :class:`TimedReads` once it is made."""

    timed_reads: TimedReads | None = None
    # Set by TimedReadWorker.enqueue_req before init runs: the read timeout (s), the time.monotonic() by
    # which the next request head must have come, and the worker's log.
    read_timeout_s: float
    read_deadline: float

    def init(self) -> None:
        super().init()
        unreader = getattr(self.parser, "unreader", None)
        # HTTP/2 (off in serve) has its own reader: left as it is.
        if self.timed_reads is None and not getattr(self, "is_http2", False) \
                and isinstance(unreader, SocketUnreader):
            self.timed_reads = TimedReads(unreader.sock, self.read_timeout_s, self._dropped)
            unreader.sock = self.timed_reads
            self.timed_reads.start_head(self.read_deadline)
            bound_sends(self.sock, self.read_timeout_s)

    def _dropped(self, phase: str | None) -> None:
        what = {_HEAD: "no complete request head", _BODY: "no request body byte"}.get(phase, "the answer was not read")
        self.log.info("closed the connection of %s: %s within %g s (a slow client)",
                      self.client[0] if isinstance(self.client, tuple) else self.client, what, self.read_timeout_s)


class TimedReadWorker(ThreadWorker):
    """gunicorn's ``gthread`` worker whose requests are read with :attr:`read_timeout_s` (s; the setting
    ``REQUEST_READ_TIMEOUT_S``, read where the worker starts): see the module. gunicorn names it by its
    path (``-k jetpredict.api.gunicorn_worker.TimedReadWorker``): gunicorn 22 takes no class object."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.read_timeout_s = float(load_settings().REQUEST_READ_TIMEOUT_S)
        # Files (the page's assets) go out through sendall, whose sends bound_sends bounds: Python's
        # socket.sendfile waits for room with no time limit once a send would block.
        self.cfg.set("sendfile", False)

    def enqueue_req(self, conn) -> None:
        # From the moment a connection is accepted, or readable again (keep-alive), not from when a thread
        # takes it: slow clients queued behind slow ones are dropped at once then, not one round of threads
        # at a time (24 unfinished heads on 2 workers x 4 threads: the last closed at 60 s, now all at 10 s).
        if type(conn) is TConn:  # a new connection: its reads are timed once its parser exists
            # Here, not in handle: gunicorn 23 makes the parser (TConn.init) in enqueue_req, 27 in the
            # thread's handle.
            conn.__class__ = _TimedConn
            conn.read_timeout_s, conn.log = self.read_timeout_s, self.log
        conn.read_deadline = time.monotonic() + self.read_timeout_s
        super().enqueue_req(conn)

    def handle(self, conn):
        if getattr(conn, "timed_reads", None) is not None:  # a kept-alive connection's next request
            conn.timed_reads.start_head(conn.read_deadline)
        return super().handle(conn)

    def handle_request(self, req, conn):
        reads = getattr(conn, "timed_reads", None)
        if reads is None:
            return super().handle_request(req, conn)
        reads.start_body()  # the head is read: the app reads the body, if any
        try:
            keepalive = super().handle_request(req, conn)
        except BlockingIOError:  # a send found no room for the read timeout (bound_sends): the client reads nothing
            reads.stop()  # out of the request's reading: dropped as an answer not read
            reads.hang_up()
            return False
        finally:
            reads.stop()  # gunicorn's own drain of an unread body bounds its reads itself
        return keepalive and not reads.dropped


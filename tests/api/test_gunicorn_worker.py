"""serve's gunicorn worker as built in a worker process (its live behaviour: test_serve_slow_clients.py)."""

from __future__ import annotations

import logging
import os

from gunicorn.config import Config
from jetpredict.api.gunicorn_worker import TimedReadWorker


def test_the_worker_turns_gunicorns_sendfile_off(monkeypatch):
    """gunicorn's sendfile (the page's assets, 1.7 MB of Swagger UI) waits for room with no time limit once
    a send would block, whatever SO_SNDTIMEO says: the worker turns it off in its configuration."""
    monkeypatch.setenv("JETPREDICT_REQUEST_READ_TIMEOUT_S", "3")
    cfg = Config()
    assert cfg.sendfile is True  # gunicorn's default
    worker = TimedReadWorker(0, os.getpid(), [], None, 30, cfg, logging.getLogger("test"))
    assert worker.cfg.sendfile is False and worker.read_timeout_s == 3.0

"""CLI verb ``serve``: run the HTTP service under gunicorn when it is installed, Flask's server otherwise.

Settings come from flags, then ``JETPREDICT_*`` variables, then defaults (127.0.0.1:8080, 2 workers,
SQLite under ``./data``). Flags are exported as ``JETPREDICT_*`` so every worker process sees them.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import tempfile

from jetpredict.api.config import ENV_PREFIX, load_settings

#: flag name -> setting name
_FLAGS = {"host": "HOST", "port": "PORT", "workers": "WORKERS", "threads": "THREADS", "data_dir": "DATA_DIR",
          "database_url": "DATABASE_URL", "max_body_bytes": "MAX_BODY_BYTES", "cors_origins": "CORS_ORIGINS"}


def _log(message: str) -> None:
    print(f"jetpredict serve: {message}", file=sys.stderr, flush=True)


def gunicorn_available() -> bool:
    try:
        import gunicorn.app.base  # noqa: F401
    except ImportError:
        return False
    return True


def _create_app():
    from jetpredict.api.app import create_app

    return create_app()


def run_gunicorn(settings, load=_create_app) -> int:
    """Serve the WSGI app returned by ``load()`` under gunicorn with the service's settings."""
    from gunicorn.app.base import BaseApplication

    def child_exit(_server, worker) -> None:
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            from prometheus_client import multiprocess

            multiprocess.mark_process_dead(worker.pid)

    class Server(BaseApplication):
        def load_config(self) -> None:
            options = {
                "bind": f"{settings.HOST}:{settings.PORT}", "workers": settings.WORKERS,
                "worker_class": "gthread", "threads": settings.THREADS, "timeout": 120,
                "graceful_timeout": 10, "keepalive": 5, "errorlog": "-", "loglevel": "info",
                "proc_name": "jetpredict", "child_exit": child_exit,
                # Import and warm up once in the master; workers fork ready to answer.
                "preload_app": True,
                # No request-line cap in gunicorn (its 414 is an HTML page); the app answers long URLs
                # with a JSON 414 (api.app.MAX_URL_BYTES), the body limit still applies.
                "limit_request_line": 0,
            }
            if "control_socket_disable" in self.cfg.settings:  # gunicorn >= 25: one socket per user
                options["control_socket_disable"] = True
            for key, value in options.items():
                self.cfg.set(key, value)

        def load(self):
            return load()

    Server().run()
    return 0


def _run_flask(settings) -> int:
    from jetpredict.api.app import create_app

    create_app().run(host=settings.HOST, port=settings.PORT, threaded=True, use_reloader=False)
    return 0


def _serve(args: argparse.Namespace) -> int:
    overrides = {setting: getattr(args, flag) for flag, setting in _FLAGS.items()
                 if getattr(args, flag, None) is not None}
    settings = load_settings(overrides)  # InputError (exit 2) for a bad flag or variable
    for setting, value in overrides.items():
        os.environ[ENV_PREFIX + setting] = str(value)
    if not settings.API_KEYS:
        # A key for this run only, so uploads work out of the box; set JETPREDICT_API_KEYS to keep one.
        key = secrets.token_urlsafe(24)
        os.environ[ENV_PREFIX + "API_KEYS"] = key
        _log(f"no JETPREDICT_API_KEYS set; writes accept this key for this run: X-API-Key: {key}")
    use_gunicorn = args.server == "gunicorn" or (args.server == "auto" and gunicorn_available())
    metrics_dir = None
    if use_gunicorn and settings.WORKERS > 1 and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        metrics_dir = tempfile.TemporaryDirectory(prefix="jetpredict-metrics-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir.name
    # Create the schema once here, before workers start, so they do not race to create it.
    from jetpredict.api.storage import Storage

    Storage(settings.database_url).create_schema()
    _log(f"listening on http://{settings.HOST}:{settings.PORT} "
         f"({'gunicorn, ' + str(settings.WORKERS) + ' workers' if use_gunicorn else 'Flask server'}); "
         f"database {settings.database_url.split('@')[-1]}")
    try:
        return run_gunicorn(settings) if use_gunicorn else _run_flask(settings)
    finally:
        if metrics_dir is not None:  # per-run metric files; gone with the server
            metrics_dir.cleanup()


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="run the HTTP service")
    p.add_argument("--host", default=None, help="default 127.0.0.1 (JETPREDICT_HOST)")
    p.add_argument("--port", type=int, default=None, help="default 8080 (JETPREDICT_PORT)")
    p.add_argument("--workers", type=int, default=None, help="gunicorn workers, default 2 (JETPREDICT_WORKERS)")
    p.add_argument("--threads", type=int, default=None, help="threads per worker, default 4 (JETPREDICT_THREADS)")
    p.add_argument("--data-dir", default=None, help="SQLite database directory, default ./data (JETPREDICT_DATA_DIR)")
    p.add_argument("--database-url", default=None,
                   help="SQLAlchemy URL, e.g. postgresql://... (JETPREDICT_DATABASE_URL); overrides --data-dir")
    p.add_argument("--max-body-bytes", type=int, default=None, help="request body limit (JETPREDICT_MAX_BODY_BYTES)")
    p.add_argument("--cors-origins", default=None, help="comma-separated allowed origins; default none = CORS off")
    p.add_argument("--server", choices=("auto", "gunicorn", "flask"), default="auto",
                   help="auto = gunicorn when installed, else Flask's threaded server")
    p.set_defaults(handler=_serve)

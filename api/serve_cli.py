"""CLI verb ``serve``: run the HTTP service under gunicorn when it is installed, Flask's server otherwise.

Settings come from flags, then ``JETPREDICT_*`` variables, then defaults (``api.config``'s ``DEFAULT_*``,
which ``serve --help`` states). Flags are exported as ``JETPREDICT_*`` so every worker process sees them.

Which server: gunicorn (the ``[server]`` extra, and the Docker image) when it imports, else Flask's
threaded development server (the plain ``pip install``: fine for one user and the page at ``/``); the
"listening on" line says which, and is printed only once the port is bound. A busy port fails at once.
"""

from __future__ import annotations

import argparse
import errno
import os
import secrets
import shutil
import socket
import sys
import tempfile
from pathlib import Path

from jetpredict.api.config import (
    DEFAULT_DATA_DIR,
    DEFAULT_HOST,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_PORT,
    DEFAULT_THREADS,
    DEFAULT_WORKERS,
    ENV_PREFIX,
    LARGEST_QUERY_ROUTE,
    MIN_BODY_BYTES,
    SQLITE_FILE_NAME,
    Settings,
    empty_api_key_entries,
    load_settings,
)
from jetpredict.models.errors import InputError, cli_flag

#: flag name -> setting name
_FLAGS = {"host": "HOST", "port": "PORT", "workers": "WORKERS", "threads": "THREADS", "data_dir": "DATA_DIR",
          "database_url": "DATABASE_URL", "max_body_bytes": "MAX_BODY_BYTES", "cors_origins": "CORS_ORIGINS"}


#: gunicorn kills and restarts a worker whose main loop is silent this long; under gthread a long request
#: runs in a thread and does not silence it, so only a hung worker is cut (s).
WORKER_SILENCE_TIMEOUT_S = 120
#: On SIGTERM, requests in flight get this long to finish before the workers are killed: ``docker stop``
#: sends SIGKILL 10 s after SIGTERM by default, so a longer grace would be cut short there anyway (s).
GRACEFUL_STOP_S = 10
#: An idle keep-alive connection is held this long for its next request: the page's requests come in
#: bursts (a load's predictions, then its recommendation), and an idle client holds no connection longer (s).
KEEPALIVE_S = 5
#: gunicorn's worker: gthread whose requests are read with a timeout (``api.gunicorn_worker``), named by its
#: path: gunicorn 22 takes no class object (its "Using worker" line fails on one).
TIMED_READ_WORKER = "jetpredict.api.gunicorn_worker.TimedReadWorker"


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


#: What ``serve`` says it runs, in its "listening on" line; the install hint only where gunicorn is missing.
FLASK_DESCRIPTION = "Flask server: Flask's threaded development server, one process"
GUNICORN_HINT = "; pip install 'jetpredict[server]' to serve with gunicorn"


def check_port(host: str, port: int) -> None:
    """Fail at once, in words (:class:`InputError`), when ``host:port`` cannot be bound (a busy port: another
    server runs).

    Without it gunicorn retries a busy port for 5 s and Flask's server exits with its own message.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as both servers bind
        try:
            probe.bind((host, port))
        except OSError as exc:
            # A setting to change, as every other refused setting: InputError (exit 2), not a failure (1).
            if exc.errno == errno.EADDRINUSE:
                raise InputError(f"cannot listen on {host}:{port}: the port is in use (another jetpredict "
                                 "serve?); stop it or choose another --port", "port") from None
            raise InputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; check --host and --port",
                             "port") from None


def run_gunicorn(settings, load=_create_app, on_ready=None) -> int:
    """Serve the WSGI app returned by ``load()`` under gunicorn with the service's settings.

    ``on_ready(url)`` is called once the listening socket is bound (gunicorn's ``when_ready``).
    """
    from gunicorn.app.base import BaseApplication

    def when_ready(server) -> None:
        if on_ready is not None and server.LISTENERS:
            host, port = server.LISTENERS[0].sock.getsockname()[:2]
            on_ready(f"http://{host}:{port}")

    def child_exit(_server, worker) -> None:
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            from prometheus_client import multiprocess

            multiprocess.mark_process_dead(worker.pid)

    class Server(BaseApplication):
        def load_config(self) -> None:
            options = {
                "bind": f"{settings.HOST}:{settings.PORT}", "workers": settings.WORKERS,
                # gthread, but a client that stalls its request head or body, or stops reading its answer, is
                # dropped after REQUEST_READ_TIMEOUT_S instead of holding a thread while its socket stays open.
                "worker_class": TIMED_READ_WORKER, "threads": settings.THREADS,
                "timeout": WORKER_SILENCE_TIMEOUT_S, "graceful_timeout": GRACEFUL_STOP_S, "keepalive": KEEPALIVE_S,
                "errorlog": "-", "loglevel": "info",
                "proc_name": "jetpredict", "child_exit": child_exit, "when_ready": when_ready,
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


def _run_flask(settings, on_ready=None) -> int:
    """Flask's threaded development server; ``on_ready(url)`` once the socket is bound."""
    from jetpredict.api.app import create_app
    from werkzeug.serving import WSGIRequestHandler, make_server

    class RequestHandler(WSGIRequestHandler):
        def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
            """No line of werkzeug's own: the app's access log (``ACCESS_LOG``) writes one per request."""

    server = make_server(settings.HOST, settings.PORT, create_app(), threaded=True,  # binds here
                         request_handler=RequestHandler)
    if on_ready is not None:
        on_ready(f"http://{settings.HOST}:{server.server_port}")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def flag_settings(args: argparse.Namespace) -> dict[str, object]:
    """The settings given as flags (setting name -> value), each checked by the settings' own rules; a bad
    one is an :class:`InputError` naming the flag the user typed (``--port``), not the variable
    (``JETPREDICT_PORT``) the message of :func:`load_settings` names."""
    overrides = {setting: getattr(args, flag) for flag, setting in _FLAGS.items()
                 if getattr(args, flag, None) is not None}
    try:
        load_settings(overrides, environ={})  # the flags alone: an error here is a flag's
    except InputError as exc:
        flag = next((f for f, setting in _FLAGS.items() if setting == exc.field), None)
        if flag is None:
            raise
        raise InputError(exc.message.replace(f"{ENV_PREFIX}{exc.field}", cli_flag(flag)), flag) from None
    return overrides


def body_limit_warning(max_body_bytes: int, from_flag: bool) -> str | None:
    """What ``serve`` warns when the body limit (bytes) is below :data:`MIN_BODY_BYTES`: valid requests
    would get 413. A lower limit is the operator's choice (e.g. a proxy's), so it is a warning, not an error."""
    if max_body_bytes >= MIN_BODY_BYTES:
        return None
    name = "--max-body-bytes" if from_flag else f"{ENV_PREFIX}MAX_BODY_BYTES"
    return (f"warning: {name}={max_body_bytes} is below {MIN_BODY_BYTES} bytes, the largest valid request "
            f"(POST {LARGEST_QUERY_ROUTE}, every field at its limit): valid requests larger than "
            f"{max_body_bytes} bytes get 413; the default is {DEFAULT_MAX_BODY_BYTES}")


def check_data_dir(settings: Settings, from_flag: bool) -> None:
    """Create the data directory (the SQLite file's, the answer cache's) or refuse it with an
    :class:`InputError` naming what gave it: a file there would fail later as a bare ``[Errno 17]``."""
    from_env = bool(os.environ.get(ENV_PREFIX + "DATA_DIR"))
    if settings.DATABASE_URL and not (from_flag or from_env):
        return  # a database elsewhere, and the default folder unasked for: nothing to create
    name = (cli_flag("data_dir") if from_flag else f"{ENV_PREFIX}DATA_DIR" if from_env
            else f"the default data directory (set --data-dir or {ENV_PREFIX}DATA_DIR)")
    path, field = Path(settings.DATA_DIR), "data_dir" if from_flag else "DATA_DIR"  # as flag_settings names them
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise InputError(f"{name} {path} is not a directory: give a folder (the SQLite database and the answer "
                         "cache live there)", field) from None
    except OSError as exc:
        raise InputError(f"{name} {path} cannot be created: {exc.strerror or exc}", field) from None
    if not settings.DATABASE_URL:
        problem = _unwritable_sqlite(path)
        if problem:
            raise InputError(f"{name} {path} is not writable by this process (uid {os.geteuid()}): {problem}; "
                             "make it writable (chown or chmod), or mount it read-only to serve the stored "
                             "workloads without uploads", field)


def _unwritable_sqlite(folder: Path) -> str | None:
    """What of the SQLite folder and its database this process may not write (modes, ownership), None when
    both are writable or the file system is read-only: there the file is served read-only, on purpose
    (``api.storage``). A folder it may not write fails on the lock file, a file on every connection."""
    if os.statvfs(folder).f_flag & os.ST_RDONLY:
        return None
    database = folder / SQLITE_FILE_NAME
    if database.exists() and not os.access(database, os.W_OK):
        return f"its database {database} is read-only to it"
    if not os.access(folder, os.W_OK | os.X_OK):
        exists = "its database" if database.exists() else "the database"
        return f"{exists} {database}, its lock file and its WAL cannot be made there"
    return None


#: gunicorn's ``Arbiter.APP_LOAD_ERROR``, the exit status of ``jetpredict.api.wsgi``'s refusals: a worker exiting
#: with it stops the master; any other status (SystemExit's 1 too) has it start a new worker, which fails alike.
APP_LOAD_ERROR_EXIT = 4


def check_start_settings(settings: Settings | None = None, data_dir_from_flag: bool = False) -> None:
    """Refuse (:class:`InputError`) what would fail the first request, before anything is set up: a database
    URL without a form or a driver, a data directory that cannot be made or written. ``settings`` default to
    the environment's (the WSGI entry point's)."""
    from jetpredict.api.database_url import checked_url

    settings = settings or load_settings()
    checked_url(settings.database_url)
    check_data_dir(settings, data_dir_from_flag)


def _serve(args: argparse.Namespace) -> int:
    overrides = flag_settings(args)
    settings = load_settings(overrides)  # InputError (exit 2) for a bad variable, named as the variable
    from jetpredict.api.database_url import masked_url

    check_start_settings(settings, "DATA_DIR" in overrides)
    for warning in (body_limit_warning(settings.MAX_BODY_BYTES, "MAX_BODY_BYTES" in overrides),
                    empty_api_key_entries(os.environ.get(ENV_PREFIX + "API_KEYS", ""))):
        if warning:
            _log(warning)
    for setting, value in overrides.items():
        os.environ[ENV_PREFIX + setting] = str(value)
    if not settings.API_KEYS:
        # A key for this run only, so uploads work out of the box; set JETPREDICT_API_KEYS to keep one.
        key = secrets.token_urlsafe(24)
        os.environ[ENV_PREFIX + "API_KEYS"] = key
        _log(f"no JETPREDICT_API_KEYS set; writes accept this key for this run: X-API-Key: {key}")
    use_gunicorn = args.server == "gunicorn" or (args.server == "auto" and gunicorn_available())
    workers_from = "--workers" if "WORKERS" in overrides else f"{ENV_PREFIX}WORKERS"
    if not use_gunicorn and settings.WORKERS > 1 and (workers_from == "--workers" or os.environ.get(workers_from)):
        why = "--server flask" if args.server == "flask" else GUNICORN_HINT.lstrip("; ")
        _log(f"warning: {workers_from} {settings.WORKERS} is ignored: Flask's server runs one process ({why}); "
             "serve with gunicorn for several")
    metrics_dir, master_pid = None, os.getpid()
    if use_gunicorn and settings.WORKERS > 1 and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        # Removed by the master alone: a worker exiting normally (gunicorn's HUP, TTOU) unwinds through this
        # function too, and a TemporaryDirectory's cleanup, forked into every worker, deleted the folder all of
        # them write, so every later worker answered 500.
        metrics_dir = tempfile.mkdtemp(prefix="jetpredict-metrics-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
    try:  # from here on, the metrics folder goes on every way out: a busy port or a store refused too
        # Create the schema once here, before workers start, so they do not race to create it.
        from jetpredict.api.errors import store_fault
        from jetpredict.api.storage import Storage
        from jetpredict.api.store_failures import is_unreachable

        storage = Storage(settings.database_url)
        try:
            storage.create_schema()
        except Exception as exc:
            fault = store_fault(exc, storage.location, storage.url)
            if fault is not None:  # a refused URL, a damaged file or a newer format: no wait fixes it, unlike an outage
                raise InputError(fault[0], "database_url") from None
            if not is_unreachable(exc):
                raise
            # An outage is not refused: create_app finds it too and says it once, with the masked URL.
        finally:
            storage.dispose()
        check_port(settings.HOST, settings.PORT)
        if use_gunicorn and settings.HEAVY_SLOTS + settings.HEAVY_QUEUE >= settings.THREADS:
            # Heavy requests running and waiting could take every thread of a worker: light ones would queue.
            _log(f"warning: HEAVY_SLOTS + HEAVY_QUEUE = {settings.HEAVY_SLOTS + settings.HEAVY_QUEUE} >= THREADS = "
                 f"{settings.THREADS}: heavy requests can take every thread of a worker; raise --threads or lower "
                 "JETPREDICT_HEAVY_QUEUE")
        what = (f"gunicorn, {settings.WORKERS} worker{'s' if settings.WORKERS != 1 else ''}" if use_gunicorn
                else FLASK_DESCRIPTION + ("" if gunicorn_available() else GUNICORN_HINT))

        def ready(url: str) -> None:  # said only once the port is bound
            _log(f"listening on {url} ({what}); database {masked_url(settings.database_url)}")  # passwords hidden

        return run_gunicorn(settings, on_ready=ready) if use_gunicorn else _run_flask(settings, on_ready=ready)
    finally:
        if metrics_dir is not None and os.getpid() == master_pid:  # per-run metric files; gone with the server
            shutil.rmtree(metrics_dir, ignore_errors=True)
            os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="run the HTTP service")
    p.add_argument("--host", default=None, help=f"default {DEFAULT_HOST} (JETPREDICT_HOST)")
    p.add_argument("--port", type=int, default=None, help=f"default {DEFAULT_PORT} (JETPREDICT_PORT)")
    p.add_argument("--workers", type=int, default=None,
                   help=f"gunicorn workers, default {DEFAULT_WORKERS} (JETPREDICT_WORKERS)")
    p.add_argument("--threads", type=int, default=None,
                   help=f"threads per worker, default {DEFAULT_THREADS} (JETPREDICT_THREADS)")
    p.add_argument("--data-dir", default=None,
                   help=f"SQLite database directory, default ./{DEFAULT_DATA_DIR} (JETPREDICT_DATA_DIR)")
    p.add_argument("--database-url", default=None,
                   help="SQLAlchemy URL, e.g. postgresql://... (JETPREDICT_DATABASE_URL); overrides --data-dir")
    p.add_argument("--max-body-bytes", type=int, default=None,
                   help=f"request body limit in bytes, default {DEFAULT_MAX_BODY_BYTES} (the largest valid request, "
                   "rounded up to a MiB); below that, valid requests get 413 (JETPREDICT_MAX_BODY_BYTES)")
    p.add_argument("--cors-origins", default=None,
                   help="comma-separated allowed origins; default none = CORS off (JETPREDICT_CORS_ORIGINS)")
    p.add_argument("--server", choices=("auto", "gunicorn", "flask"), default="auto",
                   help="auto = gunicorn when installed, else Flask's threaded server")
    p.set_defaults(handler=_serve)

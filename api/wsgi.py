"""WSGI entry point: ``gunicorn jetpredict.api.wsgi:app`` (settings from ``JETPREDICT_*``)."""

import sys

from jetpredict.api.app import create_app
from jetpredict.api.serve_cli import APP_LOAD_ERROR_EXIT, check_start_settings
from jetpredict.models.errors import InputError

try:  # what `jetpredict serve` refuses before it starts, refused here in its one line, not a traceback
    check_start_settings()
except InputError as exc:
    print(f"jetpredict.api.wsgi: error: {exc.message}", file=sys.stderr)
    raise SystemExit(APP_LOAD_ERROR_EXIT) from None
app = create_app()

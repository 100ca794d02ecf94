"""The Flask application factory: ``create_app(config)`` builds one service instance.

``config`` keys are the :class:`api.config.Settings` names (``DATA_DIR``, ``DATABASE_URL``,
``API_KEYS``, ...) or Flask settings (``TESTING``); anything not given comes from ``JETPREDICT_*``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from flask import Flask, Response, request
from flask_smorest import Api
from jetpredict.api.config import Settings, load_settings
from jetpredict.api.errors import ApiError, register_error_handlers
from jetpredict.api.metrics import Metrics
from jetpredict.api.routes import (
    devices,
    fleet_plans,
    health,
    predictions,
    profiles,
    recommendations,
    workloads,
)
from jetpredict.api.routes.common import API_KEY_HEADER, Services
from jetpredict.api.schemas import ErrorSchema
from jetpredict.api.storage import Storage
from jetpredict.api.workloads import WorkloadService

log = logging.getLogger("jetpredict.api")

BLUEPRINTS = (health.blp, devices.blp, predictions.blp, recommendations.blp, fleet_plans.blp,
              profiles.blp, workloads.blp)
_BODY_METHODS = ("POST", "PUT", "PATCH")
#: Longest path + query string in bytes (as nginx's default); gunicorn itself is told not to cut earlier,
#: so that the answer is our JSON error rather than the server's HTML page.
MAX_URL_BYTES = 8192
SWAGGER_UI_CDN = "https://cdn.jsdelivr.net/npm/swagger-ui-dist/"


class JetApi(Api):
    """flask-smorest's Api, documenting errors with our error schema."""

    ERROR_SCHEMA = ErrorSchema


def _openapi_config(settings: Settings) -> dict[str, object]:
    return {
        "API_TITLE": "jetpredict",
        "API_VERSION": "v1",
        "OPENAPI_VERSION": "3.0.3",
        "OPENAPI_URL_PREFIX": "/",
        "OPENAPI_JSON_PATH": "openapi.json",
        "OPENAPI_SWAGGER_UI_PATH": "docs",
        "OPENAPI_SWAGGER_UI_URL": SWAGGER_UI_CDN,
        "API_SPEC_OPTIONS": {
            "info": {"description": "Predict DNN training epoch time and energy on every Jetson power mode."},
            "servers": [{"url": "/"}],
        },
        "MAX_CONTENT_LENGTH": settings.MAX_BODY_BYTES,
    }


def _install_request_guards(app: Flask, settings: Settings) -> None:
    @app.before_request
    def _guards():
        if request.method == "OPTIONS" and settings.CORS_ORIGINS:
            return Response(status=204)
        url_bytes = len(request.path.encode()) + len(request.query_string)
        if url_bytes > MAX_URL_BYTES:
            raise ApiError(414, f"the URL is {url_bytes} bytes; the limit is {MAX_URL_BYTES}",
                           {"url": [f"must be at most {MAX_URL_BYTES} bytes"]})
        length = request.content_length
        if length is not None and length > settings.MAX_BODY_BYTES:
            raise ApiError(413, f"request body is {length} bytes; the limit is {settings.MAX_BODY_BYTES}",
                           {"body": [f"must be at most {settings.MAX_BODY_BYTES} bytes"]})
        is_json = request.mimetype == "application/json" or request.mimetype.endswith("+json")
        if request.method in _BODY_METHODS and request.url_rule is not None and not is_json:
            raise ApiError(415, f"Content-Type must be application/json, got {request.mimetype or 'none'}",
                           {"Content-Type": ["must be application/json"]})
        return None

    @app.after_request
    def _headers(response: Response) -> Response:
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        origin = request.headers.get("Origin")
        if origin and settings.CORS_ORIGINS and ("*" in settings.CORS_ORIGINS or origin in settings.CORS_ORIGINS):
            response.headers["Access-Control-Allow-Origin"] = "*" if "*" in settings.CORS_ORIGINS else origin
            response.headers["Access-Control-Allow-Headers"] = f"Content-Type, {API_KEY_HEADER}"
            response.headers["Access-Control-Allow-Methods"] = "GET, POST, DELETE, OPTIONS"
            response.headers.add("Vary", "Origin")
        return response


def _warm_up() -> None:
    """Import the predictor now (seconds, once per process) rather than in the first request."""
    try:
        import predictor.model  # noqa: F401
        import predictor.service  # noqa: F401
    except ImportError:  # pragma: no cover - a broken install shows up on the first prediction instead
        log.exception("predictor not importable")


def create_app(config: Mapping[str, object] | None = None) -> Flask:
    """A ready service: settings resolved, database schema created, blueprints registered."""
    config = dict(config or {})
    settings = load_settings(config)
    app = Flask("jetpredict")
    app.json.sort_keys = False  # keep the documented field order
    app.config.update(_openapi_config(settings))
    app.config.update({k: v for k, v in config.items() if k not in Settings.__dataclass_fields__})

    storage = Storage(settings.database_url)
    storage.create_schema()
    storage.dispose()  # no pooled connection may cross a fork (gunicorn preloads the app, then forks)
    _warm_up()
    metrics = Metrics()
    metrics.init_app(app)
    app.extensions["jetpredict"] = Services(settings, storage, WorkloadService(storage, settings.MODEL_CACHE_SIZE),
                                            metrics)

    api = JetApi(app)
    api.spec.components.security_scheme("ApiKeyAuth", {"type": "apiKey", "in": "header", "name": API_KEY_HEADER})
    for blp in BLUEPRINTS:
        api.register_blueprint(blp)
    _install_request_guards(app, settings)
    register_error_handlers(app)  # after Api(app), so these handlers replace flask-smorest's
    return app

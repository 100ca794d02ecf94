"""The mode-chooser page at ``/``, the interactive API docs at ``/docs``, and their static files.

Everything the browser loads ships inside the package (``api/static``): the page's own HTML, JS and CSS,
the vendored uPlot chart library and the vendored Swagger UI (``api/static/vendor``, each with its
licence). No HTML references an external host, so both pages work on a Jetson without internet, and no
HTML carries an inline script or style, so a strict Content-Security-Policy (``script-src 'self'``) holds.
The page reads only the public HTTP API (``/v1/...``, ``/openapi.json``); it has no private endpoint.

The page's script is native ES modules, one job each (``index.html`` loads ``page.js`` as a module; it
imports its siblings by relative path, with no version query; no bundler, no build step). Every file under
``/assets`` goes out ``no-cache`` with an ETag, so each page load revalidates each module (a 304 when
unchanged) and a new ``page.js`` never runs against a stale sibling from the browser's cache.
"""

from __future__ import annotations

from pathlib import Path

from flask import Blueprint, Response, send_from_directory

#: The static files (installed as package data of ``jetpredict.api``).
STATIC_DIR = Path(__file__).resolve().parent.parent / "static"
#: Versions of the vendored browser libraries (npm packages; see ``api/static/vendor/README.md``).
VENDORED = {"uplot": "1.6.32", "swagger-ui-dist": "5.35.0"}

#: /docs only: Swagger UI draws its icons as ``data:`` SVG images, which ``default-src 'self'`` (the
#: service-wide policy of api.app) blocks; nothing else is relaxed.
DOCS_CSP = ("default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; "
            "form-action 'self'")

blp = Blueprint("page", __name__, static_folder=str(STATIC_DIR), static_url_path="/assets")


def _html(name: str) -> Response:
    response = send_from_directory(STATIC_DIR, name, mimetype="text/html")
    response.headers["Cache-Control"] = "no-cache"
    return response


@blp.get("/")
def index() -> Response:
    """The mode-chooser page."""
    return _html("index.html")


@blp.get("/docs")
@blp.get("/docs/")
def docs() -> Response:
    """Swagger UI on ``/openapi.json``, served from the package."""
    response = _html("docs.html")
    response.headers["Content-Security-Policy"] = DOCS_CSP  # the app's after_request keeps a set header
    return response

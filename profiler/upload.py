"""``profile --upload URL``: the service client the profiler uploads with, and a check before profiling.

The service accepts writes with any key listed in ``JETPREDICT_API_KEYS`` (comma-separated, server side).
The profiler sends one key: ``JETPREDICT_API_KEY``, or, when only the service's variable is set (service
and profiler on one machine, as in the README's HTTP tour), the first key of ``JETPREDICT_API_KEYS``
(:func:`jetpredict.client.default_api_key`, the one definition). :func:`check_service` runs before any
mode is profiled, so a wrong URL or key fails in a second rather than after the whole campaign: it sends
``POST /v1/profiles`` with no rows, which the service answers with 401/403 for a bad key and with 422
(nothing stored) for a good one. :func:`upload_rows` posts the rows when profiling ends, retrying a lost
connection or a busy service under one ``Idempotency-Key``, so a retry stores the rows once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from jetpredict.models.errors import InputError

from jetpredict.client import (
    API_KEY_ENV,
    SERVICE_KEYS_ENV,
    Client,
    ConnectionFailed,
    Overloaded,
    ServiceError,
    Unauthorized,
    default_api_key,
)
from jetpredict.client import API_KEY_HEADER as KEY_HEADER

__all__ = ["API_KEY_ENV", "SERVICE_KEYS_ENV", "KEY_HEADER", "api_key", "check_service", "service_client",
           "upload_rows"]

CHECK_TIMEOUT_S = 10.0
UPLOAD_TIMEOUT_S = 30.0
#: The check fails fast (one retry); the upload of a finished campaign tries harder.
CHECK_RETRIES = 1
UPLOAD_RETRIES = 3

#: The key to send: ``$JETPREDICT_API_KEY``, else the first of ``$JETPREDICT_API_KEYS``, else None.
api_key = default_api_key


def service_client(url: str, timeout_s: float, retries: int, when: str) -> Client:
    """A :class:`Client` of the service at ``url`` with the profiler's key; InputError naming ``upload``
    when ``url`` is not an http(s) URL or no key is set (``when`` ends that message)."""
    if not url.startswith(("http://", "https://")):
        raise InputError(f"--upload {url!r} must be an http:// or https:// service URL", "upload")
    key = api_key()
    if not key:
        raise InputError(f"--upload needs the service's API key in ${API_KEY_ENV} (or ${SERVICE_KEYS_ENV} "
                         f"when the service runs here); {when}", "upload")
    try:
        return Client(url, api_key=key, timeout_s=timeout_s, retries=retries)
    except ValueError as exc:
        raise InputError(f"--upload {url!r}: {exc}", "upload") from None


def check_service(url: str, timeout_s: float = CHECK_TIMEOUT_S) -> None:
    """Raise InputError naming ``upload`` unless the service at ``url`` answers and accepts our key."""
    client = service_client(url, timeout_s, CHECK_RETRIES, "checked before profiling, nothing was run")
    try:
        client.upload_profiles([])
    except Unauthorized as exc:
        raise InputError(f"--upload: {url} refused the key from ${API_KEY_ENV} ({exc.status}): {exc.message}; "
                         "nothing was profiled", "upload") from None
    except ConnectionFailed as exc:
        raise InputError(f"--upload: cannot reach {url}: {exc.message}; nothing was profiled (start the "
                         "service, or fix the URL)", "upload") from None
    except Overloaded as exc:
        raise InputError(f"--upload: {url} cannot take uploads now ({exc}); nothing was profiled", "upload"
                         ) from None
    except ServiceError as exc:
        if exc.status == 422:  # an empty upload is always invalid: the service is there, and took the key
            return
        raise InputError(f"--upload: {client.url('/v1/profiles')} answered {exc.status} to a key check; is "
                         f"{url} a jetpredict service?", "upload") from None
    raise InputError(f"--upload: {client.url('/v1/profiles')} accepted an empty upload; is {url} a "
                     "jetpredict service?", "upload")


def upload_rows(url: str, rows: Sequence[Mapping[str, Any]], timeout_s: float = UPLOAD_TIMEOUT_S
                ) -> dict[str, Any]:
    """``POST URL/v1/profiles`` ``{"rows": [...]}`` with the profiler's key; the service's answer.

    InputError naming ``upload`` when it fails (the rows are in the campaign's output files already).
    """
    client = service_client(url, timeout_s, UPLOAD_RETRIES, "the rows are kept in the output files")
    try:
        return client.upload_profiles(rows)
    except ConnectionFailed as exc:
        raise InputError(f"--upload: cannot reach {url}: {exc.message} (rows are kept in the output files)",
                         "upload") from None
    except ServiceError as exc:
        raise InputError(f"--upload: {url} answered {exc.status}: {exc.detail} (rows are kept in the "
                         "output files)", "upload") from None


"""``profile --upload URL``: which API key the profiler sends, and a check of the service before profiling.

The service accepts writes with any key listed in ``JETPREDICT_API_KEYS`` (comma-separated, server side).
The profiler sends one key: ``JETPREDICT_API_KEY``, or, when only the service's variable is set (service
and profiler on one machine, as in the README's HTTP tour), the first key of ``JETPREDICT_API_KEYS``.
:func:`check_service` runs before any mode is profiled, so a wrong URL or key fails in a second rather
than after the whole campaign: it sends ``POST /v1/profiles`` with no rows, which the service answers
with 401/403 for a bad key and with 422 (nothing stored) for a good one.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request

from jetpredict.models.errors import InputError

#: The key the profiler sends (one key).
API_KEY_ENV = "JETPREDICT_API_KEY"
#: The service's list of accepted keys; its first key is used when API_KEY_ENV is not set.
SERVICE_KEYS_ENV = "JETPREDICT_API_KEYS"
KEY_HEADER = "X-API-Key"
CHECK_TIMEOUT_S = 10.0


def api_key() -> str | None:
    """The key to send: ``$JETPREDICT_API_KEY``, else the first of ``$JETPREDICT_API_KEYS``, else None."""
    key = os.environ.get(API_KEY_ENV, "").strip()
    if key:
        return key
    listed = [k.strip() for k in os.environ.get(SERVICE_KEYS_ENV, "").split(",") if k.strip()]
    return listed[0] if listed else None


def profiles_url(url: str) -> str:
    """``URL/v1/profiles``; InputError unless ``url`` is an http(s) URL."""
    if not url.startswith(("http://", "https://")):
        raise InputError(f"--upload {url!r} must be an http:// or https:// service URL", "upload")
    return url.rstrip("/") + "/v1/profiles"


def check_service(url: str, timeout_s: float = CHECK_TIMEOUT_S) -> None:
    """Raise InputError naming ``upload`` unless the service at ``url`` answers and accepts our key."""
    target = profiles_url(url)
    key = api_key()
    if not key:
        raise InputError(f"--upload needs the service's API key in ${API_KEY_ENV} (or ${SERVICE_KEYS_ENV} "
                         "when the service runs here); checked before profiling, nothing was run", "upload")
    request = urllib.request.Request(target, data=json.dumps({"rows": []}).encode(), method="POST",
                                     headers={"Content-Type": "application/json", KEY_HEADER: key})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            status = response.status
    except urllib.error.HTTPError as exc:
        status = exc.code
        if status in (401, 403):
            detail = exc.read().decode(errors="replace")[:300]
            raise InputError(f"--upload: {url} refused the key from ${API_KEY_ENV} ({status}): {detail}; "
                             "nothing was profiled", "upload") from None
    except (urllib.error.URLError, OSError) as exc:
        raise InputError(f"--upload: cannot reach {url}: {getattr(exc, 'reason', exc)}; nothing was profiled "
                         "(start the service, or fix the URL)", "upload") from None
    if status != 422:  # an empty upload is always invalid: anything else is not a jetpredict service
        raise InputError(f"--upload: {target} answered {status} to a key check; is {url} a jetpredict "
                         "service?", "upload")

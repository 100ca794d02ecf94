# syntax=docker/dockerfile:1
# The jetpredict prediction service: Flask app under gunicorn, bundled device catalogue and fitted models
# inside the installed package, no PyTorch (the profiler runs on the Jetson, not here).
#   docker build -t jetpredict .
#   docker run -p 8080:8080 -e JETPREDICT_API_KEYS=change-me jetpredict

FROM python:3.11-slim AS build
WORKDIR /src
COPY . .
# Only our own wheel is built here; its dependencies come from PyPI in the runtime stage.
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    JETPREDICT_HOST=0.0.0.0 \
    JETPREDICT_PORT=8080 \
    JETPREDICT_DATA_DIR=/var/lib/jetpredict/data

# [server] adds gunicorn, [postgres] the PostgreSQL driver (JETPREDICT_DATABASE_URL=postgresql://...),
# [arrow] the Arrow answers and the fast writer of large CSV answers, [redis] the client of a shared
# rate-limit store (JETPREDICT_RATE_LIMIT_STORAGE_URL=redis://...); the [profiler] extra (torch) is
# deliberately left out.
COPY --from=build /wheels /tmp/wheels
# Install the wheel by path (not by name) so PyPI can never substitute another "jetpredict".
RUN wheel="$(ls /tmp/wheels/jetpredict-*.whl)" \
    && pip install --no-cache-dir "${wheel}[server,postgres,arrow,redis]" \
    && rm -rf /tmp/wheels \
    && python -c "import jetpredict.models.catalogue as c; assert len(c.list_devices()) == 6" \
    && python -c "import psycopg, gunicorn, flask_limiter, redis" \
    && ! python -c "import torch" 2>/dev/null

RUN groupadd --system --gid 10001 jetpredict \
    && useradd --system --uid 10001 --gid jetpredict --home-dir /var/lib/jetpredict --create-home \
       --shell /usr/sbin/nologin jetpredict
USER jetpredict:jetpredict
WORKDIR /var/lib/jetpredict
VOLUME ["/var/lib/jetpredict"]

EXPOSE 8080
# slim has no curl: probe with the interpreter that is already there; any non-2xx answer exits 1.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('JETPREDICT_PORT', '8080') + '/healthz', timeout=4)"]

CMD ["jetpredict", "serve"]

"""Heavy work kept apart from light work: a bounded gate with admission control, and a cache of answers.

Heavy requests (fits of inline rows, answers for every mode of a device, long mode lists, large fleet plans,
and recommendations and fleet plans that need a device's every-mode prediction not yet computed:
:func:`predictor.space.space_ready`) cost tens to hundreds of CPU-milliseconds; light ones (the catalogue, presets of a stored workload) cost about one.
Without a bound, a few clients looping heavy requests take every server thread and the GIL, and light
answers wait behind them. :class:`HeavyGate` lets ``slots`` heavy computations run at once per process and
``queue`` more wait; any further heavy request is answered at once with 503 and ``Retry-After`` (never
queued without bound), so the remaining threads stay free for light requests. The work itself runs on
``slots`` threads whose OS priority is lowered (Linux: per thread), so under CPU contention the scheduler
runs light request threads first.

:class:`AnswerCache` keeps the encoded bytes of heavy answers (per fitted model object, device, modes,
epochs, confidence, format and encoding; bounded in bytes), so a repeated heavy answer is a copy. It is
kept in memory per process and, under ``DATA_DIR/answers``, on disk for every worker of the host.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import shutil
import sys
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from jetpredict.api.errors import ApiError
from jetpredict.api.query_schemas import PredictionResponseSchema
from jetpredict.predictor.service import PROVENANCE_COLUMNS, ROW_COLUMNS
from marshmallow import Schema, fields

log = logging.getLogger("jetpredict.api")

#: Free bytes the answer cache always leaves on the disk of DATA_DIR (the database may live there).
DISK_RESERVE_BYTES = 256 * 1024 * 1024
#: Weight of the latest heavy computation in the running mean that sets Retry-After.
_EWMA_WEIGHT = 0.2
#: Niceness added to the heavy-work threads (0..19): under CPU contention the OS runs request threads first.
HEAVY_NICE = 10
T = TypeVar("T")


def _jetpredict_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("jetpredict")
    except PackageNotFoundError:  # pragma: no cover - a bare checkout
        return "unknown"


#: Part of every shared answer's key: another release may predict or encode differently.
_VERSION = _jetpredict_version()


def _shape(schema: Schema) -> list[list[object]]:
    """``schema``'s fields by name: [name as sent, required, nullable, the nested rows' fields or None]."""
    shape: list[list[object]] = []
    for name, field in sorted(schema.fields.items()):
        inner = field.inner if isinstance(field, fields.List) else field
        nested = _shape(inner.schema) if isinstance(inner, fields.Nested) else None
        shape.append([field.data_key or name, field.required, field.allow_none, nested])
    return shape


def answer_shape_hash(schema: type[Schema] = PredictionResponseSchema,
                  columns: Sequence[str] = (*ROW_COLUMNS, *PROVENANCE_COLUMNS)) -> str:
    """A short hash of what shapes a cached answer: its schema's fields (and its rows') and the table columns
    in output order (``PROVENANCE_COLUMNS`` holds ``PROVENANCE_FIELDS``). A field added to answers changes it."""
    return hashlib.sha256(json.dumps([_shape(schema()), list(columns)]).encode()).hexdigest()[:16]


#: Part of every shared answer's key: the package version stays put when a field is added to answers, and the
#: model version too (``split_source`` was), so the answers' own shape misses entries written without it.
ANSWER_SHAPE = answer_shape_hash()


def _lower_this_thread(nice: int) -> None:
    """Give the calling thread ``nice`` more niceness (Linux: per thread), so the OS runs light request
    threads first when the cores are busy. Elsewhere, or when refused, the thread keeps its priority."""
    if nice <= 0 or not sys.platform.startswith("linux"):
        return
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + nice))
    except OSError:  # pragma: no cover - a sandbox that forbids it: same priority as light work
        pass


class HeavyGate:
    """At most ``slots`` heavy computations at once, ``queue`` more waiting up to ``wait_s`` (s) each.

    :meth:`run` executes the work on ``slots`` threads of its own whose OS priority is lowered by ``nice``
    (the request thread waits for it without holding the GIL), so light requests are scheduled first.
    """

    def __init__(self, slots: int, queue: int, wait_s: float, on_reject: Callable[[str], None] | None = None,
                 nice: int = HEAVY_NICE) -> None:
        self.slots, self.queue, self.wait_s, self.nice = slots, queue, wait_s, nice
        self._semaphore = threading.BoundedSemaphore(slots)
        self._lock = threading.Lock()
        self._admitted = 0  # running + waiting
        self._mean_s = 0.5  # running mean duration of one heavy computation (s)
        self._on_reject = on_reject
        self._pool: ThreadPoolExecutor | None = None
        self._pool_pid = 0

    def _executor(self) -> ThreadPoolExecutor:
        # Made on first use in each process: threads do not survive gunicorn's fork of the preloaded app.
        with self._lock:
            if self._pool is None or self._pool_pid != os.getpid():
                self._pool = ThreadPoolExecutor(self.slots, thread_name_prefix="jetpredict-heavy",
                                                initializer=_lower_this_thread, initargs=(self.nice,))
                self._pool_pid = os.getpid()
            return self._pool

    def run(self, what: str, work: Callable[[], T]) -> T:
        """``work()`` as heavy work on the low-priority threads; 503 (Retry-After) when the gate is full.
        ``work`` must not need the Flask request context (read what it needs from the request first)."""
        with self.admit(what):
            return self._executor().submit(work).result()

    def retry_after_s(self) -> int:
        """Whole seconds a rejected client should wait: the admitted work drained at the mean pace."""
        with self._lock:
            return max(1, math.ceil(self._mean_s * (self._admitted + 1) / self.slots))

    def _busy(self, what: str) -> ApiError:
        if self._on_reject is not None:
            self._on_reject(what)
        retry = self.retry_after_s()
        return ApiError(503, f"the service is busy with other heavy requests ({what}); retry in {retry} s",
                        {"service": [f"busy: at most {self.slots} heavy request(s) run and {self.queue} wait "
                                     "per process"]},
                        headers={"Retry-After": str(retry)})

    @contextmanager
    def admit(self, what: str) -> Iterator[None]:
        """Run the block as heavy work, or raise 503 (``Retry-After``) when the gate and its queue are full."""
        with self._lock:
            if self._admitted >= self.slots + self.queue:
                full = True
            else:
                full = False
                self._admitted += 1
        if full:
            raise self._busy(what)
        try:
            if not self._semaphore.acquire(timeout=self.wait_s):
                raise self._busy(what)
            start = time.perf_counter()
            try:
                yield
            finally:
                self._semaphore.release()
                elapsed = time.perf_counter() - start
                with self._lock:
                    self._mean_s += _EWMA_WEIGHT * (elapsed - self._mean_s)
        finally:
            with self._lock:
                self._admitted -= 1


@dataclass(frozen=True)
class Encoded:
    """An answer ready to send: the body bytes, its media type, content encoding ("" = identity), and
    how many predictions it holds."""

    body: bytes
    mimetype: str
    encoding: str = ""
    count: int = 0  # predictions (modes) in it, for the metrics


class AnswerCache:
    """Encoded answers per (model object, key), least recently used first out, at most ``max_bytes``.

    The model object is part of the key through a weak reference: a refit (a new object) never sees an
    old answer, and an entry whose model was dropped is a miss. With a ``directory``, answers are also
    kept there (at most ``disk_bytes``) under a key that names the model by its content (the jetpredict
    and model versions, a SHA-256 of its training rows), so every worker process of the host reads an
    answer that one of them computed. The disk is an optimisation: any failure there is a miss.
    """

    def __init__(self, max_bytes: int, directory: Path | None = None, disk_bytes: int = 0) -> None:
        self.max_bytes = max_bytes
        self.directory = directory if directory is not None and disk_bytes > 0 else None
        self.disk_bytes = disk_bytes
        self._entries: OrderedDict[tuple[int, Hashable], tuple[weakref.ref, Encoded]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._fingerprints: weakref.WeakKeyDictionary[object, str] = weakref.WeakKeyDictionary()

    def _remember(self, model: object, key: Hashable, value: Encoded) -> None:
        if len(value.body) > self.max_bytes:
            return
        with self._lock:
            old = self._entries.pop((id(model), key), None)
            if old is not None:
                self._bytes -= len(old[1].body)
            self._entries[(id(model), key)] = (weakref.ref(model), value)
            self._bytes += len(value.body)
            while self._bytes > self.max_bytes and self._entries:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._bytes -= len(dropped.body)

    def _path(self, model: object, key: Hashable) -> Path | None:
        """The file of ``(model, key)`` in the shared directory (None: no directory, or no content key)."""
        if self.directory is None:
            return None
        with self._lock:
            fingerprint = self._fingerprints.get(model)
        if fingerprint is None:
            rows = getattr(model, "training_rows", None)
            if rows is None:
                return None
            fingerprint = hashlib.sha256(json.dumps(list(rows), sort_keys=True, default=str).encode()).hexdigest()
            with self._lock:
                self._fingerprints[model] = fingerprint
        name = json.dumps([_VERSION, ANSWER_SHAPE, str(getattr(model, "model_version", "")), fingerprint, repr(key)])
        return self.directory / hashlib.sha256(name.encode()).hexdigest()

    def get(self, model: object, key: Hashable) -> Encoded | None:
        with self._lock:
            hit = self._entries.get((id(model), key))
            if hit is not None and hit[0]() is model:
                self._entries.move_to_end((id(model), key))
                return hit[1]
        path = self._path(model, key)
        if path is None:
            return None
        try:
            raw = path.read_bytes()
            head, _, body = raw.partition(b"\n")
            meta = json.loads(head)
            value = Encoded(body, str(meta["mimetype"]), str(meta["encoding"]), int(meta["count"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None  # absent, half-written by a crashed process, or not ours: computed again
        if len(value.body) != meta.get("bytes"):
            return None
        self._remember(model, key, value)
        return value

    def put(self, model: object, key: Hashable, value: Encoded) -> None:
        self._remember(model, key, value)
        path = self._path(model, key)
        if path is None or len(value.body) > self.disk_bytes:
            return
        meta = json.dumps({"mimetype": value.mimetype, "encoding": value.encoding, "count": value.count,
                           "bytes": len(value.body)}).encode()
        # Written aside, then renamed: a reader sees the whole answer or none.
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if shutil.disk_usage(path.parent).free - len(value.body) < DISK_RESERVE_BYTES:
                return  # the store shares this disk: answers never take its last free space
            tmp.write_bytes(meta + b"\n" + value.body)
            os.replace(tmp, path)
            self._trim_disk()
        except OSError as exc:  # a full or read-only disk: memory only
            log.info("answer cache: not written to %s (%s)", self.directory, exc.strerror or exc)
            with contextlib.suppress(OSError):
                tmp.unlink()

    def _trim_disk(self) -> None:
        """Oldest answers out until the directory holds at most ``disk_bytes``."""
        assert self.directory is not None
        files = []
        for entry in os.scandir(self.directory):
            with contextlib.suppress(OSError):
                if entry.is_file() and not entry.name.startswith("."):
                    st = entry.stat()
                    files.append((st.st_mtime, st.st_size, entry.path))
        total = sum(size for _, size, _ in files)
        for _, size, path in sorted(files):
            if total <= self.disk_bytes:
                break
            with contextlib.suppress(OSError):
                os.unlink(path)
                total -= size

    @property
    def size_bytes(self) -> int:
        return self._bytes

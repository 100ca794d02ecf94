"""The answer cache's files under DATA_DIR/answers (:class:`api.heavy.AnswerCache`), read by a second cache
as another worker of the host would: a file cut short is a miss, the disk's reserve is kept, the oldest
answers go first when the directory is full, and neither a model of another version nor a release whose answers
hold other fields reads an answer of this one. In memory, a model at a dropped one's address reads none of its
answers."""

from __future__ import annotations

import builtins
import dataclasses
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from api_fixtures import published_rows
from jetpredict.api import heavy
from jetpredict.api.heavy import DISK_RESERVE_BYTES, AnswerCache, Encoded
from jetpredict.api.query_schemas import PredictionResponseSchema, PredictionSchema
from jetpredict.models.profile_rows import validate_records
from jetpredict.predictor.bundled import fit_workload
from marshmallow import fields

KEY = ("agx-xavier", "all", "columns")
#: Room on disk for many answers of :func:`_answer`'s size.
DISK_BYTES = 1024 * 1024


@pytest.fixture(scope="module")
def model():
    """A real fitted model of the four published ResNet-18 rows the ``stored`` fixture uploads."""
    return fit_workload(validate_records(published_rows()))


def _answer(fill: bytes = b"a", body_bytes: int = 1000) -> Encoded:
    return Encoded(fill * body_bytes, "application/json", "", 29232)


def _files(directory: Path) -> list[Path]:
    return sorted(directory.iterdir()) if directory.exists() else []


def _other_worker(directory: Path) -> AnswerCache:
    """A cache with an empty memory on the same directory: it can only answer from the files."""
    return AnswerCache(DISK_BYTES, directory, DISK_BYTES)


def test_a_file_cut_short_is_a_miss(tmp_path, model):
    directory = tmp_path / "answers"
    AnswerCache(DISK_BYTES, directory, DISK_BYTES).put(model, KEY, _answer())
    (path,) = _files(directory)
    assert _other_worker(directory).get(model, KEY) == _answer()  # whole, it is served
    whole = path.read_bytes()
    path.write_bytes(whole[:-40])  # the header is intact; the body lacks its last 40 bytes
    assert _other_worker(directory).get(model, KEY) is None


def _free_bytes(monkeypatch, free: int) -> None:
    """The disk of the cache's directory reports ``free`` bytes free."""
    monkeypatch.setattr(heavy.shutil, "disk_usage", lambda path: SimpleNamespace(total=free, used=0, free=free))


def test_an_answer_is_not_written_into_the_disks_reserve(tmp_path, model, monkeypatch):
    answer = _answer()
    directory = tmp_path / "answers"
    _free_bytes(monkeypatch, 1024)
    cache = AnswerCache(DISK_BYTES, directory, DISK_BYTES)
    cache.put(model, KEY, answer)
    assert _files(directory) == [] and cache.get(model, KEY) == answer  # kept in memory only
    _free_bytes(monkeypatch, DISK_RESERVE_BYTES + len(answer.body))  # the reserve stays free after it
    AnswerCache(DISK_BYTES, directory, DISK_BYTES).put(model, KEY, answer)
    assert len(_files(directory)) == 1 and _other_worker(directory).get(model, KEY) == answer


def test_a_full_directory_keeps_the_newest_answers(tmp_path, model):
    directory = tmp_path / "answers"
    answers = [_answer(fill) for fill in (b"a", b"b", b"c", b"d", b"e", b"f")]
    probe = AnswerCache(DISK_BYTES, tmp_path / "probe", DISK_BYTES)
    probe.put(model, KEY, answers[0])
    (one,) = _files(tmp_path / "probe")
    cache = AnswerCache(DISK_BYTES, directory, one.stat().st_size)  # room for one answer's file
    keys = [(*KEY, i) for i in range(len(answers))]
    for i, (key, answer) in enumerate(zip(keys, answers, strict=True)):
        # Each earlier answer an hour older: a filesystem's coarse clock may give answers written at once
        # one time, which this test is not about.
        for path in _files(directory):
            stat = path.stat()
            os.utime(path, (stat.st_atime - 3600, stat.st_mtime - 3600))
        cache.put(model, key, answer)
        reader = _other_worker(directory)
        # Five trims: the newest is kept whichever way the files' names sort against each other.
        assert len(_files(directory)) == 1 and reader.get(model, key) == answer, i
        assert i == 0 or reader.get(model, keys[i - 1]) is None, i


def test_a_model_of_another_version_with_the_same_rows_misses(tmp_path, model):
    directory = tmp_path / "answers"
    AnswerCache(DISK_BYTES, directory, DISK_BYTES).put(model, KEY, _answer())
    same = dataclasses.replace(model)  # another object of this version and rows: a worker's own fit
    assert same is not model and _other_worker(directory).get(same, KEY) == _answer()
    other = dataclasses.replace(model, model_version=f"{model.model_version}-next")
    assert other.training_rows == model.training_rows
    assert _other_worker(directory).get(other, KEY) is None


def test_an_answer_of_another_answer_shape_with_the_same_model_misses(tmp_path, model, monkeypatch):
    """An answer written before a field was added to answers (as ``split_source`` was, the model version
    unchanged) is not served after the upgrade; one of this format is."""
    directory = tmp_path / "answers"
    AnswerCache(DISK_BYTES, directory, DISK_BYTES).put(model, KEY, _answer(b"n"))
    monkeypatch.setattr(heavy, "ANSWER_SHAPE", "the format before a field was added")
    AnswerCache(DISK_BYTES, directory, DISK_BYTES).put(model, KEY, _answer(b"o"))
    assert _other_worker(directory).get(model, KEY) == _answer(b"o")  # the older release reads its own
    monkeypatch.undo()
    assert heavy.ANSWER_SHAPE != "the format before a field was added"
    assert _other_worker(directory).get(model, KEY) == _answer(b"n")  # this release reads only its own


def test_the_answer_shape_follows_the_fields_and_columns_of_an_answer():
    """The format is derived from the answer's schema and columns, so a field added to an answer, or to its
    rows, or made required, changes it without a constant to bump; the same answer keeps it."""

    class WithAField(PredictionResponseSchema):
        added_s = fields.Float(required=True)

    class RowWithAField(PredictionSchema):
        added_s = fields.Float()

    class WithARowField(PredictionResponseSchema):
        predictions = fields.List(fields.Nested(RowWithAField))

    class Required(PredictionResponseSchema):
        epochs = fields.Integer(required=True)

    now = heavy.answer_shape_hash()
    assert now == heavy.ANSWER_SHAPE == heavy.answer_shape_hash(PredictionResponseSchema)
    formats = {heavy.answer_shape_hash(schema) for schema in (WithAField, WithARowField, Required)}
    assert now not in formats and len(formats) == 3
    assert heavy.answer_shape_hash(columns=("mode", "epoch_time_s")) != heavy.answer_shape_hash(columns=("epoch_time_s", "mode"))


def test_a_model_at_the_address_of_a_dropped_one_does_not_read_its_answer(model, monkeypatch):
    """Answers in memory are keyed by the model's id(); CPython gives a freed object's address to the next
    one of its size, so an entry whose model was dropped must miss for the new model there (another fit).
    Every model here has one id, so the address comes round every run, not only when the allocator gives it
    back (under a profiler it did not, within 1,000 new models)."""
    model_type = type(model)
    monkeypatch.setattr(heavy, "id", lambda obj: 1 if isinstance(obj, model_type) else builtins.id(obj),
                        raising=False)
    cache = AnswerCache(DISK_BYTES)  # memory only: no content key on disk
    dropped = dataclasses.replace(model)
    cache.put(dropped, KEY, _answer())
    assert cache.get(dropped, KEY) is not None  # the one id keys answers as the address does
    del dropped
    assert cache.get(dataclasses.replace(model), KEY) is None
    held = dataclasses.replace(model)
    cache.put(held, KEY, _answer(b"h"))
    assert cache.get(dataclasses.replace(model), KEY) is None  # alive at the same id: another model's answer
    assert cache.get(held, KEY).body == _answer(b"h").body

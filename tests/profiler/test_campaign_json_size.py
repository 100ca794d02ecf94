"""``profile --out FILE.json`` writes a document its readers take (``models.profile_files``: at most
``MAX_FILE_BYTES``): every minibatch as columns, compact; a campaign whose minibatches alone would pass the
limit is refused before any mode runs, and one whose power samples would is stopped before the mode that would
take it past, keeping the modes measured before (an audit's 27 modes x 10,000 minibatches wrote 71.8 MB that
``fit`` refused)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from jetpredict.models import profile_files
from jetpredict.models.errors import InputError
from jetpredict.models.profile_files import read_profile_rows
from jetpredict.models.reader_limits import MAX_FILE_BYTES
from jetpredict.profiler import campaign
from jetpredict.profiler.campaign import CampaignConfig, run_campaign
from jetpredict.profiler.runner import RunSettings

from jetpredict.cli import main


def _cfg(tmp_path: Path, name: str = "p.json", **kw) -> CampaignConfig:
    base = dict(device="sim:agx-xavier", workload="resnet18-cifar10", out=tmp_path / name,
                modes="MAXN,MODE_10W", warmup=4, minibatches=200, progress=False)
    return CampaignConfig(**{**base, **kw})


def _numbers(doc: dict) -> int:
    """The numbers of the document's minibatch columns and power samples."""
    count = 0
    for mode in doc["modes"]:
        count += sum(len(v) for part in ("warmup", "minibatches") for v in mode[part].values())
        for trace in (mode["power"], mode["cpu_power"]):
            if trace is not None:
                count += sum(len(trace[k] or []) for k in ("times_s", "power_w", "energy_counter_j"))
    return count


def test_every_minibatch_is_kept_as_columns_in_a_compact_document(tmp_path):
    rows = run_campaign(_cfg(tmp_path))
    raw = (tmp_path / "p.json").read_bytes()
    doc = json.loads(raw)
    assert doc["format"] == campaign.JSON_FORMAT and len(doc["modes"]) == len(rows) == 2
    for row, mode in zip(rows, doc["modes"], strict=True):
        for part, count in (("warmup", 4), ("minibatches", 200)):
            assert list(mode[part]) == list(campaign.TIMING_FIELDS) == [
                "stall_s", "compute_s", "total_s", "start_s", "end_s"]
            assert all(len(column) == count for column in mode[part].values())
        mb = mode["minibatches"]
        assert statistics.fmean(mb["total_s"]) == pytest.approx(row["mb_total_s_mean"], rel=1e-12)
        assert all(0 <= s < e for s, e in zip(mb["start_s"], mb["end_s"], strict=True))
        assert mb["start_s"] == sorted(mb["start_s"]) and mode["warmup"]["end_s"][-1] <= mb["start_s"][0]
    assert b"\n" not in raw.rstrip(b"\n")  # no indentation: a minibatch costs its five numbers
    # The bound the campaign refuses by holds: every number within JSON_NUMBER_BYTES, a mode's record within
    # MODE_RECORD_BYTES.
    assert len(raw) <= _numbers(doc) * profile_files.JSON_NUMBER_BYTES + 2 * campaign.MODE_RECORD_BYTES
    assert len(read_profile_rows(tmp_path / "p.json")) == 2


def test_a_json_out_its_minibatches_would_take_past_the_readers_limit_is_refused_up_front(
        tmp_path, measured, capsys):
    """27 modes x (10,000 warm-up + 10,000 measured) minibatches: at least 2.7 million five-number records."""
    modes = tmp_path / "modes.csv"
    modes.write_text("mode,cpu_cores,cpu_mhz,gpu_mhz,emc_mhz\n" + "MAXN,8,2265.6,1377,2133\n" * 27)
    out = tmp_path / "new" / "p.json"
    args = ["profile", "--device", "sim:agx-xavier", "--workload", "resnet18-cifar10", "--modes", str(modes),
            "--warmup", "10000", "--minibatches", "10000", "--no-progress", "--out", str(out)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"--out {out}" in err and "--minibatches 10000" in err and f"{MAX_FILE_BYTES:,} bytes" in err
    assert "--out FILE.csv" in err and "sidecar FILE.csv.json" in err
    assert measured == [] and not out.parent.exists()  # nothing switched, measured or created


def test_a_csv_out_keeps_every_minibatch_in_its_sidecar_whatever_its_size(tmp_path, measured, monkeypatch):
    monkeypatch.setattr(profile_files, "MAX_FILE_BYTES", 1000)
    run_campaign(_cfg(tmp_path, name="p.csv"))
    sidecar = tmp_path / "p.csv.json"
    assert measured == ["MAXN", "MODE_10W"] and sidecar.stat().st_size > 1000
    assert len(json.loads(sidecar.read_text())["modes"][1]["minibatches"]["total_s"]) == 200


def _one_mode_bytes(tmp_path: Path, mode: str = "MAXN", **kw) -> int:
    run_campaign(_cfg(tmp_path, name=f"{mode}.json", modes=mode, **kw))
    return (tmp_path / f"{mode}.json").stat().st_size


def test_a_campaign_stops_before_a_mode_that_would_take_the_json_past_the_limit(tmp_path, measured, monkeypatch):
    """Power samples grow with a mode's time (here 600 s of settling at 10 Hz), unknown before it runs: after
    the first mode the campaign sees that a second as large would not fit, and stops before measuring it."""
    one = _one_mode_bytes(tmp_path, settle_s=600.0, minibatches=5)
    measured.clear()
    monkeypatch.setattr(profile_files, "MAX_FILE_BYTES", int(1.5 * one))
    with pytest.raises(InputError) as err:
        run_campaign(_cfg(tmp_path, modes="MAXN,MODE_10W,MODE_15W", settle_s=600.0, minibatches=5))
    assert err.value.field == "out" and "stopped before mode 2 of 3" in err.value.message
    assert "holds the 1 mode(s) measured before" in err.value.message and "--out FILE.csv" in err.value.message
    assert measured == ["MAXN"]
    assert read_profile_rows(tmp_path / "p.json")["mode"].tolist() == ["MAXN"]


def test_a_mode_larger_than_any_before_is_not_written_past_the_limit(tmp_path, measured, monkeypatch):
    """MODE_10W trains slower than MAXN, so it has more power samples: past a limit that two MAXN-sized modes
    would meet, the document it would make is refused, and the file keeps MAXN's, readable."""
    kw = dict(warmup=0, minibatches=2000)
    maxn, slow = _one_mode_bytes(tmp_path, **kw), _one_mode_bytes(tmp_path, "MODE_10W", **kw)
    up_front = 2 * campaign._mode_bytes_at_most(RunSettings(**kw))
    limit = (max(up_front, 2 * maxn) + maxn + slow) // 2
    assert max(up_front, 2 * maxn) < limit < maxn + slow - 8192  # the case: passed up front and after MAXN
    measured.clear()
    monkeypatch.setattr(profile_files, "MAX_FILE_BYTES", limit)
    with pytest.raises(InputError) as err:
        run_campaign(_cfg(tmp_path, **kw))
    assert "mode 2 would take it to" in err.value.message and "holds the 1 mode(s)" in err.value.message
    assert measured == ["MAXN", "MODE_10W"]
    assert read_profile_rows(tmp_path / "p.json")["mode"].tolist() == ["MAXN"]


def test_a_json_out_may_fill_the_readers_limit_to_the_byte_but_not_past_it(tmp_path, measured, monkeypatch):
    """The limit is inclusive: a document of exactly ``MAX_FILE_BYTES`` is written, one a byte past it refused."""
    size = _one_mode_bytes(tmp_path, settle_s=600.0, minibatches=5)  # the twin writes the same bytes each run
    monkeypatch.setattr(profile_files, "MAX_FILE_BYTES", size)
    run_campaign(_cfg(tmp_path, name="MAXN.json", modes="MAXN", settle_s=600.0, minibatches=5))
    assert (tmp_path / "MAXN.json").stat().st_size == size
    monkeypatch.setattr(profile_files, "MAX_FILE_BYTES", size - 1)
    with pytest.raises(InputError, match=f"mode 1 would take it to {size:,} bytes, past the {size - 1:,}"):
        run_campaign(_cfg(tmp_path, name="MAXN.json", modes="MAXN", settle_s=600.0, minibatches=5))


def test_a_campaign_judges_the_next_mode_by_the_largest_so_far_not_the_last(tmp_path, measured, monkeypatch):
    """A slow mode (more power samples), then a fast one: the third, as slow as the first, is stopped before it
    is measured, although one as large as the second would fit."""
    sizes: list[int] = []
    add = campaign._Outputs.add

    def spy(self, *a, **kw) -> None:
        add(self, *a, **kw)
        sizes.append(self.size_bytes)

    monkeypatch.setattr(campaign._Outputs, "add", spy)
    kw = dict(modes="MODE_10W,MAXN,MODE_10W", warmup=0, minibatches=2000)
    run_campaign(_cfg(tmp_path, **kw))
    one, two, three = sizes
    up_front = 3 * campaign._mode_bytes_at_most(RunSettings(warmup=0, minibatches=2000))
    limit = (two + (two - one) + three) // 2  # past two modes and one as large as the fast one, short of three
    assert max(up_front, two + (two - one)) < limit < three  # the case this test is for
    measured.clear()
    monkeypatch.setattr(profile_files, "MAX_FILE_BYTES", limit)
    with pytest.raises(InputError) as err:
        run_campaign(_cfg(tmp_path, **kw))
    assert "stopped before mode 3 of 3" in err.value.message and "holds the 2 mode(s)" in err.value.message
    assert measured == ["MODE_10W", "MAXN"]
    assert read_profile_rows(tmp_path / "p.json")["mode"].tolist() == ["MODE_10W", "MAXN"]

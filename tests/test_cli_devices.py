"""``jetpredict devices``: every catalogued device (the six shipped ones pinned), presets, and the full mode
space as pure CSV on stdout."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from jetpredict.models.catalogue import device_ids, load_device

from jetpredict.cli import main

MODE_COLUMNS = ["mode", "cpu_cores", "cpu_mhz", "gpu_mhz", "emc_mhz"]
#: The six shipped boards' documented space sizes (a board added to the catalogue is listed besides them).
SPACE_SIZES = {"agx-xavier": 29_232, "orin-agx": 18_096, "xavier-nx": 18_000, "nano": 5_040,
               "orin-nx": 5_824, "orin-nano": 1_800}


def console_script() -> str:
    """The installed ``jetpredict`` entry point next to this interpreter (else on PATH)."""
    candidate = Path(sys.executable).with_name("jetpredict")
    if candidate.exists():
        return str(candidate)
    found = shutil.which("jetpredict")
    if found is None:
        pytest.fail("the jetpredict console script is not installed (pip install -e .)")
    return found


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JETPREDICT_")}
    return subprocess.run([console_script(), *args], capture_output=True, text=True, timeout=120, env=env)


def parse_pure_csv(text: str) -> list[dict[str, str]]:
    """Parse stdout as CSV and insist it is nothing else: one header, no blank or comment lines."""
    assert text.endswith("\n"), "CSV output must end with a line break"
    lines = text.splitlines()
    assert all(line.strip() and not line.startswith("#") for line in lines), "stray blank/comment line"
    rows = list(csv.reader(io.StringIO(text)))
    header, body = rows[0], rows[1:]
    assert all(len(r) == len(header) for r in body), "ragged row"
    assert header not in body, "header repeated"
    return [dict(zip(header, r, strict=True)) for r in body]


def test_console_script_prints_full_agx_xavier_space_as_pure_csv():
    proc = run_cli("devices", "agx-xavier", "--modes", "all", "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == ",".join(MODE_COLUMNS)
    rows = parse_pure_csv(proc.stdout)
    assert len(rows) == 29_232
    assert len({r["mode"] for r in rows}) == 29_232
    space = load_device("agx-xavier").modes()
    for i in (0, 1, 9, 12_345, 29_231):
        expected = space[i]
        got = rows[i]
        assert got["mode"] == expected.mode
        assert int(got["cpu_cores"]) == expected.cpu_cores
        assert (float(got["cpu_mhz"]), float(got["gpu_mhz"]), float(got["emc_mhz"])) == (
            expected.cpu_mhz, expected.gpu_mhz, expected.emc_mhz)
    assert rows[-1] == {"mode": "8c-2265.6-1377-2133", "cpu_cores": "8", "cpu_mhz": "2265.6",
                        "gpu_mhz": "1377", "emc_mhz": "2133"}


def test_console_script_errors_go_to_stderr_with_exit_2():
    proc = run_cli("devices", "no-such-board", "--format", "csv")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "unknown device 'no-such-board'" in proc.stderr
    for device_id in device_ids():
        assert device_id in proc.stderr


def test_table_format_keeps_its_banner_off_stdout():
    proc = run_cli("devices", "orin-agx")
    assert proc.returncode == 0, proc.stderr
    # any banner is a message, not data: stdout starts with the table's header row
    assert proc.stdout.splitlines()[0].split()[:5] == MODE_COLUMNS
    for name in ("MAXN", "MODE_15W", "MODE_30W", "MODE_50W"):
        assert name in proc.stdout


@pytest.mark.parametrize("device_id", sorted(set(device_ids()) - {"agx-xavier"}))
def test_each_device_prints_its_whole_space(device_id, capsys):
    assert main(["devices", device_id, "--modes", "all", "--format", "csv"]) == 0
    out = capsys.readouterr().out
    rows = parse_pure_csv(out)
    assert list(rows[0]) == MODE_COLUMNS
    size = len(load_device(device_id).modes())
    assert len(rows) == size == SPACE_SIZES.get(device_id, size)


def test_devices_lists_every_device_the_six_shipped_at_their_sizes(capsys):
    assert main(["devices", "--format", "csv"]) == 0
    rows = parse_pure_csv(capsys.readouterr().out)
    listed = {r["device"]: int(r["power_modes"]) for r in rows}
    assert listed == {d: len(load_device(d).modes()) for d in device_ids()}
    assert {d: listed[d] for d in SPACE_SIZES} == SPACE_SIZES
    assert main(["devices"]) == 0
    table = capsys.readouterr().out
    for device_id in device_ids():
        assert device_id in table


def test_orin_agx_presets_show_maxn_and_caps(capsys):
    assert main(["devices", "orin-agx", "--modes", "presets", "--format", "csv"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    rows = {r["mode"]: r for r in parse_pure_csv(captured.out)}
    assert set(rows) == {"MAXN", "MODE_15W", "MODE_30W", "MODE_50W"}
    caps = {name: (int(r["cpu_cores"]), float(r["cpu_mhz"]), float(r["gpu_mhz"]), float(r["emc_mhz"]),
                   float(r["power_budget_w"] or "nan")) for name, r in rows.items()}
    assert caps.pop("MAXN")[:4] == (12, 2201.6, 1300.5, 3199.0) and rows["MAXN"]["power_budget_w"] == ""
    assert caps == {
        "MODE_15W": (4, 1113.6, 408.0, 2133.0, 15.0),
        "MODE_30W": (8, 1728.0, 612.0, 3199.0, 30.0),
        "MODE_50W": (12, 1497.6, 816.0, 3199.0, 50.0),
    }


def test_uncapped_budget_is_an_empty_cell_not_zero(capsys):
    assert main(["devices", "agx-xavier", "--format", "csv"]) == 0
    rows = {r["mode"]: r for r in parse_pure_csv(capsys.readouterr().out)}
    assert rows["MAXN"]["power_budget_w"] == ""
    assert float(rows["MODE_10W"]["power_budget_w"]) == 10.0


def test_json_format_is_a_list_of_objects(capsys):
    assert main(["devices", "nano", "--modes", "presets", "--format", "json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert [r["mode"] for r in records] == ["MAXN", "5W"]
    assert records[1]["cpu_cores"] == 2 and records[1]["gpu_mhz"] == 640.0


def test_bad_format_is_rejected_by_the_parser(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["devices", "nano", "--format", "xml"])
    assert exit_info.value.code == 2
    assert "--format" in capsys.readouterr().err


def test_the_devices_table_fits_a_terminal_and_json_keeps_every_field(capsys):
    from jetpredict.models.tables import TABLE_WIDTH

    assert main(["devices"]) == 0
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert len(lines) == 1 + len(device_ids()) and max(map(len, lines)) <= TABLE_WIDTH
    assert lines[0].split()[:4] == ["device", "name", "presets", "power_modes"]
    assert main(["devices", "--format", "json"]) == 0
    assert {"cpu", "gpu", "memory"} <= set(json.loads(capsys.readouterr().out)[0])


def test_ctrl_c_ends_a_verb_in_one_line_with_the_shells_status(monkeypatch, capsys):
    import signal

    import jetpredict.cli as cli

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_devices", interrupted)
    monkeypatch.delenv("JETPREDICT_DEBUG", raising=False)
    assert cli.main(["devices"]) == 128 + signal.SIGINT
    assert capsys.readouterr().err == "jetpredict devices: interrupted\n"
    monkeypatch.setenv("JETPREDICT_DEBUG", "1")
    with pytest.raises(KeyboardInterrupt):
        cli.main(["devices"])


def test_presets_state_the_gpu_share_they_power(capsys):
    """Orin NX 10W and 15W keep 2 of the GPU's 4 TPCs powered (nvpmodel_p3767_0000.conf TPC_PG_MASK 252)."""
    assert main(["devices", "orin-nx", "--modes", "presets", "--format", "csv"]) == 0
    rows = {r["mode"]: float(r["gpu_share"]) for r in parse_pure_csv(capsys.readouterr().out)}
    assert rows == {"MAXN": 1.0, "10W": 0.5, "15W": 0.5, "25W": 1.0}


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_modes_without_a_device_lists_every_devices_presets(capsys, fmt):
    """``--modes`` without DEVICE was silently the device table; it lists each device's modes, named."""
    assert main(["devices", "--modes", "presets", "--format", fmt]) == 0
    out = capsys.readouterr().out
    rows = parse_pure_csv(out) if fmt == "csv" else json.loads(out)
    assert list(rows[0])[:6] == ["device", *MODE_COLUMNS]
    by_device: dict[str, list[str]] = {}
    for r in rows:
        by_device.setdefault(r["device"], []).append(r["mode"])
    assert by_device == {d: [p.mode for p in load_device(d).presets] for d in device_ids()}


def test_modes_all_without_a_device_lists_every_mode_of_every_device(capsys):
    assert main(["devices", "--modes", "all", "--format", "csv"]) == 0
    rows = parse_pure_csv(capsys.readouterr().out)
    assert list(rows[0]) == ["device", *MODE_COLUMNS]
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["device"]] = counts.get(r["device"], 0) + 1
    assert counts == {d: len(load_device(d).modes()) for d in device_ids()}
    assert {d: counts[d] for d in SPACE_SIZES} == SPACE_SIZES
    assert rows[-1]["mode"] == load_device(rows[-1]["device"]).modes()[-1].mode


def test_modes_presets_table_without_a_device_fits_a_terminal(capsys):
    from jetpredict.models.tables import TABLE_WIDTH

    assert main(["devices", "--modes", "presets"]) == 0
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert lines[0].split()[:2] == ["device", "mode"] and max(map(len, lines)) <= TABLE_WIDTH
    assert len(lines) == 1 + sum(len(load_device(d).presets) for d in device_ids())
    # Without --modes the answer stays the device table.
    assert main(["devices"]) == 0
    assert capsys.readouterr().out.splitlines()[0].split()[:2] == ["device", "name"]


def test_one_devices_table_says_where_its_facts_come_from(capsys):
    assert main(["devices", "xavier-nx"]) == 0
    captured = capsys.readouterr()
    sources = load_device("xavier-nx").sources
    assert [line for line in captured.err.splitlines() if " from: " in line] == [
        f"  {fact} from: {source}" for fact, source in sources.items()]
    assert "nvpmodel_t194_p3668.conf" in captured.err and "from:" not in captured.out  # stdout stays the table

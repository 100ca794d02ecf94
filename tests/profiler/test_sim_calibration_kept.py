"""The twin's constants file beyond the fit: hand-written blocks of catalogued boards without published
figures survive ``python -m tools.calibrate_twin``, and a board without a block is told what to add."""

from __future__ import annotations

from dataclasses import replace

import pytest
from jetpredict.models.catalogue import device_ids, load_device
from jetpredict.models.errors import InputError
from jetpredict.profiler.sim.physics import CALIBRATION_PATH, DevicePhysics, load_constants

from tools import calibrate_twin

COMMITTED = CALIBRATION_PATH.read_text(encoding="utf-8")


def _committed(devices: list[str] | None = None) -> calibrate_twin.Calibration:
    """The committed constants of ``devices`` (default: every fitted one) as a Calibration."""
    physics = {d: DevicePhysics(load_device(d)) for d in devices or calibrate_twin.fitted_devices()}
    return calibrate_twin.Calibration({d: p.constants for d, p in physics.items()},
                                      DevicePhysics(load_device("agx-xavier")).shared)


def _hand_block(device: str, text: str) -> str:
    """``device``'s committed block, retitled as hand-written with its own comment line and basis."""
    start = text.index(f'[devices."{device}"]')
    end = text.find("\n[", start)
    block = text[start:] if end < 0 else text[start:end + 1]
    body = "\n".join(line for line in block.strip().splitlines() if not line.startswith("basis"))
    return (f"# {device}: measured by hand on our board, 2026-12-06\n{body}\n"
            'basis = "hand-written: the fitted constants, kept to test the rerun"\n')


def test_the_fitted_devices_come_first_then_the_orin_family_from_the_catalogue():
    """Every catalogued Orin (A78AE cores, Ampere GPU) is fitted the Orin way, largest module first, after the
    boards with published rows; the committed file's blocks come in that order."""
    fitted = calibrate_twin.fitted_devices()
    assert fitted == ("agx-xavier", "xavier-nx", "nano", "orin-agx", "orin-nx", "orin-nano")
    assert set(fitted) <= set(device_ids())
    order = [COMMITTED.index(f'[devices."{d}"]') for d in fitted]
    assert order == sorted(order)


def test_writing_the_committed_constants_gives_the_committed_file_byte_for_byte(tmp_path):
    """No hand-written block: the file is the fit alone, under a header naming the fitted blocks."""
    out = tmp_path / "twin.toml"
    calibrate_twin.write_calibration(_committed(), out, {})
    assert out.read_text(encoding="utf-8") == COMMITTED
    header = COMMITTED.split("\n[shared]\n")[0]
    assert "agx-xavier, xavier-nx, nano, orin-agx, orin-nx, orin-nano" in header
    assert "a basis saying how" in header and "reruns keep it verbatim. Kept now: none." in header


def test_a_hand_written_block_of_a_catalogued_unfitted_board_is_kept_verbatim(tmp_path, capsys):
    """A rerun that does not fit a catalogued board keeps its block as written (comment above it included)
    and says so; the constants load; a second rerun changes nothing."""
    fitted = [d for d in calibrate_twin.fitted_devices() if d != "nano"]
    hand = _hand_block("nano", COMMITTED)
    path = tmp_path / "twin.toml"
    calibrate_twin.write_calibration(_committed(fitted), path, {})
    path.write_text(path.read_text(encoding="utf-8") + "\n" + hand, encoding="utf-8")

    kept = calibrate_twin.kept_blocks(path, fitted)
    assert kept == {"nano": hand.rstrip("\n")}
    assert "keeping the hand-written [devices.\"nano\"]" in capsys.readouterr().out
    calibrate_twin.write_calibration(_committed(fitted), path, kept)
    first = path.read_text(encoding="utf-8")
    assert hand in first and "Kept now: nano" in first
    constants, _ = load_constants("nano", path)
    assert constants == replace(DevicePhysics(load_device("nano")).constants,
                                basis="hand-written: the fitted constants, kept to test the rerun")
    calibrate_twin.write_calibration(_committed(fitted), path, calibrate_twin.kept_blocks(path, fitted))
    assert path.read_text(encoding="utf-8") == first


def test_blocks_of_fitted_or_uncatalogued_devices_are_not_kept(tmp_path, capsys):
    path = tmp_path / "twin.toml"
    path.write_text(COMMITTED + "\n" + _hand_block("nano", COMMITTED).replace('"nano"', '"no-such-board"'),
                    encoding="utf-8")
    assert calibrate_twin.kept_blocks(path, calibrate_twin.fitted_devices()) == {}
    out = capsys.readouterr().out
    assert "no-such-board" in out and "not in the catalogue" in out


@pytest.mark.parametrize("edit, words", [
    (lambda b: b.replace("base_w = ", "# base_w = "), "lacks base_w"),
    (lambda b: b.replace("base_w = ", "base_watts = "), "unknown key 'base_watts' (did you mean base_w?)"),
    (lambda b: b.replace('basis = "hand-written: the fitted constants, kept to test the rerun"', 'basis = ""'),
     "basis"),
    (lambda b: b + "gpu_eff_dens = 0.5\n", "gpu_eff_dens"),
])
def test_an_incomplete_hand_written_block_is_refused_before_the_fit(tmp_path, edit, words):
    """Refused naming the file and the device before minutes of fitting, not kept to fail a later run."""
    fitted = [d for d in calibrate_twin.fitted_devices() if d != "nano"]
    path = tmp_path / "twin.toml"
    path.write_text(COMMITTED.split('[devices."nano"]')[0] + edit(_hand_block("nano", COMMITTED)), encoding="utf-8")
    with pytest.raises(InputError) as err:
        calibrate_twin.kept_blocks(path, fitted)
    assert words in err.value.message and str(path) in err.value.message and '"nano"' in err.value.message


def test_a_device_without_constants_is_told_which_file_and_what_to_add(tmp_path):
    path = tmp_path / "twin.toml"
    path.write_text(COMMITTED.split('[devices."nano"]')[0], encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_constants("nano", path)
    msg = err.value.message
    assert err.value.field == "device"
    for words in (str(path), '[devices."nano"]', "gpu_eff_dense", "mem_dyn_w", "basis", "tools.calibrate_twin"):
        assert words in msg, words


@pytest.mark.parametrize("edit, words", [
    (lambda b: b.replace("gpu_eff_dense = ", "gpu_eff_dense = 0.9\ngpu_eff_dens = "),
     ["unknown key 'gpu_eff_dens'", "did you mean gpu_eff_dense?"]),
    (lambda b: b.replace("mem_eff = ", 'mem_eff = "0.2"\n#'), ["mem_eff = '0.2'", "must be a finite number"]),
    (lambda b: b.replace("mem_eff = ", "mem_eff = nan\n#"), ["mem_eff = nan", "must be a finite number"]),
    (lambda b: b.replace("mem_eff = ", "mem_eff = true\n#"), ["mem_eff = True", "must be a finite number"]),
])
def test_the_twin_refuses_a_block_with_a_misspelt_key_or_a_constant_that_is_no_number(tmp_path, edit, words):
    """The twin's own loader, not only calibrate_twin, refuses the block naming the file, the block and the
    key: a misspelt constant would otherwise go unused, its sim:<id> run on the default silently."""
    path = tmp_path / "twin.toml"
    path.write_text(COMMITTED.split('[devices."nano"]')[0] + edit(_hand_block("nano", COMMITTED)), encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_constants("nano", path)
    for w in [str(path), '[devices."nano"]', *words]:
        assert w in err.value.message, w


def test_the_committed_constants_load_for_every_fitted_device():
    for device in calibrate_twin.fitted_devices():
        constants, _ = load_constants(device)
        assert constants.basis.strip(), device

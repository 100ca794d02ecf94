"""``--data`` images are decoded only by the decoders of their listed extensions: a file whose content is
another format (EPS, which Pillow hands to Ghostscript) is refused, naming it, and no other decoder runs."""

from __future__ import annotations

import json
import os
import stat
import sys

import numpy as np
import pytest
from jetpredict.models.errors import InputError
from jetpredict.profiler import workloads as wl

pytest.importorskip("PIL.Image")

EPS = (b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 8 8\n/Helvetica findfont 12 scalefont setfont\n"
       b"showpage\n%%EOF\n")


@pytest.fixture
def logging_gs(tmp_path, monkeypatch):
    """A ``gs`` first on PATH that records each call (Pillow's EPS plugin runs ``gs`` to load, and to probe)."""
    bin_dir, log = tmp_path / "bin", tmp_path / "gs_calls.log"
    bin_dir.mkdir()
    gs = bin_dir / "gs"
    gs.write_text(f"#!{sys.executable}\nimport json, sys\n"
                  f"open({str(log)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
                  "print('10.02.1') if sys.argv[1:] == ['--version'] else sys.exit(1)\n")
    gs.chmod(gs.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    return log


def _gs_calls(log) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_eps_content_named_png_is_refused_without_running_ghostscript(tmp_path, logging_gs):
    img = tmp_path / "data" / "cls" / "img.png"
    img.parent.mkdir(parents=True)
    img.write_bytes(EPS)
    with pytest.raises(InputError) as err:
        wl.decode_image(img)
    assert err.value.field == "data" and str(img) in err.value.message
    assert "PNG" in err.value.message  # the formats it may be in
    assert _gs_calls(logging_gs) == []  # Ghostscript neither probed nor run


def test_the_refusal_reaches_a_run_on_the_folder(tmp_path, logging_gs):
    from PIL import Image

    root = tmp_path / "data"
    (root / "cls").mkdir(parents=True)
    Image.fromarray(np.zeros((8, 8, 3), dtype=np.uint8)).save(root / "cls" / "a.png")
    (root / "cls" / "b.png").write_bytes(EPS)
    built = wl.build_workload("lenet5-mnist", batch_size=1, num_workers=0, data_dir=root)
    assert built.dataset[0][0].shape == (1, 28, 28)
    with pytest.raises(InputError, match="b.png"):
        built.dataset[1]
    assert _gs_calls(logging_gs) == []


def test_every_listed_extension_has_its_decoder_and_content_of_a_sibling_format_decodes(tmp_path):
    from PIL import Image

    assert set(wl.IMAGE_FORMATS.values()) <= set(Image.registered_extensions().values())
    # A JPEG saved under .png is still one of the allowed formats: decoded, not refused.
    pixels = np.full((6, 6, 3), 128, dtype=np.uint8)
    Image.fromarray(pixels).save(tmp_path / "x.png", format="JPEG")
    assert wl.decode_image(tmp_path / "x.png").shape == (6, 6, 3)

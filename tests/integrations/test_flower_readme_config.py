"""The Flower fleet README's SuperLink block names its SuperLink in Flower's config so that pasting the block
again (or on a machine whose Flower config already has it) leaves a config Flower still reads: run here twice
through ``sh`` into a fresh ``FLWR_HOME``, no Flower process needed."""

from __future__ import annotations

import os
import re
import subprocess
import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from flower_fixtures import config_lines, deployment_block


def test_the_readmes_config_lines_twice_leave_one_valid_superlink_table(tmp_path):
    home = tmp_path / "flwr-home"  # missing, as on a machine where Flower never ran
    block = deployment_block()
    host, port = re.search(r"flower-superlink .*--host (\S+) --port (\d+)", block).groups()
    lines = config_lines(block)
    texts = []
    for _ in range(2):
        done = subprocess.run(["sh", "-e", "-c", lines], env={**os.environ, "FLWR_HOME": str(home)},
                              capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        texts.append((home / "config.toml").read_text())
    config = tomllib.loads(texts[1])  # what Flower reads: a table declared twice is an error here too
    assert config == {"superlink": {"loopback": {"address": f"{host}:{port}", "insecure": True}}}
    assert texts[0] == texts[1]

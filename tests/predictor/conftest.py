"""Shared fixtures of the predictor's tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from jetpredict.models.profile_files import read_profile_csv, write_profile_csv
from jetpredict.predictor.reference import REFERENCE_DIR

from jetpredict.cli import main


@pytest.fixture(scope="module")
def lenet() -> pd.DataFrame:
    """The published LeNet-5 rows of AGX Xavier (modes a-j)."""
    ref = read_profile_csv(REFERENCE_DIR / "agx-xavier-published.csv")
    return ref[ref.workload == "lenet5-mnist"].reset_index(drop=True)


@pytest.fixture(scope="session")
def resnet_cli_fit(tmp_path_factory) -> Callable[[tuple[str, ...] | None], Path]:
    """``fit(modes)``: a folder holding ``resnet.csv`` (the published ResNet-18 rows of ``modes``, default
    all ten) and ``resnet.json``, the model ``jetpredict fit`` wrote from it (one fit per set of modes)."""
    done: dict[tuple[str, ...] | None, Path] = {}

    def fit(modes: tuple[str, ...] | None = None) -> Path:
        if modes not in done:
            d = tmp_path_factory.mktemp("resnet-" + ("".join(modes) if modes else "all"))
            rows = read_profile_csv(REFERENCE_DIR / "agx-xavier-published.csv")
            rows = rows[rows["workload"] == "resnet18-cifar10"]
            write_profile_csv(rows if modes is None else rows[rows["mode"].isin(modes)], d / "resnet.csv")
            assert main(["fit", "--device", "agx-xavier", "--profiles", str(d / "resnet.csv"),
                         "--out", str(d / "resnet.json")]) == 0
            done[modes] = d
        return done[modes]

    return fit


@pytest.fixture(scope="module")
def work(resnet_cli_fit) -> Path:
    """The folder of ``resnet_cli_fit`` for the published ResNet-18 rows of modes a, d, g, h."""
    return resnet_cli_fit(("a", "d", "g", "h"))

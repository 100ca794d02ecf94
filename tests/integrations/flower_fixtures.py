"""Helpers shared by the integration tests: published profile rows of a new workload."""

from __future__ import annotations

from pathlib import Path

from jetpredict.models.profile_rows import read_profile_csv, rows_to_records

from jetpredict import models

PUBLISHED_CSV = Path(models.__file__).parent / "reference" / "agx-xavier-published.csv"


def resnet_records() -> list[dict]:
    """4 published AGX Xavier ResNet-18 rows (modes a-d) as the new workload ``my-resnet``."""
    rows = read_profile_csv(PUBLISHED_CSV)
    rows = rows[rows["workload"] == "resnet18-cifar10"].head(4).copy()
    rows["workload"] = "my-resnet"
    return rows_to_records(rows)

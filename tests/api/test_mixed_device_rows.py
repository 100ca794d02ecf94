"""Rows of one request that name two devices: the error names the first row that differs, where the client sent it."""

from __future__ import annotations

import pytest
from api_fixtures import published_rows


@pytest.mark.parametrize("route, wrap, field", [
    ("/v1/profiles", lambda rows: {"rows": rows}, "rows.2.device"),
    ("/v1/predictions", lambda rows: {"workload": {"rows": rows}, "modes": "presets"}, "workload.rows.2.device"),
])
def test_a_row_of_another_device_is_named_by_its_index(client, auth, route, wrap, field):
    """It was ``rows.device`` with the two ids: in a 10,000-row upload the client could not tell which row."""
    rows = published_rows()
    # knobs inside both devices' ranges, so that only the device is wrong
    rows[2] = {**rows[2], "device": "nano", "cpu_cores": 4, "cpu_mhz": 1200.0, "gpu_mhz": 600.0, "emc_mhz": 1600.0}
    r = client.post(route, json=wrap(rows), headers=auth)
    assert r.status_code == 422 and list(r.json["errors"]) == [field], r.json
    assert "row 2 has 'nano', row 0 'agx-xavier'" in r.json["errors"][field][0]

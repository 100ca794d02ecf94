"""Build-time scripts (twin calibration, reference sweeps, bundled refits, interval calibration) and the
test scaffolding of tests and benches (:mod:`tools.testing`). Not installed."""

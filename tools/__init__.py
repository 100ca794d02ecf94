"""Build-time scripts: twin calibration, reference sweeps, bundled refits. Not installed."""

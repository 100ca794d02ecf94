"""Fits a workload from a few profiled modes and predicts epoch time, power and energy on every mode.

Never imports torch or the profiler (the service runs without PyTorch).
"""

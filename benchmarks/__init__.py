"""Benchmarks: ``python -m benchmarks [SUITE ...] [--quick]``; each prints ratios against a
baseline measured in the same run."""

"""Run benchmark suites: ``python -m benchmarks [SUITE ...] [--quick]`` (default: all)."""

from __future__ import annotations

import argparse
import importlib

SUITES = {
    "stats": "benchmarks.bench_stats",
    "power": "benchmarks.bench_power",
    "real": "benchmarks.bench_real",
    "sampling": "benchmarks.bench_sampling",
    "embedding": "benchmarks.bench_embedding",
    "pipeline": "benchmarks.bench_pipeline",
    "scale": "benchmarks.bench_scale",
    "startup": "benchmarks.bench_startup",
    "generators": "benchmarks.bench_generators",
    "cli": "benchmarks.bench_cli",
    "equivalence": "benchmarks.bench_equivalence",
    "sequential": "benchmarks.bench_sequential",
    "interval": "benchmarks.interval_coverage",
    "threads": "benchmarks.bench_threads",
    "local_threads": "benchmarks.bench_local_threads",
    "plan": "benchmarks.bench_planning",
    "prompt_sets": "benchmarks.bench_prompt_sets",
    "monitor": "benchmarks.bench_monitor",
    "monitor_weights": "benchmarks.bench_monitor_weights",
    "prompt_scale": "benchmarks.bench_prompt_scale",
    "rates": "benchmarks.bench_rates",
    "shared_record_engines": "benchmarks.bench_shared_record",
    "cost": "benchmarks.bench_cost",
    "shared_record": "benchmarks.bench_shared_audits",
    "design_auto": "benchmarks.design_auto",
}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("suites", nargs="*", choices=list(SUITES), help="default: all")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args = parser.parse_args()
    for name in args.suites or SUITES:
        importlib.import_module(SUITES[name]).main(quick=args.quick)


if __name__ == "__main__":
    main()

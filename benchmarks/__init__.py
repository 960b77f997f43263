"""densecode's benchmarks, one script a measurement, run from the repository root as modules:

    python -m benchmarks.speed.sandbox_throughput --help
    python -m benchmarks.run_all --quick                  # every entry, one table: benchmarks/RESULTS.md

speed/        throughput and step times against a baseline measured in the same run (ratios)
soak/         long runs that check resources do not grow (sandbox pool, trainer memory)
experiments/  training comparisons and probes with seeds and confidence intervals (results/ keeps their outputs)
figures/      reward-explorer pages and their screenshots
common.py     what the scripts share
"""

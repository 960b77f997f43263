"""Training comparisons and probes: arms, seeds, confidence intervals (outputs in benchmarks/results/)."""

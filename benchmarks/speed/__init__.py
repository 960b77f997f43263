"""Throughput and step-time measurements, each against a baseline measured in the same run."""

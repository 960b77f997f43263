"""Soak runs: resources after many programs or steps vs after warm-up."""

"""Reward-explorer pages and their screenshots (the PNGs beside these scripts are their outputs)."""

"""densecode: PPO with dense token-level rewards for code LMs."""
__version__ = "0.1.0"

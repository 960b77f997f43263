"""Reinforcement learning: rollout, value head, PPO, GRPO, and the shared trainer.

The loop and the `Algorithm` interface an optimiser implements are documented at the
top of `densecode/rl/trainer.py`.
"""

"""Reinforcement learning: rollout, value head, PPO, GRPO, and the shared trainer.

The loop is documented at the top of `densecode/rl/trainer.py`; the `Algorithm` an optimiser implements and the
`TaskSource` a domain implements, in `densecode/rl/protocols.py`.
"""

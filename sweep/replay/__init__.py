"""The n-gram drafters replayed on a baseline's own tokens.

Under greedy decoding an exact speculative method emits the target's own tokens, so what a model-free drafter
would have drafted and had accepted at every verify step follows from its rule, the prompt's token ids and the
answer the baseline produced: no launch per configuration. Each engine names the drafter configurations it can
replay (`Engine.replay_arms`), each written from one release's source and citing it; a drafter whose rule is not
followed has no arm (never an approximation).
"""

from sweep.replay._steps import ReplayArm, Replayed, TokenIds, VerifyStep

__all__ = ["ReplayArm", "Replayed", "TokenIds", "VerifyStep"]

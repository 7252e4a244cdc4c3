"""The engine simulator: SGLang's or vLLM's command line, log lines and HTTP API (`front.py` picks by the command
line), with tokens at a performance model's rates."""

from sweep.sim.profile import DEFAULT_PROFILE, Profile

__all__ = ["DEFAULT_PROFILE", "Profile"]

"""An SGLang-compatible simulator: SGLang's CLI, log lines and HTTP API, with tokens at a performance model's rates."""

from sweep.sim.profile import DEFAULT_PROFILE, Profile

__all__ = ["DEFAULT_PROFILE", "Profile"]

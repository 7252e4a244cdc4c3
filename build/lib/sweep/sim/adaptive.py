"""SGLang's adaptive speculation (`--speculative-adaptive`, `--speculative-adaptive-config FILE`), as the simulator
runs it: SGLang 0.5.23's `speculative/adaptive_spec_params.py` and `adaptive_step_router.py`, read and redone.

The config is a JSON object whose integer-string keys are batch sizes ("1", "8", ...), each with
`candidate_steps` (non-negative ints; 0 turns drafting off) and optional `ema_alpha`, `update_interval`,
`warmup_batches`, `up_hysteresis`, `down_hysteresis`. A batch is padded up to the next CUDA-graph batch size,
then served by the slot with the largest key not above it. Each slot keeps an EMA of accepted drafts per
request and moves one candidate up when it exceeds the current steps - 0.5 (+ hysteresis), down while it is at
most the lower candidate - 0.5 (+ hysteresis). A slot with one candidate is a fixed depth for its batch sizes:
what `specsweep export --format schedule` writes.
"""

from __future__ import annotations

import bisect
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from sweep.releases.sglang_rules import DEFAULT_ADAPTIVE_CONFIG


class DepthController(Protocol):
    """What chooses a decode step's draft depth on the server: SGLang's adaptive steps by batch size, vLLM's
    adaptive verification by expected tokens per step cost (`sim/verify_budget.py`)."""

    def steps_for(self, batch: int, step_seconds: Callable[[int], float] | None = None) -> int: ...

    def on_verify(self, correct: int, batch: int, depth: int = 0) -> list[str]: ...


class AdaptiveConfigError(ValueError):
    """The config SGLang would refuse at start, with the last line it prints (`ValueError: ...`)."""


def load_config(path: str | None) -> dict[int, dict[str, Any]]:
    """`_load_adaptive_config`: the default config, or the file's (unreadable: the error `open`/`json` raise)."""
    if path is None:
        cfg: Any = DEFAULT_ADAPTIVE_CONFIG
    else:
        try:
            cfg = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise AdaptiveConfigError(f"{type(exc).__name__}: {exc}") from None
        except json.JSONDecodeError as exc:
            raise AdaptiveConfigError(f"json.decoder.JSONDecodeError: {exc}") from None
    if not isinstance(cfg, dict):
        raise AdaptiveConfigError(f"AttributeError: '{type(cfg).__name__}' object has no attribute 'items'")
    slots: dict[int, dict[str, Any]] = {}
    for key, entry in cfg.items():
        if not str(key).isdigit():
            continue
        steps = entry.get("candidate_steps") if isinstance(entry, dict) else None
        if not isinstance(steps, list) or not steps or not all(isinstance(s, int) and s >= 0 for s in steps):
            raise AdaptiveConfigError(
                f"ValueError: BS {key}: candidate_steps must be a list of non-negative ints, got {steps!r}"
            )
        shared = {k: v for k, v in cfg.items() if not str(k).isdigit()}
        slots[int(key)] = {**shared, **entry}
    if not slots:
        raise AdaptiveConfigError(
            "ValueError: speculative_adaptive_config must contain at least one integer-string BS key, e.g. "
            f'{{"1": {{"candidate_steps": [1,3,7]}}}}. Got keys: {list(cfg)}'
        )
    return slots


@dataclass
class Slot:
    candidates: list[int]
    current: int
    ema_alpha: float = 0.2
    update_interval: int = 5
    warmup_batches: int = 10
    up_hysteresis: float = 0.0
    down_hysteresis: float = -0.25
    ema: float = 0.0
    batches: int = 0
    changes: list[str] = field(default_factory=list)

    @classmethod
    def from_entry(cls, initial: int, entry: dict[str, Any]) -> Slot:
        candidates = sorted(set(entry["candidate_steps"]))
        current = initial if initial in candidates else candidates[len(candidates) // 2]
        slot = cls(
            candidates,
            current,
            float(entry.get("ema_alpha", 0.2)),
            int(entry.get("update_interval", 5)),
            int(entry.get("warmup_batches", 10)),
            float(entry.get("up_hysteresis", 0.0)),
            float(entry.get("down_hysteresis", -0.25)),
        )
        slot.ema = float(current - 1)
        return slot

    def update(self, correct: list[int]) -> None:
        if not correct:
            return
        if self.current > 0:
            self.ema = (1 - self.ema_alpha) * self.ema + self.ema_alpha * sum(correct) / len(correct)
        self.batches += 1
        if self.batches <= self.warmup_batches or (self.batches - self.warmup_batches) % self.update_interval:
            return
        self._recompute()

    def _recompute(self) -> None:
        old = self.current
        index = self.candidates.index(old)
        if old == 0:  # after a stretch without drafting, probe the smallest positive step
            index = min(index + 1, len(self.candidates) - 1)
            self._move(old, self.candidates[index])
            return
        start = index
        while index > 0:
            lower = self.candidates[index - 1]
            threshold = (0.5 if lower == 0 else lower - 0.5) + self.down_hysteresis
            if self.ema > threshold:
                break
            index -= 1
        if index == start:
            while (
                index < len(self.candidates) - 1
                and self.ema > self.candidates[index] - 0.5 + self.up_hysteresis
            ):
                index += 1
        self._move(old, self.candidates[index])

    def _move(self, old: int, new: int) -> None:
        if new != old:
            self.current = new
            self.changes.append(
                f"Adaptive spec params updated: steps {old} -> {new} (ema_accept_len={self.ema:.2f})"
            )


class AdaptiveSteps:
    """The steps for each batch size, shared by the server's request threads."""

    def __init__(self, initial: int, slots: dict[int, dict[str, Any]], graph_batch_sizes: list[int]) -> None:
        self.slots = {bs: Slot.from_entry(initial, entry) for bs, entry in sorted(slots.items())}
        self.keys = sorted(self.slots)
        self.graph_batch_sizes = sorted(graph_batch_sizes)
        self.lock = threading.Lock()

    @property
    def candidate_steps(self) -> list[int]:
        return sorted({s for slot in self.slots.values() for s in slot.candidates})

    def _slot(self, batch: int) -> Slot:
        if self.graph_batch_sizes:  # padded up to the CUDA graph that serves the batch
            index = bisect.bisect_left(self.graph_batch_sizes, batch)
            if index < len(self.graph_batch_sizes):
                batch = self.graph_batch_sizes[index]
        key = self.keys[max(0, bisect.bisect_right(self.keys, batch) - 1)]
        return self.slots[key]

    def steps_for(self, batch: int, step_seconds: Callable[[int], float] | None = None) -> int:
        """The depth this batch size runs at now (its slot's; the step costs are not SGLang's to read)."""
        with self.lock:
            return self._slot(batch).current

    def on_verify(self, correct: int, batch: int, depth: int = 0) -> list[str]:
        """Feed one verify's accepted drafts; returns the log lines of any change."""
        with self.lock:
            slot = self._slot(batch)
            before = len(slot.changes)
            slot.update([correct])
            return slot.changes[before:]

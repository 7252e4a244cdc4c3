"""The simulator's performance model, the same behind every engine's front end: a resolved configuration
(`Resolved`, what an engine's rules made of its flags), its memory plan (`MemoryPlan`), and step times and
acceptance (`StepModel`), from the profile fitted to the field reports' figures (report 000). Each front end
resolves its own command line: SGLang's in `sglang.py`, vLLM's in `vllm.py`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from sweep.releases.sglang_rules import BLOCK_DRAFTS, EAGLE_FAMILY
from sweep.sim.profile import Profile

ALGORITHMS = (*EAGLE_FAMILY, "NGRAM", *BLOCK_DRAFTS, "UNO")
GIB = 1024**3
CONTEXT_128K = 131072
SPEC_DEFAULT_MAX_RUNNING = 48


class StartupFailure(Exception):
    """The simulated server exits during start; the message is what SGLang would print last."""


@dataclass
class Resolved:
    """Server arguments after an engine's defaults and rules, and what the simulator logs about them."""

    algorithm: str | None
    steps: int
    topk: int
    draft_tokens: int
    max_running_requests: int
    chunked_prefill_size: int
    max_bs_decode: int
    max_bs_prefill: int
    mem_fraction_static: float
    kv_bytes: int
    context_length: int
    notices: list[str] = field(default_factory=list)
    # Adaptive speculation: the per-batch-size slots of its config (None: a fixed depth).
    adaptive_slots: dict[int, dict[str, Any]] | None = None
    verify_budget: bool = False  # vLLM's adaptive verification: each step admits the depth that pays best
    draft_kv_bytes: int = 2  # bytes per element of the draft's KV cache (--speculative-draft-kv-cache-dtype)
    # Whether n-gram drafting looks the prompt up too (vLLM's ngram: prompt lookup) or only what the model wrote
    # (SGLang's NGRAM: its corpus takes each step's last tokens, never the prompt: ngram_worker.py, 0.5.17-0.5.23).
    lookup_prompt: bool = True

    @property
    def speculative(self) -> bool:
        return self.algorithm is not None


@dataclass
class MemoryPlan:
    cell_bytes: int
    cell_bytes_assumed: int
    pool_tokens: int
    draft_pool_tokens: int | None
    pool_gb: float
    free_after_pool_gb: float
    mamba_slots: int
    slots_per_request: int
    effective_max_running: int
    decode_buckets: list[int]
    decode_graph_gb: float
    prefill_graph_gb: float
    free_after_graphs_gb: float
    max_req_input_len: int
    log: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class StepModel:
    """Decode of one request: how long a step takes and how many tokens it emits.

    Trees follow SGLang's EAGLE: `steps` draft levels, `topk` candidates kept per level, and the best
    `draft_tokens - 1` nodes of the tree verified. A wider level catches more of the target's next tokens, with
    diminishing returns (the candidates are correlated): per-position acceptance 1 - (1 - a)^(width^tree_gain),
    the width being the nodes the budget leaves per level; drafting costs more per step with every candidate kept. Verification costs little while the forward's tokens
    (running requests x verified tokens) stay under the GPU's memory-bound knee, and grows per token past it.
    """

    profile: Profile
    resolved: Resolved
    workload: str
    context_tokens: int
    # A depth chosen by the server for this step (SGLang's adaptive speculation), overriding the resolved one.
    steps_override: int | None = None

    @property
    def _t(self) -> float:
        return min(1.0, self.context_tokens / CONTEXT_128K)

    @property
    def steps(self) -> int:
        return self.resolved.steps if self.steps_override is None else self.steps_override

    @property
    def speculative(self) -> bool:
        # NGRAM drafts its budget whatever its steps resolved to (draft tokens // BFS breadth: 0 below 10 draft
        # tokens, where the live H100 drafted).
        if self.resolved.algorithm == "NGRAM":
            return self.draft_budget > 0
        return self.resolved.speculative and self.steps > 0

    @property
    def draft_budget(self) -> int:
        """Draft tokens verified per step, the root excluded."""
        r = self.resolved
        if self.steps_override is not None or r.adaptive_slots is not None:
            return self.steps  # adaptive speculation is topk 1: a chain of `steps`
        return max(0, r.draft_tokens - 1)

    @property
    def depth(self) -> int:
        """Tree levels a draft can reach: the steps, at most the budget (n-gram: the budget, drafted as a chain)."""
        if self.resolved.algorithm == "NGRAM" or self.block:
            return self.draft_budget
        return min(self.steps, self.draft_budget)

    @property
    def block(self) -> bool:
        return self.resolved.algorithm in BLOCK_DRAFTS

    @property
    def width(self) -> float:
        """Nodes per level the budget allows, at most topk (1 for a chain)."""
        if self.resolved.algorithm == "NGRAM" or self.block or self.steps_override is not None:
            return 1.0
        topk = max(1, self.resolved.topk)
        return max(1.0, min(float(topk), self.draft_budget / max(1, self.depth)))

    def chain_acceptance(self) -> float:
        a = self.profile.acceptance
        ngram = self.resolved.algorithm == "NGRAM"
        # An answer that copies its prompt gives an answer-only n-gram corpus nothing to find until it repeats
        # itself: as prose does (the H200 measured 1.16 tokens a step on edits and quotes with SGLang's NGRAM).
        copying = ngram and self.workload == "tool" and not self.resolved.lookup_prompt
        base = a.answer_only_copy() if copying else a.per_token(self.workload, ngram=ngram)
        return min(0.99, base + (a.at_128k - base) * self._t) if base > a.at_128k else base

    def acceptance(self) -> float:
        """Per-position acceptance: the chain's, raised by the tree's width with diminishing returns."""
        a = self.chain_acceptance()
        return 1 - float((1 - a) ** (self.width**self.profile.acceptance.tree_gain))

    def step_seconds(self, running: int, rng: random.Random, pace: float = 1.0) -> float:
        """One step's duration; `pace` multiplies the mean (this launch's and this request's slowness)."""
        return max(0.0, self.mean_step_seconds(running) * pace * (1 + rng.gauss(0, self.profile.noise)))

    def verify_ms(self, forward_tokens: int) -> float:
        """Extra time of a forward over `forward_tokens` tokens: small while memory-bound, per token past the knee."""
        s = self.profile.speed
        return s.per_verify_token_ms * (
            0.15 * forward_tokens + 0.85 * max(0, forward_tokens - s.verify_knee_tokens)
        )

    def mean_step_seconds(self, running: int) -> float:
        s, r = self.profile.speed, self.resolved
        if not self.speculative:
            ms = s.decode_ms + (s.decode_ms_at_128k - s.decode_ms) * self._t + self.verify_ms(running)
            return ms * (1 + s.batch_growth * max(0, running - 1)) / 1000
        tokens = self.draft_budget + 1  # verified a step
        if r.algorithm == "NGRAM":  # no draft model: the verify width is what costs, and the lookups
            ms = s.step_ms + s.per_draft_ms / 10 * tokens + s.step_ms_at_128k_extra * self._t
            ms += s.ngram_ms_per_request * max(0, running - 1)
        elif self.block:  # one draft forward over the block: it costs more the wider the block
            ms = s.step_ms + s.draft_model_ms + s.per_draft_ms * (1 + tokens / 16)
            ms += s.step_ms_at_128k_extra * self._t / 3
        else:
            draft = s.per_draft_ms * self.steps * (1 + s.draft_width_cost * (max(1, r.topk) - 1))
            ms = s.step_ms + s.draft_model_ms + draft + s.step_ms_at_128k_extra * self._t * self.steps / 3
            ms += s.adaptive_ms if r.adaptive_slots is not None else 0.0
        ms += self._context_read_ms(tokens) + self.verify_ms(running * tokens)
        return ms * (1 + s.batch_growth * max(0, running - 1)) / 1000

    def _context_read_ms(self, tokens: int) -> float:
        """What a step's verify pays for its context: per verified token, or, for NGRAM where the profile
        measured it so, per step whatever its width."""
        s = self.profile.speed
        if self.resolved.algorithm == "NGRAM" and s.ngram_context_ms_at_128k:
            return s.ngram_context_ms_at_128k * self._t
        return s.verify_ms_per_token_at_128k * self._t * tokens

    def accepted_drafts(self, rng: random.Random) -> int:
        """Drafts along the accepted path: the i-th position survives only if every one before it did."""
        if not self.speculative:
            return 0
        a, accepted = self.acceptance(), 0
        while accepted < self.depth and rng.random() < a:
            accepted += 1
        return accepted

    def expected_accept_length(self) -> float:
        """Mean tokens per verify step: 1 + a + a^2 + ... + a^depth."""
        if not self.speculative:
            return 1.0
        a = self.acceptance()
        return 1.0 + sum(a**i for i in range(1, self.depth + 1))

    def expected_tps(self, running: int = 1) -> float:
        """Decode tokens per second per request, noise aside."""
        return self.expected_accept_length() / self.mean_step_seconds(running)

    def prefill_seconds(self, tokens: int) -> float:
        s = self.profile.speed
        return tokens / s.prefill_tok_s + s.prefill_quadratic_s_per_token2 * tokens * tokens

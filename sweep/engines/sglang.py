"""SGLang. Facts from its server log (0.5.23 and the older formats in `../shared/reference/sglang_vllm.md` §4).

Regexes anchor on stable substrings (`#tokens: N`, `max_total_num_tokens=N`), since the surrounding text drifts
between releases (`Decode batch.` became `Decode batch,`, KV lines gained `dtype:`, capture lines gained roles).
"""

from __future__ import annotations

import re

from sweep.results import LaunchFacts

NUM = r"([\d.]+)"
# Target pool first; with EAGLE the draft pool logs a second line. SWA models prefix `Full `/`SWA `.
KV_ALLOCATED = re.compile(
    r"(?:(Full|SWA) )?KV Cache is allocated\..*?#tokens: (\d+)(?:, K size: " + NUM + r" GB, V size: " + NUM
    + r" GB|, KV size: " + NUM + r" GB)?"
)  # fmt: skip
POST_CAPTURE_KV = re.compile(
    r"Post-capture KV sizing: KV cache allocated\..*?#tokens: (\d+), KV size: "
    + NUM
    + r" GB, avail mem="
    + NUM
)
WEIGHT_END = re.compile(r"Load weight end\..*?mem usage=" + NUM + " GB")
POOL_END = re.compile(r"Memory pool end\. avail mem=" + NUM + " GB")
SCHEDULER = re.compile(
    r"max_total_num_tokens=(\d+), chunked_prefill_size=(-?\d+), max_prefill_tokens=(\d+), "
    r"max_running_requests=(\d+), context_len=(\d+)"
)
CAPTURE_BEGIN = re.compile(r"Capture (?:([\w ]+?) )?(?i:cuda) graph begin\..*?avail mem=" + NUM + " GB")
CAPTURE_END = re.compile(
    r"Capture (?:([\w ]+?) )?(?i:cuda) graph end\..*?mem usage=" + NUM + r" ?GB[.,]? avail mem=" + NUM
)
LIMIT_LINES = (
    re.compile(r"max_running_requests is capped to \d+ by the mamba state cache[^.]*\)"),
    re.compile(
        r"max_running_requests was reduced from the requested \d+ to \d+ \(per dp worker\) due to the available KV cache capacity"
    ),
    re.compile(r"Max running requests is reset to \d+ for speculative decoding"),
    re.compile(r"KV pool holds \d+ tokens, fewer than --context-length \d+"),
    re.compile(
        r"speculative_num_draft_tokens is adjusted to speculative_num_steps \+ 1 when speculative_eagle_topk == 1"
    ),
)
READY = "The server is fired up and ready to roll!"

# Why a server exited during start, most specific first.
EXIT_REASONS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"Capture cuda graph failed: (.*)"), "CUDA-graph capture ran out of memory: {0}"),
    (re.compile(r"(?:torch\.\w+Error|RuntimeError): CUDA (?:error: )?out of memory"), "CUDA out of memory"),
    (re.compile(r"(Not enough memory\. Please try to increase --mem-fraction-static[^\n]*)"), "{0}"),
    (re.compile(r"(Not enough GPU memory for hybrid \(mamba/linear-attention\) state cache[^\n]*)"), "{0}"),
    (re.compile(r"AssertionError: (Can not alloc mamba cache[^\n]*)"), "mamba state allocation failed: {0}"),
    (re.compile(r"error: (unrecognized arguments: [^\n]*)"), "SGLang rejected the arguments: {0}"),
    (re.compile(r"error: (ambiguous option: [^\n]*)"), "SGLang rejected the arguments: {0}"),
    (re.compile(r"error: (argument [^\n]*)"), "SGLang rejected an argument: {0}"),
    (re.compile(r"ValueError: (Unknown speculative algorithm name: [^\n]*)"), "{0}"),
    (re.compile(r"Initialization failed\. warmup error: ([^\n]*)"), "warm-up failed: {0}"),
)


def facts_from_log(log: str) -> LaunchFacts:
    facts = LaunchFacts()
    pools = KV_ALLOCATED.findall(log)
    if pools:
        _, tokens, k_gb, v_gb, kv_gb = pools[0]
        facts.kv_pool_tokens = int(tokens)
        facts.kv_cache_gb = float(kv_gb) if kv_gb else (float(k_gb) + float(v_gb) if k_gb else None)
        # A second unprefixed pool is the draft's; SWA models log Full + SWA pools for the target itself.
        drafts = [p for p in pools[1:] if not p[0]]
        facts.draft_kv_pool_tokens = int(drafts[0][1]) if drafts else None
    elif post := POST_CAPTURE_KV.search(log):
        facts.kv_pool_tokens, facts.kv_cache_gb = int(post.group(1)), float(post.group(2))
        facts.free_after_pool_gb = float(post.group(3))
    if weight := WEIGHT_END.search(log):
        facts.weight_gb = float(weight.group(1))
    if pool_end := POOL_END.search(log):
        facts.free_after_pool_gb = float(pool_end.group(1))
    if scheduler := SCHEDULER.search(log):
        facts.extra["max_total_num_tokens"] = int(scheduler.group(1))
        facts.extra["chunked_prefill_size"] = int(scheduler.group(2))
        facts.max_running_requests, facts.context_length = int(scheduler.group(4)), int(scheduler.group(5))
    captures = [(m.group(1) or "", float(m.group(2)), float(m.group(3))) for m in CAPTURE_END.finditer(log)]
    if captures:
        facts.graph_capture_gb = round(sum(c[1] for c in captures), 3)
        facts.free_after_graphs_gb = captures[-1][2]
        facts.extra["graph_captures"] = [
            {"graph": c[0] or "cuda", "gb": c[1], "free_after_gb": c[2]} for c in captures
        ]
    facts.limit_changes = [
        m.group(0) for line in log.splitlines() for p in LIMIT_LINES if (m := p.search(line))
    ]
    return facts


def exit_reason(log: str, returncode: int) -> str:
    for pattern, template in EXIT_REASONS:
        if found := pattern.search(log):
            return template.format(*(g.strip() for g in found.groups()))
    if "AssertionError" in log and "speculative" in log:
        return "AssertionError during argument resolution (topk or draft tokens set without --speculative-num-steps?)"
    last = [line for line in log.splitlines() if line.strip()][-1:] or ["(empty log)"]
    return f"SGLang exited with code {returncode} during start; last log line: {last[0].strip()}"

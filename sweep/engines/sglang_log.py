"""SGLang's server log read as facts: the KV pool and its memory, weights, graph captures (and a capture that ran
out of memory), the running limits the scheduler printed, and why a server died (`EXIT_REASONS`), for 0.5.17 to
0.5.23 and the older formats. Regexes anchor on stable substrings (`#tokens: N`, `max_total_num_tokens=N`), since
the surrounding text drifts between releases (`Decode batch.` became `Decode batch,`, KV lines gained `dtype:`,
capture lines gained roles)."""

from __future__ import annotations

import re

from sweep.engines.flags import argparse_reasons
from sweep.launch.server import ExitPatterns
from sweep.records import CaptureOom, GraphCapture, LaunchFacts

NUM = r"([\d.]+)"
# Target pool first; with EAGLE the draft pool logs a second line. SWA models prefix `Full `/`SWA `.
KV_ALLOCATED = re.compile(
    rf"(?:(Full|SWA) )?KV Cache is allocated\..*?#tokens: (\d+)"
    rf"(?:, K size: {NUM} GB, V size: {NUM} GB|, KV size: {NUM} GB)?"
)
POST_CAPTURE_KV = re.compile(
    rf"Post-capture KV sizing: KV cache allocated\..*?#tokens: (\d+), KV size: {NUM} GB, avail mem={NUM}"
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
MAMBA_CACHE = re.compile(r"max_mamba_cache_size: (\d+)")
CAPTURE_OOM = re.compile(
    r"Capture cuda graph failed: .*?Tried to allocate ([\d.]+) GiB.*?of which ([\d.]+) GiB is free"
)
BATCH_SIZES = re.compile(r"(?:bs|num_tokens)=\[([^\]]*)\]")
# SGLang's adaptive controller, as its start-up logs it (adaptive_spec_params.py, 0.5.17-0.5.23).
ADAPTIVE_RUNNING = "AdaptiveSpeculativeParams initialized"
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

# Why a server exited during start, most specific first. Every SGLang message here is one 0.5.23 prints
# (tests/test_sglang_conformance.py holds them against its source); the CUDA and argparse ones are torch's and
# Python's.
EXIT_REASONS: ExitPatterns = (
    # A capture fails on more than memory (0.5.17 on an H200: a flashinfer kernel that would not build, a module
    # missing): out of memory only where the error says so, else the engine's own words.
    (
        re.compile(
            r"Capture (?:[\w -]+ )?(?i:cuda) graph failed: ([^\n]*(?:out of memory|OutOfMemory)[^\n]*)"
        ),
        "CUDA-graph capture ran out of memory: {0}",
    ),
    (
        re.compile(
            r"Capture (?:[\w -]+ )?(?i:cuda) graph failed: ([^\n]*(?:Ninja build failed|Error building)[^\n]*)"
        ),
        "CUDA-graph capture failed: a JIT kernel did not build: {0}",
    ),
    # A draft run in another 16-bit dtype than its target (0.5.17 on the H100: a bfloat16 EAGLE3 draft of a float16
    # target, `--dtype auto`): torch's words, in the draft's capture or its first forward.
    (
        re.compile(r"(expected mat1 and mat2 to have the same dtype, but got: [^\n]*)"),
        "the draft and the target ran in different dtypes: {0} (set `dtype:` under fixed: so both run in one)",
    ),
    # Adaptive candidate steps above the launch's steps (0.5.17 on the H100, `--speculative-num-steps 3` with
    # candidates 1,3,7): the shared logits buffer was sized for the launch's draft tokens only (0.5.20 and later
    # size it for every candidate, `ModelRunner.max_decode_logits_rows`).
    (
        re.compile(r"(shared logits buffer holds \d+ rows but caller needs \d+)"),
        "SGLang sized its shared logits buffer for fewer draft tokens than a step asks: {0} (with adaptive"
        " speculation before 0.5.20, launch at the largest candidate step, or run 0.5.20 or later)",
    ),
    (re.compile(r"Capture (?:[\w -]+ )?(?i:cuda) graph failed: ([^\n]*)"), "CUDA-graph capture failed: {0}"),
    (
        re.compile(r"(?:ModuleNotFoundError|ImportError): (No module named '[^']+')"),
        "SGLang could not import a module it needs: {0} (install it where the server runs)",
    ),
    (re.compile(r"(?:torch\.\w+Error|RuntimeError): CUDA (?:error: )?out of memory"), "CUDA out of memory"),
    (re.compile(r"(Not enough memory\. Please try to increase --mem-fraction-static[^\n]*)"), "{0}"),
    (re.compile(r"(Not enough GPU memory for hybrid \(mamba/linear-attention\) state cache[^\n]*)"), "{0}"),
    (
        re.compile(
            r"(Hybrid \(mamba/linear-attention\) state cache is too small to serve any requests[^\n]*)"
        ),
        "{0}",
    ),
    (re.compile(r"AssertionError: (Can not alloc mamba cache[^\n]*)"), "mamba state allocation failed: {0}"),
    *argparse_reasons("SGLang"),
    (re.compile(r"ValueError: (Unknown speculative algorithm name: [^\n]*)"), "{0}"),
    (
        re.compile(
            r"ValueError: (--speculative-num-steps=\d+ is not in the adaptive config candidate_steps[^\n]*)"
        ),
        "{0}",
    ),
    (re.compile(r"ValueError: ((?:DFLASH|DSpark) [^\n]*)"), "{0}"),
    (re.compile(r"Initialization failed\. warmup error: ([^\n]*)"), "warm-up failed: {0}"),
    (
        re.compile(r"in _handle_eagle_family\n(?:[^\n]*\n){0,4}?TypeError: '>' not supported[^\n]*"),
        "SGLang crashed on --speculative-num-steps without --speculative-eagle-topk (0.5.23 compares the unset "
        "top-k in _handle_eagle_family): set speculative-eagle-topk",
    ),
    (
        re.compile(r"in _handle_eagle_family\n(?:[^\n]*\n){0,4}?AssertionError"),
        "AssertionError in _handle_eagle_family: speculative-eagle-topk or -num-draft-tokens set without "
        "--speculative-num-steps",
    ),
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
        if drafts:
            _, tokens, k_gb, v_gb, kv_gb = drafts[0]
            facts.draft_kv_pool_tokens = int(tokens)
            facts.draft_kv_cache_gb = float(kv_gb) if kv_gb else (float(k_gb) + float(v_gb) if k_gb else None)
    elif post := POST_CAPTURE_KV.search(log):
        facts.kv_pool_tokens, facts.kv_cache_gb = int(post.group(1)), float(post.group(2))
        facts.free_after_pool_gb = float(post.group(3))
    # With a draft model, the target's weights and pool come first, then the draft's (0.5.17 on an H200: free
    # memory 37.70 GB after the target's pool, 12.41 GB after the draft's).
    weights = [float(w) for w in WEIGHT_END.findall(log)]
    if weights:
        facts.weight_gb = weights[0]
        facts.draft_weight_gb = weights[1] if len(weights) > 1 else None
    if pools_end := POOL_END.findall(log):
        facts.free_after_pool_gb = float(pools_end[-1])
    if scheduler := SCHEDULER.search(log):
        facts.token_capacity = int(scheduler.group(1))
        facts.prefill_chunk_tokens = int(scheduler.group(2))
        facts.max_running_requests, facts.context_length = int(scheduler.group(4)), int(scheduler.group(5))
    facts.graph_captures, facts.unfinished_capture = graph_captures(log)
    if facts.graph_captures:
        facts.graph_capture_gb = round(sum(c.gb for c in facts.graph_captures), 3)
        facts.free_after_graphs_gb = facts.graph_captures[-1].free_after_gb
    if mamba := MAMBA_CACHE.search(log):
        facts.state_slots = int(mamba.group(1))
    if oom := CAPTURE_OOM.search(log):
        facts.capture_oom = CaptureOom(float(oom.group(1)), float(oom.group(2)))
    facts.limit_changes = [
        m.group(0) for line in log.splitlines() for p in LIMIT_LINES if (m := p.search(line))
    ]
    # The controller runs (the line is its start-up's): each reply's spec_num_proposed_drafts is then verify
    # steps x (the launch's --speculative-num-draft-tokens - 1) (tokenizer_manager.py, 0.5.17-0.5.23), while
    # the controller drafted 1 to 3 steps of a launch at 7 (the H100, 6 Dec): the count is not the drafts.
    facts.drafts_counted = ADAPTIVE_RUNNING not in log
    return facts


def graph_captures(log: str) -> tuple[list[GraphCapture], GraphCapture | None]:
    """Every CUDA-graph capture that ended, and one that began and never ended (the start-up died in it). The
    sizes are on the begin line or the end line, by release and graph (0.5.17 and 0.5.20: `bs=` on the begin
    line; 0.5.23: on the end line of the target's graph, the begin line of the draft's; a prefill graph's
    `num_tokens=` on its begin line)."""
    done: list[GraphCapture] = []
    pending: GraphCapture | None = None  # begun, not yet ended: captures run one after another
    for line in log.splitlines():
        if begin := CAPTURE_BEGIN.search(line):
            pending = GraphCapture(begin.group(1) or "cuda", 0.0, float(begin.group(2)), _batch_sizes(line))
        elif end := CAPTURE_END.search(line):
            name = end.group(1) or "cuda"
            begun = pending.sizes if pending is not None and pending.graph == name else []
            done.append(
                GraphCapture(name, float(end.group(2)), float(end.group(3)), _batch_sizes(line) or begun)
            )
            pending = None
    return done, pending


def _batch_sizes(line: str) -> list[int]:
    """The batch sizes a capture line lists (`bs=[1, 2, 4]`; `num_tokens=[4096]` for a prefill graph)."""
    if found := BATCH_SIZES.search(line):
        return [int(s) for s in re.findall(r"\d+", found.group(1))]
    return []


# Values SGLang accepts and that make sense (a depth of 10^9 is a typo, not a configuration): type, low, high.

"""The SGLang command line the simulator accepts: 0.5.23's flags, or an older release's (see the profile).

Built with argparse like SGLang's own parser (`prog="sglang serve"`, prefix matching on), so unknown flags fail
with `unrecognized arguments` and `--cuda-graph-max-bs` is ambiguous on 0.5.23, as on the real server.
"""

from __future__ import annotations

import argparse

from sweep.engines.sglang_release import version_tuple

KV_DTYPES = ("auto", "fp8_e5m2", "fp8_e4m3", "mxfp8", "bf16", "bfloat16", "nvfp4", "fp4_mx_block16")
# Releases before the CUDA-graph refactor (PR #23906) had one max-bs flag and the NGRAM window flags.
NEW_FLAGS_FROM = (0, 5, 23)


def build_parser(version: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sglang serve", description=f"SGLang {version} server (specsweep simulator)"
    )
    add = parser.add_argument
    add("--model-path", "--model", required=True, help="The path of the model weights.")
    add("--served-model-name", help="Override the model name returned by the v1/models endpoint.")
    add("--host", default="127.0.0.1", help="The host of the HTTP server.")
    add("--port", type=int, default=30000, help="The port of the HTTP server.")
    add("--tp-size", "--tp", type=int, default=1, help="The tensor parallelism size.")
    add("--trust-remote-code", action="store_true", help="Allow custom models defined on the Hub.")
    add("--log-level", default="info", help="The logging level of all loggers.")
    add("--api-key", help="Set API key of the server.")
    add("--skip-server-warmup", action="store_true", help="Skip warmup.")
    add("--context-length", type=int, help="The model's maximum context length.")
    add("--mem-fraction-static", type=float, help="The fraction of the memory used for static allocation.")
    add("--max-running-requests", type=int, help="The maximum number of running requests.")
    add("--max-queued-requests", type=int, help="The maximum number of queued requests.")
    add("--max-total-tokens", type=int, help="The maximum number of tokens in the memory pool.")
    add(
        "--chunked-prefill-size",
        type=int,
        help="The maximum number of tokens in a chunk for chunked prefill.",
    )
    add(
        "--max-prefill-tokens",
        type=int,
        default=16384,
        help="The maximum number of tokens in a prefill batch.",
    )
    add("--page-size", type=int, help="The number of tokens in a page.")
    add(
        "--schedule-conservativeness",
        type=float,
        default=1.0,
        help="How conservative the schedule policy is.",
    )
    add("--disable-overlap-schedule", action="store_true", help="Disable the overlap scheduler.")
    add("--enable-mixed-chunk", action="store_true", help="Mix prefill and decode in a batch.")
    add("--max-mamba-cache-size", type=int, help="The maximum size of the mamba cache.")
    add(
        "--mamba-full-memory-ratio",
        type=float,
        help="The ratio of mamba state memory to full KV cache memory.",
    )
    add(
        "--mamba-ssm-dtype",
        choices=("float32", "bfloat16", "float16"),
        help="The data type of the SSM states.",
    )
    add("--kv-cache-dtype", default="auto", choices=KV_DTYPES, help="Data type for kv cache storage.")
    add("--disable-radix-cache", action="store_true", help="Disable RadixAttention for prefix caching.")
    add(
        "--allow-auto-truncate",
        action="store_true",
        help="Truncate requests that exceed the maximum input length.",
    )
    add("--attention-backend", help="Choose the kernels for attention layers.")
    add("--enable-metrics", action="store_true", help="Enable log prometheus metrics.")
    add(
        "--enable-cache-report",
        action="store_true",
        help="Return cached tokens in usage.prompt_tokens_details.",
    )
    add("--decode-log-interval", type=int, default=40, help="The log interval of decode batch.")
    add("--speculative-algorithm", help="Speculative algorithm.")
    add(
        "--speculative-draft-model-path",
        "--speculative-draft-model",
        help="The path of the draft model weights.",
    )
    add("--speculative-draft-model-revision", help="The specific draft model version to use.")
    add(
        "--speculative-num-steps",
        type=int,
        help="The number of steps sampled from draft model in Speculative Decoding.",
    )
    add(
        "--speculative-eagle-topk",
        type=int,
        help="The number of tokens sampled from the draft model in eagle2 each step.",
    )
    add(
        "--speculative-num-draft-tokens",
        type=int,
        help="The number of tokens sampled from the draft model in Speculative Decoding.",
    )
    add(
        "--speculative-accept-threshold-single",
        type=float,
        default=1.0,
        help="Accept a draft token if its probability in the target model is greater than this threshold.",
    )
    add(
        "--speculative-accept-threshold-acc",
        type=float,
        default=1.0,
        help="The accept probability of a draft token is raised from its target probability p to min(1, p / threshold_acc).",
    )
    add(
        "--speculative-attention-mode",
        choices=("prefill", "decode"),
        default="prefill",
        help="Attention backend for speculative decoding operations.",
    )
    add("--speculative-draft-kv-cache-dtype", help="Data type for the draft model's kv cache.")
    add(
        "--speculative-adaptive",
        action="store_true",
        help="Adjust num_steps at runtime from the acceptance rate.",
    )
    add(
        "--speculative-adaptive-config",
        help="JSON with per-batch-size candidate_steps for adaptive speculative decoding.",
    )
    add(
        "--speculative-ngram-min-bfs-breadth",
        type=int,
        default=1,
        help="The minimum breadth for BFS in ngram speculative decoding.",
    )
    add(
        "--speculative-ngram-max-bfs-breadth",
        type=int,
        default=10,
        help="The maximum breadth for BFS in ngram speculative decoding.",
    )
    add(
        "--speculative-ngram-match-type",
        choices=("BFS", "PROB"),
        default="BFS",
        help="The match type for the ngram cache.",
    )
    add(
        "--speculative-ngram-max-trie-depth",
        type=int,
        default=18,
        help="The max trie depth for ngram speculative decoding.",
    )
    add(
        "--speculative-ngram-capacity",
        type=int,
        default=10_000_000,
        help="The cache capacity for ngram speculative decoding.",
    )
    if version_tuple(version) >= NEW_FLAGS_FROM:
        add("--cuda-graph-max-bs-decode", type=int, help="Set the maximum batch size for decode cuda graph.")
        add(
            "--cuda-graph-max-bs-prefill",
            type=int,
            help="Set the maximum number of tokens for prefill cuda graph.",
        )
        add(
            "--cuda-graph-bs-decode",
            type=int,
            nargs="+",
            help="Set the list of batch sizes for decode cuda graph.",
        )
        add(
            "--cuda-graph-bs-prefill",
            type=int,
            nargs="+",
            help="Set the list of token counts for prefill cuda graph.",
        )
        add(
            "--cuda-graph-backend-decode",
            choices=("full", "breakable", "disabled"),
            help="The decode cuda graph backend.",
        )
        add(
            "--cuda-graph-backend-prefill",
            choices=("full", "breakable", "disabled"),
            help="The prefill cuda graph backend.",
        )
        add("--disable-decode-cuda-graph", action="store_true", help="Disable decode cuda graph.")
        add("--disable-prefill-cuda-graph", action="store_true", help="Disable prefill cuda graph.")
        add("--cuda-graph-config", help="JSON config for the cuda graphs (wins over the other flags).")
    else:
        add("--cuda-graph-max-bs", type=int, help="Set the maximum batch size for cuda graph.")
        add("--cuda-graph-bs", type=int, nargs="+", help="Set the list of batch sizes for cuda graph.")
        add(
            "--speculative-ngram-min-match-window-size",
            type=int,
            default=1,
            help="The minimum window size for pattern matching in ngram speculative decoding.",
        )
        add(
            "--speculative-ngram-max-match-window-size",
            type=int,
            default=12,
            help="The maximum window size for pattern matching in ngram speculative decoding.",
        )
        add(
            "--speculative-ngram-branch-length",
            type=int,
            default=18,
            help="The branch length for ngram speculative decoding.",
        )
    add("--disable-cuda-graph", action="store_true", help="Disable cuda graph (deprecated).")
    add_sim_flags(parser)
    return parser


def add_sim_flags(parser: argparse.ArgumentParser) -> None:
    """The simulator's own flags, the same behind every engine's front end."""
    sim = parser.add_argument_group("specsweep simulator (not the engine's flags)")
    sim.add_argument(
        "--sim-profile", help="Performance-model profile (YAML); default: the report-000 profile."
    )
    sim.add_argument(
        "--sim-time-scale",
        type=float,
        default=1.0,
        help="Multiply every simulated delay (0.01: 100x faster).",
    )
    sim.add_argument(
        "--sim-startup-scale",
        type=float,
        default=None,
        help="Multiply the start-up delays (load, graph capture, warm-up) by this instead (default: the time "
        "scale): a server measured by the client's clock decodes in real time and still starts in seconds.",
    )
    sim.add_argument(
        "--sim-seed",
        type=int,
        default=None,
        help="Seed of the simulated noise and acceptance (default: a new seed per launch, as a real server "
        "drifts from launch to launch; set it only for a deterministic run).",
    )
    sim.add_argument(
        "--sim-seed-file",
        help="A file holding the next seed: each launch takes it and writes the one after, so launches differ "
        "and a whole run repeats exactly (tests).",
    )
    sim.add_argument(
        "--sim-speed-factor",
        type=float,
        default=1.0,
        help="Make this launch truly this many times faster (1.05: +5%%), for testing verdicts against a known truth.",
    )
    sim.add_argument(
        "--sim-fault",
        action="append",
        default=[],
        metavar="NAME[=N]",
        help="Have this fault (repeatable; see sweep/sim/faults.py): exit-at-start, never-healthy, odd-bytes, "
        "ignore-term, daemonise, escape-group, crash-mid-stream=N, crash-after=N, http-error=CODE, "
        "malformed-sse, cut-sse, stall=N.",
    )


def startup_scale(args: argparse.Namespace) -> float:
    """How much of the modelled start-up time a launch really waits."""
    return float(args.sim_time_scale if args.sim_startup_scale is None else args.sim_startup_scale)


def normalize(args: argparse.Namespace) -> argparse.Namespace:
    """Give old releases' namespaces the attributes the model reads."""
    if not hasattr(args, "cuda_graph_max_bs_decode"):
        args.cuda_graph_max_bs_decode = getattr(args, "cuda_graph_max_bs", None)
        args.cuda_graph_max_bs_prefill = None
    if getattr(args, "cuda_graph_backend_decode", None) == "disabled" or getattr(
        args, "disable_decode_cuda_graph", False
    ):
        args.disable_cuda_graph = True
    if getattr(args, "cuda_graph_backend_prefill", None) == "disabled" or getattr(
        args, "disable_prefill_cuda_graph", False
    ):
        args.cuda_graph_max_bs_prefill = 0
    return args

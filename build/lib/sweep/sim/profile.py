"""A simulator profile: model geometry, GPU memory, speeds and acceptance, held in a YAML file."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self, TypeVar

import yaml

from sweep.core.errors import UserError

PROFILES = Path(__file__).parent / "profiles"
DEFAULT_PROFILE = PROFILES / "qwen3.8-27b-int4-32gb.yaml"
T = TypeVar("T")


def _section(cls: type[T], data: Any, where: str) -> T:
    if not isinstance(data, dict):
        raise UserError(
            f"profile section '{where}' is missing or not a mapping", "see sweep/sim/profiles/ for the shape"
        )
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    names = {f.name for f in fields}
    unknown = sorted(set(data) - names)
    # A key with a default may be left out (a profile written before it existed).
    missing = sorted(f.name for f in fields if f.name not in data and f.default is dataclasses.MISSING)
    if unknown or missing:
        what = f"unknown key '{unknown[0]}'" if unknown else f"missing key '{missing[0]}'"
        raise UserError(f"profile section '{where}': {what}", f"its keys are: {', '.join(sorted(names))}")
    return cls(**data)


@dataclass(frozen=True)
class Geometry:
    path: str
    architecture: str
    context_length: int
    num_hidden_layers: int
    kv_layers: int
    kv_heads_x_head_dim: int
    mtp_layers: int
    mtp_misread: bool
    hybrid_state_slots_per_request: int
    max_mamba_cache_size: int
    weight_gb: float
    vocab_draft_gb: float
    # Whether the model ships a chat template (an instruction-tuned model); false: a base model, which the
    # server can only continue (its chat routes and /tokenize with messages answer 400).
    chat_template: bool = True

    @property
    def hybrid(self) -> bool:
        """Whether the model keeps a state cache (mamba / linear attention) beside its KV: a dense one has none."""
        return self.hybrid_state_slots_per_request > 0


@dataclass(frozen=True)
class Gpu:
    memory_gb: float
    other_static_gb: float
    runtime_reserve_gb: float
    cuda_context_gb: float  # used outside PyTorch's view (context, NCCL): SGLang's "avail mem" never sees it


@dataclass(frozen=True)
class Graphs:
    decode_gb_per_bucket: float
    prefill_gb_base: float
    prefill_gb_per_1k_tokens: float
    default_max_bs_decode: int
    default_max_bs_prefill: int
    default_chunked_prefill: int


@dataclass(frozen=True)
class Speed:
    decode_ms: float
    decode_ms_at_128k: float
    step_ms: float
    per_draft_ms: float
    step_ms_at_128k_extra: float
    batch_growth: float
    per_verify_token_ms: float  # a forward's extra cost per token: 15% of it below the knee, all of it past
    verify_knee_tokens: int  # tokens per forward (running x verified) the GPU takes at about the cost of one
    draft_width_cost: float  # drafting a tree: extra draft time per additional node per level
    prefill_tok_s: float
    prefill_quadratic_s_per_token2: float
    startup_s: float
    capture_s_per_bucket: float
    # Each verified token reads the context again (Triton attention at batch 1 on the H100: a step of 15 NGRAM
    # tokens took 1.8 ms longer at 1K tokens of prompt, EAGLE3's 4 tokens 0.56 ms): ms per token at 128K.
    verify_ms_per_token_at_128k: float = 0.0
    # NGRAM's verify where its context cost a step did not grow with its width (the H100: +1.8 ms for 15
    # tokens, +2.1 for 8, at 1K tokens of prompt): ms a step at 128K; 0: per verified token as above.
    ngram_context_ms_at_128k: float = 0.0
    # NGRAM looks every running request up in its corpus on the CPU, one after another (the H100: a step of 5.1-5.3
    # ms at 4 streams against 2.6 at one, whether 9 or 16 tokens were verified): ms a step per further request.
    ngram_ms_per_request: float = 0.0
    # A draft model's own fixed cost a step (its extend over the accepted tokens, its graphs' launches), which
    # NGRAM does not pay: the H100's forced-acceptance profile measured EAGLE3 at 1 draft step 3.5 ms a step
    # against NGRAM's 2.6 ms, and each further draft step only 0.17 ms more.
    draft_model_ms: float = 0.0
    # SGLang's adaptive controller's own cost a step (its runtime states, one set of graphs per candidate): the
    # H100 under 0.5.17 took 4.2-4.4 ms a step while the controller switched between 1 and 3 steps, whose static
    # steps cost 3.3-3.5 ms.
    adaptive_ms: float = 0.0


@dataclass(frozen=True)
class Acceptance:
    code: float
    tool: float
    prose: float
    at_128k: float
    tree_gain: (
        float  # per-position acceptance 1 - (1 - a)^(width^tree_gain): wider levels, diminishing returns
    )
    ngram_code: float
    ngram_tool: float
    ngram_prose: float
    # An answer that copies its prompt, drafted from n-grams of the answer alone (SGLang's NGRAM): it finds
    # nothing until the answer repeats itself. None: as prose (the H200's 1.16 a step on edits and quotes).
    ngram_copy: float | None = None

    def per_token(self, workload: str, ngram: bool) -> float:
        return float(getattr(self, f"ngram_{workload}" if ngram else workload))

    def answer_only_copy(self) -> float:
        return self.ngram_prose if self.ngram_copy is None else self.ngram_copy


@dataclass(frozen=True)
class Profile:
    name: str
    # The release whose command line the simulator parses: one with a committed table (0.5.20, 0.5.23), else
    # the nearest one (`sweep/releases/sglang.py`).
    sglang_version: str
    model: Geometry
    gpu: Gpu
    graphs: Graphs
    speed: Speed
    acceptance: Acceptance
    # Noise, as relative standard deviations: of each decode step, of a whole request (a prompt's own pace),
    # and of a whole launch (a server that happens to run slower or faster, as real launches do).
    noise: float
    request_noise: float = 0.0
    launch_drift: float = 0.0
    # Speculation that changes what the model says (users report MTP breaking tool calls): with at least this
    # many speculative steps the output diverges from the greedy text after `broken_output_after` tokens.
    broken_output_min_steps: int = 0
    broken_output_after: int = 12
    source: Path | None = None

    @classmethod
    def load(cls, path: Path) -> Self:
        if not path.is_file():
            raise UserError(
                f"simulator profile {path} does not exist",
                f"pass --sim-profile a file like {DEFAULT_PROFILE}",
            )
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise UserError(
                f"simulator profile {path} is not valid YAML ({exc.__class__.__name__})", "fix its syntax"
            ) from None
        if not isinstance(data, dict):
            raise UserError(
                f"simulator profile {path} is not a mapping", "see sweep/sim/profiles/ for the shape"
            )
        try:
            return cls(
                name=str(data["name"]),
                sglang_version=str(data["sglang_version"]),
                model=_section(Geometry, data.get("model"), "model"),
                gpu=_section(Gpu, data.get("gpu"), "gpu"),
                graphs=_section(Graphs, data.get("graphs"), "graphs"),
                speed=_section(Speed, data.get("speed"), "speed"),
                acceptance=_section(Acceptance, data.get("acceptance"), "acceptance"),
                noise=float(data.get("noise", 0.0)),
                request_noise=float(data.get("request_noise", 0.0)),
                launch_drift=float(data.get("launch_drift", 0.0)),
                broken_output_min_steps=int(data.get("broken_output_min_steps", 0)),
                broken_output_after=int(data.get("broken_output_after", 12)),
                source=path,
            )
        except KeyError as exc:
            raise UserError(
                f"simulator profile {path} has no '{exc.args[0]}'", "add it (see the default profile)"
            ) from None

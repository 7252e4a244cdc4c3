"""The engine interface. Everything that differs between serving engines lives behind it, one file per engine."""

from __future__ import annotations

import functools
import os
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

import httpx

from sweep.core.errors import UserError
from sweep.engines.endpoints import Turn, chat_messages, read_top_logprobs
from sweep.engines.values import (
    DraftCounters,
    LaunchPlan,
    Params,
    PromptForm,
    RequestSettings,
    RunningLimit,
    ServerCommand,
    ServerReport,
    ServerSetup,
    SyntheticAcceptance,
)
from sweep.launch.server import ExitPatterns, reason_from_log
from sweep.model.doctor import EngineRules
from sweep.records import DraftAsk, LaunchFacts, RequestStatus, SpecShape, WindowPool
from sweep.replay import ReplayArm

# Engines by name: every subclass with a name joins (`engines/__init__.py` imports each engine's module).
REGISTRY: dict[str, type[Engine]] = {}


class Engine(ABC):
    """One kind of server. Subclasses turn a trial's parameters into argv and read what the server says."""

    name: ClassVar[str]
    # The port the server listens on by default: exported command lines use it.
    default_port: ClassVar[int]
    # A start-up time to plan with before any launch was measured (load, warm-up, graph capture), in seconds.
    typical_startup_s: ClassVar[float] = 60.0
    # Whether a request's final chunk says how many tokens were drafted for it; where not, acceptance over a
    # batch comes from the server's counters alone.
    drafts_per_request: ClassVar[bool] = True
    # Whether a draft's KV lives in the target's pool, sized for both per token (SGLang's and vLLM's one
    # memory budget), so the doctor holds the pool against their sum; where not, the draft has its own cache.
    draft_shares_pool: ClassVar[bool] = True
    # Why a server exits during start: (pattern, reason) pairs, most specific first; and its name in reasons.
    exit_patterns: ClassVar[ExitPatterns] = ()
    server_label: ClassVar[str] = "the server"
    # What the server logs once it serves requests (readiness, read from any log by `inspect-log`).
    ready_marker: ClassVar[str] = ""
    # Environment variables the server reads before its CLI: removed from the child's environment.
    env_prefixes: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:
            REGISTRY[cls.name] = cls

    def __init__(self, setup: ServerSetup) -> None:
        self.setup = setup

    # --- set-up ------------------------------------------------------------------------------------------
    @classmethod
    @abstractmethod
    def default_launcher(cls, binary: str) -> list[str]:
        """The argv prefix that starts the server when the space gives no launcher (`binary` may be "embedded")."""

    @classmethod
    @abstractmethod
    def resolve_model(cls, model: str) -> str:
        """The model argument for the server, checked ("embedded" means the demo's own model where there is one)."""

    def prepare(self) -> None:
        """Once per study, before any launch: learn what the installed server accepts."""

    # --- parameters and launch -------------------------------------------------------------------------
    @abstractmethod
    def known_params(self) -> list[str]:
        """Parameter names a space may set or sweep."""

    @abstractmethod
    def check_value(self, name: str, value: Any) -> None:
        """Raise UserError if `name` is unknown or `value` is not one the engine accepts."""

    def check_params(self, params: Params) -> None:
        """Check a whole trial's parameters: each value, then combinations."""
        for name, value in params.items():
            self.check_value(name, value)

    def derive(self, params: dict[str, Any]) -> dict[str, Any]:
        """Set values the server would force anyway (so no two trials differ only in an ignored value)."""
        return params

    def plan(self, params: Params, synthetic_length: float | None = None) -> LaunchPlan:
        """A trial's parameters as the server will run them (derived), checked (an invalid one is not also
        called infeasible), measured against the engine's constraints, with what the launch, the doctor and the
        record need to know of them: the one call a trial makes before its launch. `synthetic_length`: force
        that acceptance length on a speculative configuration (a cost profile's launch; refused where the
        engine has no switch for it, ignored without speculation)."""
        derived = self.derive(dict(params))
        try:
            self.check_params(derived)
        except UserError as exc:
            try:  # the record says what was asked where the values can say it
                shape = self.spec_shape(derived)
            except (TypeError, ValueError):
                shape = None
            return LaunchPlan(derived, invalid=str(exc), shape=shape)
        speculative, shape = self.wants_speculation(derived), self.spec_shape(derived)
        synthetic = self.synthetic_acceptance(synthetic_length) if synthetic_length and speculative else None
        refused = ""
        if synthetic_length and speculative and synthetic is None:
            refused = f"{self.name} has no switch that forces an acceptance length"
        elif synthetic and shape and not 1 <= synthetic.length <= shape.reach + 1:
            # SGLang clamps it, llama.cpp refuses to start: neither measures the length asked.
            refused = (
                f"a forced acceptance length of {synthetic.length:g} is outside 1..{shape.reach + 1} "
                "(1 + the draft positions a step can accept)"
            )
        return LaunchPlan(
            derived,
            self.constraints(derived),
            invalid=refused,
            shape=shape,
            speculative=speculative,
            draft_in_pool=speculative and self.draft_shares_pool,
            kv_dtype=self.kv_cache_dtype(derived),
            server_per_workload=self.speculative_state_persists(derived),
            synthetic=synthetic,
        )

    def command(self, plan: LaunchPlan, port: int) -> ServerCommand:
        """The command line, environment and readiness path of one server of `plan` listening on `port`."""
        params, env = plan.params, self.env()
        if plan.synthetic:
            params, env = {**params, **plan.synthetic.params}, {**env, **plan.synthetic.env}
        argv = self.argv(params, port)
        if plan.synthetic:
            argv = [*argv, *plan.synthetic.argv]
        return ServerCommand(argv, env, self.health_path(), self.measuring_argv())

    def synthetic_acceptance(self, length: float) -> SyntheticAcceptance | None:
        """The engine's switch that forces a mean acceptance length `length` (>= 1) on a speculative server,
        or None where it has none (the base: none)."""
        return None

    def constraints(self, params: Params) -> dict[str, float]:
        """Optuna constraints on a combination (feasible when every value <= 0); infeasible ones are not launched."""
        return {}

    @abstractmethod
    def baseline_params(self) -> dict[str, Any]:
        """The parameters that turn speculation off."""

    @abstractmethod
    def wants_speculation(self, params: Params) -> bool: ...

    def schedule_params(
        self, params: Params, depths: list[tuple[int, int]], config: str
    ) -> dict[str, Any] | None:
        """Launch parameters that run `params` with a depth per batch size ((lowest batch size, depth) pairs),
        the engine's schedule written to the file `config`; None where the engine has no depth schedule."""
        return None

    @classmethod
    def schedule_form(
        cls, method: str, depths: list[tuple[int, int]], max_batch: int
    ) -> dict[str, Any] | None:
        """A depth schedule measured on any engine in this engine's own form, for people who serve with it
        (None: the engine has no form to offer beside its launch)."""
        return None

    def schedule_file(self, depths: list[tuple[int, int]]) -> dict[str, Any] | None:
        """The content of the file `schedule_params` names (JSON), if the engine reads one."""
        return None

    @classmethod
    def schedule_runs(cls, shape: SpecShape) -> bool:
        """Whether a measured configuration of this shape can be a step of the engine's depth schedule (which
        changes its depth only), so that the schedule is picked among configurations the engine can run."""
        return True

    def spec_shape(self, params: Params) -> SpecShape | None:
        """The depth, tree width and draft budget these (derived) parameters run with; None without speculation
        or where the engine cannot say."""
        return None

    def kv_cache_dtype(self, params: Params) -> str:
        """The KV cache's element type these parameters launch with, by the engine's name for it."""
        return "auto"

    @classmethod
    def draft_layers_read(cls, config: Mapping[str, Any]) -> tuple[int, str] | None:
        """How many draft (MTP) layers the engine reads from a model's config.json when it sizes the KV pool,
        and the key it reads, where that can differ from the truth in the tensors (None: it reads the truth)."""
        return None

    @classmethod
    def graph_pins(cls, decode_max: int | None, prefill_max: int | None) -> dict[str, Any]:
        """Parameters that cap CUDA-graph capture at the largest decode batch and prefill size a server can run
        (None: no cap needed there); empty where the engine captures no graphs or has no such flags."""
        return {}

    def draft_ask(self, params: Params) -> DraftAsk | None:
        """The draft these (derived) parameters load, for the doctor to hold against the model's files before
        launch; None where nothing drafts or drafts are looked up (n-gram)."""
        return None

    def doctor_rules(self, params: Mapping[str, Any], tensor_parallel: int | None = None) -> EngineRules:
        """What the doctor holds a launch with these parameters to (`tensor_parallel`: the flags' unless given)."""
        derived = self.derive(dict(params))
        return EngineRules(
            self.draft_layers_read,
            self.graph_pins,
            tensor_parallel if tensor_parallel is not None else self.tensor_parallel(derived),
            functools.partial(self.window_pool, params=derived),
            self.draft_ask(derived) if self.wants_speculation(derived) else None,
        )

    def window_pool(self, config: Mapping[str, Any], params: Params) -> WindowPool:
        """How the engine holds a model's sliding-window layers (`config`: its config.json as read)."""
        return WindowPool(True, None, f"{self.name} keeps the window's tokens only")

    def tensor_parallel(self, params: Params) -> int:
        """GPUs one copy of the model is split over (its KV heads with it)."""
        return 1

    def memory_share(self, gpu_gb: float, params: Params) -> tuple[float, str] | None:
        """The share of a GPU's memory the engine fills with weights and caches, and where that number comes
        from (the flag, or the engine's default for that GPU); None where no share decides its pool."""
        return None

    def running_limit(self, params: Params) -> RunningLimit | None:
        """The most requests a server launched with these (derived) parameters decodes at once, where the flags
        alone decide it (None where memory decides, at start-up)."""
        return None

    @classmethod
    def ran(cls, argv: list[str]) -> bool:
        """Whether a recorded command line is this engine's (for studies made before the engine was stored)."""
        return False

    @abstractmethod
    def argv(self, params: Params, port: int) -> list[str]: ...

    def measuring_argv(self) -> list[str]:
        """The flags `argv` adds only so specsweep can read the server, that a server in service would pay for (a
        debug log level, a log line every decode step); `argv` puts them after the user's own. The base: none."""
        return []

    def env(self) -> dict[str, str]:
        return {k: v for k, v in os.environ.items() if not k.startswith(self.env_prefixes or ("\0",))}

    def health_path(self) -> str:
        """The path that answers 200 once the server serves requests."""
        return "/health"

    # --- what the server says about itself --------------------------------------------------------------
    def launch_facts(self, log: str) -> LaunchFacts:
        """What a launch's log says, with what the engine knows itself: its name, the model, and the weights'
        size where the log does not give it (a single model file weighs what the file does)."""
        facts = self.facts_from_log(log)
        facts.engine, facts.model = self.name, self.setup.model
        if facts.weight_gb is None and os.path.isfile(self.setup.model):
            facts.weight_gb = round(os.path.getsize(self.setup.model) / 1e9, 3)
        return facts

    @classmethod
    @abstractmethod
    def facts_from_log(cls, log: str) -> LaunchFacts:
        """What a server log says about a launch (any log file: `specsweep inspect-log` has no server)."""

    def exit_reason(self, log: str, returncode: int) -> str:
        """Why a server that exited during start did so, in one line, read from its log by the engine's table
        of exit patterns (else its last line)."""
        return reason_from_log(log, returncode, self.exit_patterns, self.server_label)

    def inspect_running(self, client: httpx.Client, facts: LaunchFacts, params: Params, log: str) -> None:
        """Fill facts from the running server's API (whether it serves a chat template among them); raise
        SpeculationInactive if speculation was asked for and is not on."""

    # --- requests ------------------------------------------------------------------------------------------
    @abstractmethod
    async def request(
        self,
        client: httpx.AsyncClient,
        content: str,
        form: PromptForm,
        settings: RequestSettings,
        history: tuple[Turn, ...] = (),
    ) -> tuple[str, dict[str, Any]]:
        """The path and streamed body of one measured request (prompt cache off, reports on, fixed sampling):
        `content` as a user message through the model's chat template after the conversation's earlier turns
        (CHAT), or as text to continue (COMPLETION, no history). Built before the request's clock starts."""

    async def top_tokens(
        self,
        client: httpx.AsyncClient,
        content: str,
        form: PromptForm,
        answered: str,
        history: tuple[Turn, ...] = (),
        choices: int = 5,
    ) -> tuple[tuple[str, float], ...]:
        """The server's `choices` likeliest next tokens after `answered`, the start of its answer to `content`
        (greedy, one token), with their log-probabilities, likeliest first; () where it gives none. Through the
        OpenAI endpoints all three engines serve: the answer so far continues the prompt (completion) or is the
        assistant's unfinished turn (chat, `continue_fields`)."""
        body: dict[str, Any] = {"max_tokens": 1, "temperature": 0.0}
        if form is PromptForm.COMPLETION:
            path, body = "/v1/completions", {**body, "prompt": content + answered, "logprobs": choices}
        else:
            messages = [*chat_messages(content, history), {"role": "assistant", "content": answered}]
            path = "/v1/chat/completions"
            body = {
                **body,
                "messages": messages,
                "logprobs": True,
                "top_logprobs": choices,
                **self.continue_fields(),
            }
        try:
            response = await client.post(path, json=body)
            return read_top_logprobs(response.json()) if response.status_code == 200 else ()
        except (httpx.HTTPError, ValueError):  # no answer, or one that is not JSON: nothing to rank
            return ()

    def continue_fields(self) -> dict[str, Any]:
        """What a chat request adds so that the server continues the assistant's last message rather than
        closing it and opening a new turn (llama-server does so by itself)."""
        return {}

    async def template_tokens(self, client: httpx.AsyncClient) -> int:
        """Tokens the chat template puts before every user message (the same in every request, so a prefix
        cache may serve them): a request in the chat form may report that many cached tokens and stay cold."""
        return 0

    @abstractmethod
    def has_token(self, chunk: dict[str, Any]) -> bool:
        """Whether a streamed chunk carries generated text (for the client's time to first token)."""

    @abstractmethod
    def read_final(self, chunk: dict[str, Any]) -> ServerReport | None:
        """The server's report on a request, if this streamed chunk carries it."""

    @abstractmethod
    def classify_error(self, status_code: int, body: str) -> tuple[RequestStatus, str]:
        """Map an HTTP error to 'does_not_fit' (prompt over the limit) or 'error', with the server's message."""

    @abstractmethod
    def text_so_far(self, chunk: dict[str, Any], text: str) -> str:
        """The generated text after this streamed chunk (`text` is what came before it)."""

    @abstractmethod
    def finish_reason(self, chunk: dict[str, Any]) -> str:
        """Why the answer ended, if this streamed chunk says: "stop" (end of text or a stop word), "length"
        (max_tokens); "" where it does not."""

    @abstractmethod
    async def tokenize(self, client: httpx.AsyncClient, text: str) -> list[int]:
        """Token ids of `text` by the server's own tokenizer (no special tokens added)."""

    def output_ids_so_far(self, chunk: dict[str, Any], ids: tuple[int, ...]) -> tuple[int, ...]:
        """The answer's token ids after this streamed chunk (`ids`: those before it), where the engine's stream
        carries them; an engine whose stream carries none keeps `ids` as they are (empty)."""
        return ids

    async def prompt_ids(
        self, client: httpx.AsyncClient, content: str, form: PromptForm, history: tuple[Turn, ...] = ()
    ) -> tuple[int, ...] | None:
        """The prompt's token ids as the server itself tokenizes a request (after the chat template, special
        tokens added), where the engine can say; None where it cannot."""
        return None

    def replay_arms(self) -> tuple[ReplayArm, ...]:
        """The drafter configurations whose acceptance this engine's release can be replayed for from a
        baseline's token ids (`sweep.replay`); none where no replayer follows its drafters."""
        return ()

    async def count_tokens(self, client: httpx.AsyncClient, text: str) -> int:
        return len(await self.tokenize(client, text))

    async def flush(self, client: httpx.AsyncClient) -> str:
        """Drop cached prefixes (and speculative state) before a batch, where the engine has a way to.
        Returns "" when done or nothing needs doing, else why it failed (the batch is then not measured)."""
        return ""

    def speculative_state_persists(self, params: Params) -> bool:
        """Whether speculation with these parameters keeps state across requests that a flush does not clear
        (an n-gram pool): such a server is restarted for each workload, so no workload feeds another."""
        return False

    async def draft_counters(self, client: httpx.AsyncClient) -> DraftCounters | None:
        """Cumulative speculative counters, where the engine exposes them."""
        return None

    async def acceptance_gauge(self, client: httpx.AsyncClient) -> float | None:
        """The server's own acceptance length (tokens per verify step, the bonus included) of its most recent
        decode batches, where it publishes one: read after a batch, beside the length measured per request."""
        return None

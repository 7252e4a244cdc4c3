"""Reading a search space file: engine, server, fixed flags, swept parameters, workloads, objectives.

```yaml
engine: llamacpp
server: {binary: embedded, model: embedded, port: 0, startup_timeout: 120, extra_args: []}
fixed: {ctx-size: 8192, parallel: 1, threads: 2}
params:
  spec-type: {choices: [ngram-simple, ngram-mod]}
  spec-ngram-mod-n-min: {int: [8, 48], step: 8, when: {spec-type: ngram-mod}}
enqueue: [{spec-type: ngram-mod}]          # tried right after the baseline
workloads:
  - {class: code}
  - {class: tool, context: [2048, 8192], streams: [1, 2]}
  - {class: prose, rate: [0.5, 1, 2], requests: 8}    # open loop: Poisson arrivals (arrivals: constant)
  - {name: mine, file: prompts.jsonl, form: completion}   # form: chat | completion (default: the model's)
probe: {repeats: 3, max_tokens: 128, seed: 1234}
objective: per-workload                    # or {workload: tool}
trials: 20
search: model                              # or tpe
```
"""

from __future__ import annotations

import dataclasses
import functools
import math
import socket
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from sweep.core.errors import UserError
from sweep.core.files import read_text
from sweep.engines.endpoints import Turn
from sweep.engines.values import PromptForm, RequestSettings
from sweep.probes.datasets import SELECTION_KEYS, Selection, load_dataset
from sweep.probes.settings import DEFAULT_REPEATS, ProbeSettings
from sweep.probes.workloads import (
    BUILTIN,
    BUILTIN_CLASSES,
    CAPACITY_RECHECKS,
    DEFAULT_CAPACITY_STEPS,
    DEFAULT_OPEN_REQUESTS,
    Arrivals,
    Workload,
)
from sweep.records import LATENCY_LIMIT
from sweep.space.shipped import example_path
from sweep.space.spec import ConfirmSettings, ParamSpec, SearchKind, ServerSpec, Space

TOP_KEYS = {
    "engine",
    "server",
    "fixed",
    "params",
    "enqueue",
    "workloads",
    "probe",
    "objective",
    "trials",
    "seed",
    "confirm",
    "latency_limits",
    "search",
}
CONFIRM_KEYS = {"top", "launches", "max_launches", "min_gain"}
SERVER_KEYS = {"binary", "launcher", "model", "port", "host", "startup_timeout", "stop_timeout", "extra_args"}
PROBE_KEYS = {
    "repeats",
    "max_tokens",
    "seed",
    "ignore_eos",
    "warmup",
    "stall_timeout_s",
    "request_timeout_s",
    "trial_timeout_s",
}
MAX_TOKENS_LIMIT = 131072  # more than any model writes in one answer: a larger value is a typo
WEEK_S = 7 * 24 * 3600.0
DEFAULT_TRIALS = 20


def _fail(where: str, problem: str, fix: str) -> UserError:
    return UserError(f"{where}: {problem}", fix)


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _fail(
            where, f"expected a mapping, got {type(value).__name__}", "write it as `key: value` lines"
        )
    return value


def _unknown_keys(data: Mapping[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise _fail(where, f"unknown key '{unknown[0]}'", f"allowed keys: {', '.join(sorted(allowed))}")


def _number(
    value: Any, where: str, example: str, low: float, high: float = math.inf, integer: bool = True
) -> Any:
    """`value` as a number within [low, high] (an int where `integer`), or a one-line refusal naming `where`."""
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    if not is_number or not math.isfinite(value) or (integer and not float(value).is_integer()):
        kind = "a whole number" if integer else "a number"
        raise _fail(where, f"{value!r} is not {kind}", f"e.g. `{example}`")
    if not low <= value <= high:
        bounds = f"from {_shown(low)} to {_shown(high)}" if math.isfinite(high) else f"at least {_shown(low)}"
        raise _fail(where, f"{value!r} is out of range", f"give a value {bounds}, e.g. `{example}`")
    return int(value) if integer else float(value)


def _shown(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else f"{bound:g}"


def _resolvable(host: str) -> str:
    try:
        socket.getaddrinfo(host, None)
    except (OSError, UnicodeError):
        raise _fail(
            "server.host", f"'{host}' does not resolve to an address", "use 127.0.0.1 (the default)"
        ) from None
    return host


def _as_tuple(value: Any) -> tuple[Any, ...]:
    return tuple(value) if isinstance(value, list | tuple) else (value,)


def _param(name: str, raw: Any, where: str) -> ParamSpec:
    raw = _mapping(raw, where)
    _unknown_keys(raw, {"choices", "int", "float", "step", "log", "when", "when_not"}, where)
    kinds = [k for k in ("choices", "int", "float") if k in raw]
    if len(kinds) != 1:
        raise _fail(
            where, "needs exactly one of choices, int or float", "e.g. `{int: [1, 8]}` or `{choices: [a, b]}`"
        )
    when = {k: _as_tuple(v) for k, v in _mapping(raw.get("when"), f"{where}.when").items()}
    when_not = {k: _as_tuple(v) for k, v in _mapping(raw.get("when_not"), f"{where}.when_not").items()}
    if kinds[0] == "choices":
        choices = raw["choices"]
        if not isinstance(choices, list) or not choices:
            raise _fail(
                where, "choices must be a non-empty list", "e.g. `choices: [ngram-simple, ngram-mod]`"
            )
        return ParamSpec(name, choices=tuple(choices), when=when, when_not=when_not)
    bounds = raw[kinds[0]]
    if not (
        isinstance(bounds, list) and len(bounds) == 2 and all(isinstance(b, int | float) for b in bounds)
    ):
        raise _fail(where, f"{kinds[0]} must be [low, high]", f"e.g. `{kinds[0]}: [1, 8]`")
    low, high = float(bounds[0]), float(bounds[1])
    if not low <= high or (raw.get("log") and low <= 0) or not all(math.isfinite(b) for b in (low, high)):
        raise _fail(where, f"bad range [{bounds[0]}, {bounds[1]}]", "low <= high, and low > 0 for log ranges")
    if raw.get("step") is not None:
        _number(raw["step"], f"{where}.step", "step: 2", 1e-12, high - low or 1.0, integer=kinds[0] == "int")
    return ParamSpec(
        name,
        low=low,
        high=high,
        step=raw.get("step"),
        log=bool(raw.get("log")),
        integer=kinds[0] == "int",
        when=when,
        when_not=when_not,
    )


def _capacity_steps(objective: Any) -> int | None:
    """`objective: capacity` (or `{capacity: {steps: N}}`): the bisection's steps; None for another objective."""
    if objective == "capacity":
        return DEFAULT_CAPACITY_STEPS
    if isinstance(objective, dict) and set(objective) == {"capacity"}:
        settings = _mapping(objective["capacity"], "objective.capacity")
        _unknown_keys(settings, {"steps"}, "objective.capacity")
        steps = settings.get("steps", DEFAULT_CAPACITY_STEPS)
        return int(_number(steps, "objective.capacity.steps", "objective: {capacity: {steps: 3}}", 0, 12))
    return None


def _stop_sequences(raw: Any, where: str) -> tuple[str, ...]:
    """A workload's stop sequences: a string or a list of non-empty strings (at most 4, as the OpenAI API)."""
    found = (raw,) if isinstance(raw, str) else raw
    if (
        not isinstance(found, list | tuple)
        or not all(isinstance(x, str) and x for x in found)
        or len(found) > 4
    ):
        raise _fail(
            where,
            f"{raw!r} is not a list of up to 4 non-empty strings",
            'e.g. `stop: ["\\n\\n"]`, the text that follows the task (a blank line, a closing tag)',
        )
    return tuple(found)


def _workloads(
    raw: Any, base: Path, probe_tokens: int, capacity_steps: int | None = None
) -> tuple[Workload, ...]:
    if not isinstance(raw, list) or not raw:
        raise _fail(
            "workloads", "must be a non-empty list", "e.g. `workloads: [{class: code}, {class: tool}]`"
        )
    out: list[Workload] = []
    items = [
        (f"workloads[{i}]", one)
        for i, item in enumerate(raw)
        for one in _per_category(
            {"class": item} if isinstance(item, str) else _mapping(item, f"workloads[{i}]"),
            base,
            f"workloads[{i}]",
        )
    ]
    for where, item in items:
        _unknown_keys(
            item,
            {
                "name",
                "class",
                "file",
                "prompts",
                "context",
                "streams",
                *OPEN_LOOP_KEYS,
                "form",
                "stops",
                "stop",
                "copies",
                "max_tokens",
                *SELECTION_KEYS,
            },
            where,
        )
        name, prompts, named, source, replies, histories = _workload_prompts(item, base, where)
        if item.get("max_tokens") == "reply" and not replies:
            raise _fail(
                f"{where}.max_tokens",
                "is `reply`, but the workload's prompts hold no recorded replies",
                "use a ShareGPT or OpenAI chat file (a reply after the first turn), or give a number",
            )
        builtin = BUILTIN[item["class"]] if "class" in item else None
        form = item.get("form", named)
        if named and form != named:
            raise _fail(
                f"{where}.form",
                f"is {form!r} but its file names {named!r}",
                "leave `form:` out of the space file, or make the two agree",
            )
        if form is not None and form not in {f.value for f in PromptForm}:
            raise _fail(
                f"{where}.form",
                f"cannot be {form!r}",
                "use `form: chat` (instructions through the model's chat template) or `form: completion` "
                "(text a base model continues); leave it out to follow the model",
            )
        for flag in ("stops", "copies"):
            if not isinstance(item.get(flag, False), bool):
                raise _fail(f"{where}.{flag}", f"{item[flag]!r} is not true or false", f"e.g. `{flag}: true`")
        stop = _stop_sequences(item.get("stop", ()), f"{where}.stop")
        contexts = [
            None if c is None else _number(c, f"{where}.context", "context: [2048, 8192]", 1, 1 << 24)
            for c in _as_tuple(item.get("context", [None]))
        ]
        streams = [
            _number(n, f"{where}.streams", "streams: [1, 2, 4]", 1, 4096)
            for n in _as_tuple(item.get("streams", [1]))
        ]
        shaped = functools.partial(
            Workload,
            name,
            prompts,
            continuations=builtin.prompts(PromptForm.COMPLETION) if builtin else (),
            form=PromptForm(form) if form else None,
            stops=bool(item.get("stops", builtin.stops if builtin else False)),
            stop=stop,
            completion_stop=builtin.completion_stop if builtin else (),
            copies=item.get("copies", builtin.copies if builtin else None),
            source=source,
            max_tokens=_task_tokens(item, probe_tokens, where),
            replies=replies,
            reply_tokens=item.get("max_tokens") == "reply",
            histories=histories,
        )
        if not OPEN_LOOP_KEYS & item.keys():
            out += [shaped(ctx, n) for ctx in contexts for n in streams]
        elif capacity_steps is None:
            out += [
                shaped(ctx, rate=rate, arrivals=arrivals, requests=requests)
                for rate, arrivals, requests in _open_loads(item, where)
                for ctx in contexts
            ]
        else:
            loads = sorted(_open_loads(item, where))
            if loads[0][0] == loads[-1][0]:
                raise _fail(
                    f"{where}.rate",
                    "names one rate, but a capacity is searched for in a range of them",
                    "give the range, e.g. `rate: [0.5, 8]`",
                )
            # Every run of the search sends the same requests: with `duration`, what the lowest rate sends in it.
            (low, arrivals, requests), (high, _, _) = loads[0], loads[-1]
            out += [
                shaped(
                    ctx,
                    arrivals=arrivals,
                    requests=requests,
                    capacity=(low, high),
                    capacity_steps=capacity_steps,
                )
                for ctx in contexts
            ]
    keys = [w.key for w in out]
    if len(set(keys)) != len(keys):
        raise _fail("workloads", f"two workloads are both named '{keys[0]}'", "give each a different `name:`")
    return tuple(out)


OPEN_LOOP_KEYS = {"rate", "arrivals", "requests", "duration"}  # a workload that names one arrives open loop


def _probe_tokens(probe: dict[str, Any]) -> int:
    """The probe's max_tokens: every request's, the most a workload's own may be."""
    return int(
        _number(probe.get("max_tokens", 128), "probe.max_tokens", "max_tokens: 128", 1, MAX_TOKENS_LIMIT)
    )


def _task_tokens(item: dict[str, Any], probe_tokens: int, where: str) -> int | None:
    """A workload's own max_tokens (a task's length), or None: the probe's; `reply` keeps the probe's as the cap.
    Never more than the probe's, whose deadlines every request is held to."""
    value = item.get("max_tokens")
    if value is None or value == "reply":
        return None
    example = f"max_tokens: {min(probe_tokens, 128)}, or max_tokens: reply (a dataset's recorded replies)"
    return int(_number(value, f"{where}.max_tokens", example, 1, probe_tokens))


def _open_loads(item: dict[str, Any], where: str) -> list[tuple[float, Arrivals, int]]:
    """An open-loop workload's loads: each rate with its arrivals and requests per repeat (`requests`, or
    the rate times `duration`)."""
    if "streams" in item:
        raise _fail(
            where,
            "has both `streams` (requests sent at once) and `rate` (requests arriving on their own clock)",
            "give one load per workload: make two workloads to measure both",
        )
    if "rate" not in item:
        raise _fail(
            where, "names arrivals, requests or duration without a rate", "add e.g. `rate: [1, 2, 4]`"
        )
    rates = [
        _number(r, f"{where}.rate", "rate: [0.5, 1, 2]", 0.001, 1000.0, integer=False)
        for r in _as_tuple(item["rate"])
    ]
    arrivals = item.get("arrivals", Arrivals.POISSON.value)
    if arrivals not in {a.value for a in Arrivals}:
        raise _fail(
            f"{where}.arrivals",
            f"cannot be {arrivals!r}",
            "use `arrivals: poisson` (independent arrivals) or `arrivals: constant` (evenly spaced)",
        )
    if "requests" in item and "duration" in item:
        raise _fail(where, "has both `requests` and `duration`", "give one: requests per repeat, or seconds")
    if "duration" in item:
        seconds = _number(
            item["duration"], f"{where}.duration", "duration: 30", 0.001, 86400.0, integer=False
        )
        counts = [max(2, math.ceil(rate * seconds)) for rate in rates]
    else:
        requests = _number(
            item.get("requests", DEFAULT_OPEN_REQUESTS), f"{where}.requests", "requests: 8", 2, 4096
        )
        counts = [requests] * len(rates)
    return [(rate, Arrivals(arrivals), n) for rate, n in zip(rates, counts, strict=True)]


class _Prompts(NamedTuple):
    """A workload's name, its prompts, the form its file names (None: none named), what its file held, and the
    prompts' recorded replies and earlier turns (a dataset's, where it has them)."""

    name: str
    prompts: tuple[str, ...]
    form: str | None = None
    source: str = ""
    replies: tuple[str, ...] = ()
    histories: tuple[tuple[Turn, ...], ...] = ()


def _workload_prompts(item: dict[str, Any], base: Path, where: str) -> _Prompts:
    if "class" in item:
        cls = item["class"]
        if cls not in BUILTIN_CLASSES:
            raise _fail(
                where, f"unknown workload class '{cls}'", f"built-in classes: {', '.join(BUILTIN_CLASSES)}"
            )
        return _Prompts(str(item.get("name", cls)), BUILTIN[cls].prompts(PromptForm.CHAT))
    name = _user_name(item, where)
    if "file" in item:
        path = (base / str(item["file"])).resolve()
        found = load_dataset(path, _selection(item, where))
        form = found.form.value if found.form else None
        return _Prompts(name, found.prompts, form, found.summary(path), found.replies, found.histories)
    prompts = item.get("prompts")
    if isinstance(prompts, list) and prompts and all(isinstance(p, str) for p in prompts):
        return _Prompts(name, tuple(prompts))
    raise _fail(
        where, "needs `class:`, `file:` or `prompts:`", f"built-in classes: {', '.join(BUILTIN_CLASSES)}"
    )


def _per_category(item: dict[str, Any], base: Path, where: str) -> list[dict[str, Any]]:
    """A file's workload with `category: all` (or a list of categories) is one workload per category, named
    `NAME-CATEGORY`: MT-Bench's and Spec-Bench's categories measured apart, as speculation pays differently on
    each."""
    wanted = item.get("category")
    if "file" not in item or not (wanted == "all" or isinstance(wanted, list)):
        return [item]
    name = _user_name(item, where)
    if wanted == "all":
        path = (base / str(item["file"])).resolve()
        wanted = list(load_dataset(path, _selection({**item, "category": None}, where)).categories)
        if not wanted:
            raise UserError(
                f"workload file {path} gives its prompts no category",
                "drop `category:`, or use a file whose records name one (MT-Bench, Spec-Bench)",
            )
    if not wanted:
        raise _fail(
            f"{where}.category", "names no category", "e.g. `category: [coding, math]` or `category: all`"
        )
    return [{**item, "category": str(c), "name": f"{name}-{c}"} for c in wanted]


def _user_name(item: dict[str, Any], where: str) -> str:
    if "name" not in item:
        raise _fail(where, "a user workload needs a name", "add `name: ...` next to `file:` or `prompts:`")
    return str(item["name"])


def _selection(item: dict[str, Any], where: str) -> Selection:
    """Which records of its file a workload keeps: `sample`, `seed`, `min_chars`, `max_chars`, `category`,
    `partial` (use the complete records of a file cut short), `conversation` (each record's conversation up to
    its last user turn)."""
    numbers = {
        key: _number(item[key], f"{where}.{key}", f"{key}: 100", 0, 1 << 40)
        for key in ("sample", "seed", "min_chars", "max_chars")
        if key in item
    }
    for flag in ("partial", "conversation"):
        if not isinstance(item.get(flag, False), bool):
            raise _fail(f"{where}.{flag}", f"{item[flag]!r} is not true or false", f"e.g. `{flag}: true`")
    category = item.get("category")
    return Selection(
        sample=numbers.get("sample"),
        seed=numbers.get("seed", 0),
        min_chars=numbers.get("min_chars"),
        max_chars=numbers.get("max_chars"),
        category=None if category is None else str(category),
        partial=bool(item.get("partial", False)),
        conversation=bool(item.get("conversation", False)),
    )


# What a workload's prompts are counted by, and what to lower when there are too few: a closed loop's, an
# open loop's, a capacity search's (its runs: both ends and the steps, whatever the repeats).
PROMPTS_NEEDED = {
    "closed": ("repeats x streams", "probe.repeats or streams"),
    "open": ("repeats x requests", "probe.repeats or requests (or duration)"),
    "capacity": (
        f"requests x {1 + CAPACITY_RECHECKS}: every rate's, and {CAPACITY_RECHECKS} runs again near a limit",
        "requests",
    ),
}


def _assign_prompts(workloads: tuple[Workload, ...], repeats: int) -> tuple[Workload, ...]:
    """Give workloads that share a prompt list consecutive prompts, and refuse a workload that would send
    one prompt twice to a server (a repeated prompt is served from caches and n-gram pools)."""
    used: dict[tuple[str, ...], int] = {}
    out = []
    for i, workload in enumerate(workloads):
        needed = workload.prompts_needed(repeats)
        if needed > workload.prompt_count:
            per, lower = PROMPTS_NEEDED[
                "capacity" if workload.capacity else "open" if workload.open_loop else "closed"
            ]
            raise _fail(
                f"workloads[{i}] ({workload.key})",
                f"needs {needed} different prompts ({per}) but has {workload.prompt_count}",
                f"lower {lower}, or give more prompts (file: or prompts:)",
            )
        out.append(dataclasses.replace(workload, first_prompt=used.get(workload.prompts, 0)))
        used[workload.prompts] = used.get(workload.prompts, 0) + needed
    return tuple(out)


def parse_space(data: Any, base: Path, source: Path | None = None) -> Space:
    data = _mapping(data, "space")
    _unknown_keys(data, TOP_KEYS, "space")
    if "engine" not in data:
        raise _fail("space", "no `engine:`", "add `engine: llamacpp`")
    server = _mapping(data.get("server"), "server")
    _unknown_keys(server, SERVER_KEYS, "server")
    probe = _mapping(data.get("probe"), "probe")
    _unknown_keys(probe, PROBE_KEYS, "probe")
    objective = data.get("objective", "per-workload")
    capacity_steps = _capacity_steps(objective)
    workloads = _workloads(data.get("workloads"), base, _probe_tokens(probe), capacity_steps)
    objective_workload = None
    if capacity_steps is not None:
        if not any(w.capacity for w in workloads):
            raise _fail(
                "objective",
                "is capacity but no workload arrives open loop over a range of rates",
                "give a workload `rate: [0.5, 8]` (the range its capacity is searched in)",
            )
        if not data.get("latency_limits"):
            raise _fail(
                "objective",
                "is capacity but the space sets no latency limit to hold",
                "add e.g. `latency_limits: {ttft_p90_s: 2.0, tpot_p90_s: 0.1}`",
            )
    elif isinstance(objective, dict) and set(objective) == {"workload"}:
        objective_workload = str(objective["workload"])
        if objective_workload not in {w.key for w in workloads}:
            raise _fail(
                "objective",
                f"no workload '{objective_workload}'",
                f"workloads: {', '.join(w.key for w in workloads)}",
            )
    elif objective != "per-workload":
        raise _fail(
            "objective", f"cannot be {objective!r}", "use `per-workload`, `{workload: NAME}` or `capacity`"
        )
    limits = _mapping(data.get("latency_limits"), "latency_limits")
    for name, limit in limits.items():
        if (
            not LATENCY_LIMIT.fullmatch(str(name))
            or isinstance(limit, bool)
            or not isinstance(limit, int | float)
            or limit <= 0
        ):
            raise _fail(
                f"latency_limits.{name}",
                f"'{name}: {limit}' is not a limit in seconds",
                "name one of ttft, itl, tpot, e2e with p50, p90 or p99, e.g. `latency_limits: {ttft_p90_s: 2.0}`",
            )
    given, defaults = _mapping(data.get("confirm"), "confirm"), dataclasses.asdict(ConfirmSettings())
    confirm = {**defaults, **given}
    _unknown_keys(confirm, CONFIRM_KEYS, "confirm")
    if not all(isinstance(confirm[k], int | float) and confirm[k] >= 0 for k in CONFIRM_KEYS) or not (
        confirm["min_gain"] < 1 and confirm["launches"] != 1
    ):
        example = ", ".join(f"{k}: {v}" for k, v in defaults.items())
        raise _fail(
            "confirm",
            f"bad values {given}",
            "top >= 0, launches 0 (no confirmation) or >= 2, max_launches >= launches, min_gain from 0 to 1, "
            f"e.g. `confirm: {{{example}}}`",
        )
    repeats = _number(probe.get("repeats", DEFAULT_REPEATS), "probe.repeats", "repeats: 3", 1, 1000)
    max_tokens = _probe_tokens(probe)
    timeouts = {
        key: _number(probe[key], f"probe.{key}", f"{key}: 300", 1, WEEK_S, integer=False)
        for key in ("stall_timeout_s", "request_timeout_s", "trial_timeout_s")
        if key in probe
    }
    trials = _number(data.get("trials", DEFAULT_TRIALS), "trials", "trials: 20", 1, 100000)
    params = _mapping(data.get("params"), "params")
    enqueue = data.get("enqueue") or []
    if not isinstance(enqueue, list) or not all(isinstance(e, dict) for e in enqueue):
        raise _fail(
            "enqueue", "must be a list of parameter mappings", "e.g. `enqueue: [{spec-type: ngram-mod}]`"
        )
    # The surface model predicts decode t/s from acceptance and step cost; a capacity is searched with TPE.
    search = str(data.get("search", (SearchKind.MODEL if capacity_steps is None else SearchKind.TPE).value))
    if search not in {k.value for k in SearchKind}:
        raise _fail("search", f"cannot be {search!r}", "use `search: model` (the default) or `search: tpe`")
    if search == SearchKind.MODEL.value and capacity_steps is not None:
        raise _fail(
            "search",
            "is model, which predicts decode t/s, not a capacity",
            "leave `search:` out (TPE searches a capacity) or set `search: tpe`",
        )
    try:
        return Space(
            engine=str(data["engine"]),
            server=ServerSpec(
                binary=str(server.get("binary", "embedded")),
                # "{python}" is the Python running specsweep (e.g. [{python}, -m, sweep.sim] for the simulator).
                launcher=tuple(
                    sys.executable if str(a) == "{python}" else str(a)
                    for a in _as_tuple(server.get("launcher", ()))
                ),
                model=str(server.get("model", "embedded")),
                port=_number(
                    server.get("port", 0), "server.port", "port: 30000 (or 0: any free port)", 0, 65535
                ),
                host=_resolvable(str(server.get("host", "127.0.0.1"))),
                startup_timeout=_number(
                    server.get("startup_timeout", 300),
                    "server.startup_timeout",
                    "startup_timeout: 300",
                    1,
                    WEEK_S,
                    False,
                ),
                stop_timeout=_number(
                    server.get("stop_timeout", ServerSpec.stop_timeout),
                    "server.stop_timeout",
                    "stop_timeout: 10",
                    0,
                    WEEK_S,
                    False,
                ),
                extra_args=tuple(str(a) for a in server.get("extra_args") or ()),
            ),
            fixed=_mapping(data.get("fixed"), "fixed"),
            params=tuple(_param(name, spec, f"params.{name}") for name, spec in params.items()),
            enqueue=tuple(enqueue),
            workloads=_assign_prompts(workloads, repeats),
            probe=ProbeSettings(
                repeats=repeats,
                warmup=bool(probe.get("warmup", True)),
                **timeouts,
                request=RequestSettings(
                    max_tokens=max_tokens,
                    seed=int(probe.get("seed", RequestSettings.seed)),
                    ignore_eos=bool(probe.get("ignore_eos", False)),
                ),
                latency_limits={str(k): float(v) for k, v in limits.items()},
            ),
            objective_workload=objective_workload,
            trials=trials,
            seed=None if data.get("seed") is None else int(data["seed"]),
            source=source,
            confirm=ConfirmSettings(
                top=int(confirm["top"]),
                launches=int(confirm["launches"]),
                max_launches=int(confirm["max_launches"]),
                min_gain=float(confirm["min_gain"]),
            ),
            latency_limits={str(k): float(v) for k, v in limits.items()},
            search=SearchKind(search),
        )
    except (TypeError, ValueError) as exc:
        raise _fail(
            "space", f"a value has the wrong type ({exc})", "check numbers and lists against the docs"
        ) from None


def load_space(path: Path) -> Space:
    """A space file, or a shipped example by its name (`specsweep spaces` lists them) where no such file is."""
    if not path.is_file() and (example := example_path(str(path))) is not None:
        path = example
    if not path.is_file():
        raise UserError(
            f"space file {path} does not exist",
            "pass --space with a space file, or the name of an example (`specsweep spaces` lists them)",
        )
    text = read_text(path, "space file", "save it as UTF-8 text (YAML)")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise UserError(
            f"space file {path} is not valid YAML{at} ({problem})", "fix the YAML syntax there"
        ) from None
    return dataclasses.replace(parse_space(data, path.parent, source=path), text=text)

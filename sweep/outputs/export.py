"""The recommended configuration as something to run: a command line, a docker-compose block, JSON or YAML."""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
import yaml

from sweep.analysis import baseline_health, output_check, study_verdicts
from sweep.analysis.schedule import DepthSchedule, depth_schedules
from sweep.answers.health import NOT_REPRESENTATIVE
from sweep.core.errors import UserError
from sweep.core.files import write_atomic
from sweep.engines import engine_class, engine_of_argvs, schedule_forms
from sweep.engines.schedules import drafts_somewhere
from sweep.probes.workloads import Workload
from sweep.records import TrialRecord
from sweep.run.preflight import build_engine
from sweep.run.study import stored_space
from sweep.storage import Study, TrialView

FORMATS = ("cli", "compose", "json", "yaml", "schedule")


@dataclass(frozen=True)
class WithheldRun:
    """The faster configuration a veto keeps from being what to run: its command, commented out, and why."""

    configuration: str
    reason: str
    argv: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"configuration": self.configuration, "reason": self.reason, "argv": self.argv}

    def comment(self) -> str:
        return f"# withheld: {self.reason}\n# {shlex.join(self.argv)}"


@dataclass(frozen=True)
class Export:
    engine: str
    study: str
    trial: int
    workload: str | None
    params: dict[str, Any]
    argv: list[str]
    # The verdict behind it and anything to know before running it (unconfirmed, output changed).
    notes: tuple[str, ...] = ()
    configuration: str = ""  # how the study names it ("trial N", "predicted K")
    withheld: WithheldRun | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "study": self.study,
            "trial": self.trial,
            "configuration": self.configuration or f"trial {self.trial}",
            "workload": self.workload,
            "params": self.params,
            "argv": self.argv,
            "notes": list(self.notes),
            "withheld": self.withheld.to_dict() if self.withheld else None,
        }


def with_port(argv: list[str], port: int) -> list[str]:
    """The trial's argv with the port it was measured on replaced (a sweep picks free ports)."""
    out = list(argv)
    if "--port" in out:
        out[out.index("--port") + 1] = str(port)
    return out


def served(argv: list[str], measuring: list[str]) -> list[str]:
    """The trial's argv without what the engine added only to read the server (`TrialRecord.measuring_argv`):
    its last run of those flags, as the engine puts them after the user's own (which stay)."""
    n = len(measuring)
    starts = [i for i in range(len(argv) - n + 1) if n and argv[i : i + n] == measuring]
    return argv[: starts[-1]] + argv[starts[-1] + n :] if starts else list(argv)


def render(export: Export, fmt: str) -> str:
    if fmt == "cli":
        return shlex.join(export.argv)
    if fmt == "compose":
        service = {"services": {export.engine: {"command": export.argv}}}
        head = f"# specsweep study {export.study}, {export.configuration or f'trial {export.trial}'}" + (
            f", for {export.workload}" if export.workload else ", for all workloads"
        )
        notes = "".join(f"\n# {note}" for note in export.notes)
        withheld = f"\n{export.withheld.comment()}" if export.withheld else ""
        return head + notes + withheld + "\n" + yaml.safe_dump(service, sort_keys=False, width=1000)
    if fmt == "json":
        return json.dumps(export.to_dict(), indent=2)
    return yaml.safe_dump(export.to_dict(), sort_keys=False, width=1000)


def study_engine(study: optuna.Study, views: list[TrialView]) -> str:
    """The engine a study swept (studies made before it was stored: told apart by their argv)."""
    if "engine" in study.user_attrs:
        return str(study.user_attrs["engine"])
    written = {v.record.facts.engine for v in views if v.record and v.record.facts.engine}
    if written:
        return written.pop()
    # Studies from before the engine was stored anywhere: the engine whose command line the trials ran.
    return engine_of_argvs([v.record.argv for v in views if v.record and v.record.argv])


def build_export(
    study: optuna.Study, found: Study, workload: str | None, port: int | None = None, pin_graphs: bool = False
) -> Export:
    """What to run for `workload` (None: one configuration for every workload), with the verdict behind it and
    what to know before running it in its notes."""
    name_of_study = study.study_name
    views = found.search
    verdicts = study_verdicts(found)
    if workload:
        recs = {r.workload: r for r in verdicts.recommendations}
        if workload not in recs:
            raise UserError(
                f"study '{name_of_study}' has no measured workload '{workload}'",
                f"choose one of: {', '.join(recs) or '(none)'}",
            )
        rec = recs[workload]
        name, params = rec.recommended_label, rec.recommended_params
        notes = [f"{rec.verdict_text} ({rec.why_verdict}); {rec.why}"]
        keys = [workload]
        withheld = rec.withheld
    else:
        overall = verdicts.overall
        if overall is None:
            raise UserError(
                f"study '{name_of_study}' has no completed baseline to compare with",
                "run the study until its baseline completes",
            )
        name, params = overall.trial_label, overall.params
        notes = [overall.why + ("" if overall.confirmed else "; unconfirmed: run `specsweep confirm` first")]
        notes += [
            f"{r.workload}: withheld {r.withheld.describe()}" for r in verdicts.recommendations if r.withheld
        ]
        keys = found.keys
        withheld = overall.withheld
    view = found.named(name)
    assert view is not None and view.record is not None
    record = view.record
    for key in keys:
        if (check := output_check(found, view.label, key)) is not None and check.changed:
            notes.append(f"{key}: CHANGES THE MODEL'S OUTPUT: {check.describe()}")
        answers, form = baseline_health(found.views, key)
        if answers is not None and not answers.healthy:
            notes.append(
                f"{key}: not representative: without speculation {answers.describe()} (sent in the {form}); "
                f"{NOT_REPRESENTATIVE}"
            )
    engine = study_engine(study, views)
    port = port or engine_class(engine).default_port
    measured = with_port(record.argv, port)
    argv = served(measured, record.measuring_argv)
    if argv != measured:
        notes.append(
            f"measured with {shlex.join(record.measuring_argv)} too, which specsweep adds to read the server's "
            "log; left out here, as a server in service need not pay for it"
        )
    if pin_graphs:
        pins = graph_pins(record)
        if pins:
            params = {**params, **pins}
            pinned = build_engine(stored_space(study, None))
            argv = served(pinned.argv({**record.params, **pins}, port), pinned.measuring_argv())
            notes.append(f"CUDA-graph capture capped where {name}'s server could not reach: {pins}")
        else:
            notes.append(f"{name}'s launch captured no CUDA-graph size it could not reach: nothing to pin")
    vetoed = found.named(withheld.label) if withheld else None
    shelved = (
        WithheldRun(
            withheld.label,
            withheld.describe(),
            served(with_port(vetoed.record.argv, port), vetoed.record.measuring_argv),
        )
        if withheld and vetoed and vetoed.record
        else None
    )
    return Export(engine, name_of_study, view.number, workload, params, argv, tuple(notes), name, shelved)


def graph_pins(record: TrialRecord) -> dict[str, Any]:
    """The flags the sizing doctor named on this launch to cap graph capture (empty: none to cap)."""
    pins: dict[str, Any] = {}
    for finding in record.facts.sizing:
        pins |= finding.flags
    return pins


def build_schedules(
    study: optuna.Study, found: Study, workload: str | None, port: int | None = None, out: Path | None = None
) -> list[dict[str, Any]]:
    """The best depth per concurrency of each workload measured at several stream counts, in every engine's form
    (with `out`, each written there with the engine's own schedule file)."""
    space = stored_space(study, None)
    engine = build_engine(space)
    schedules = [
        s
        for s in depth_schedules(found.search, space.workloads, engine.schedule_runs)
        if workload in (None, s.family)
    ]
    families = sorted({w.family for w in space.workloads})
    if workload is not None and workload not in families:
        raise UserError(
            f"study '{study.study_name}' has no workload '{workload}'",
            f"pass --workload one of: {', '.join(families)} (or leave it out for every workload)",
        )
    if not schedules:
        raise UserError(
            f"study '{study.study_name}' has no {'workload ' + repr(workload) + ' ' if workload else 'workload '}"
            "measured at two or more stream counts (or open-loop rates) with a speculative chain",
            f"add `streams: [1, 2, 4, 8]` (or `rate: [1, 4, 16]`) to a workload in the space (workloads: "
            f"{', '.join(families)})",
        )
    documents = []
    for schedule in schedules:
        depths = [(step.from_batch, step.depth) for step in schedule.steps]
        name = schedule.family + ("-under-load" if schedule.under_load else "")
        config = f"{name}-adaptive.json"
        native = engine.schedule_file(depths)  # None: the engine takes its schedule in its flags
        if out:
            config = str((out / config).resolve())
            if native is not None:
                write_atomic(Path(config), json.dumps(native, indent=2) + "\n")
        launch = engine.schedule_params(schedule.params, depths, config)
        port = port or engine.default_port
        document = schedule_document(schedule, depths, space.workloads, found)
        document[engine.name] = {
            "params": launch,
            "argv": engine.argv(launch, port) if launch else None,
            "file": {"path": config, "content": native} if launch and native is not None else None,
            "note": None if launch else no_schedule_note(engine.name, depths),
        }
        documents.append(document)
        if out:
            write_atomic(out / f"{name}-schedule.json", json.dumps(document, indent=2) + "\n")
    return documents


def no_schedule_note(engine: str, depths: list[tuple[int, int]]) -> str:
    if not drafts_somewhere(depths):
        return "speculation is slower than none at every concurrency measured: run without it"
    return (
        f"{engine} takes no depth schedule for this method: run the configuration measured best at your usual "
        "concurrency (by_concurrency names its trial)"
    )


def schedule_document(
    schedule: DepthSchedule, depths: list[tuple[int, int]], workloads: Sequence[Workload], found: Study
) -> dict[str, Any]:
    # The largest batch the schedule must reach where no server said its limit: the most streams, or the
    # largest batch measured under arrivals.
    largest = max(
        [w.streams for w in workloads if w.family == schedule.family]
        + [math.ceil(s.batch) for s in schedule.steps]
    )
    running = [
        v.record.facts.max_running_requests
        for v in found.search
        if v.record and v.record.facts.max_running_requests and v.number == schedule.steps[0].trial
    ]
    forms, no_counterpart = schedule_forms(schedule.method, depths, running[0] if running else largest)
    return {
        "workload": schedule.family,
        "load": "open-loop arrivals" if schedule.under_load else "streams",
        "method": schedule.method,
        "by_concurrency": [
            {
                "streams": s.streams,
                "rate": s.rate,
                "batch": round(s.batch, 2),
                "from_batch": s.from_batch,
                "workload": s.workload,
                "depth": s.depth,
                "trial": s.trial,
                "decode_tps": round(s.tps, 2),
                "baseline_tps": round(s.baseline_tps, 2) if s.baseline_tps else None,
            }
            for s in schedule.steps
        ],
        **forms,
        "notes": [
            "depths are the search's single launches at each concurrency; launch the schedule and measure it "
            "(or `specsweep confirm` the per-concurrency picks) before relying on it",
            *no_counterpart,
        ],
    }

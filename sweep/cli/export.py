"""`specsweep export`: the recommended flags of a study, as a command line, a compose block, JSON or YAML."""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import optuna

from sweep.analysis import baseline_health, output_check, study_verdicts
from sweep.analysis.schedule import DepthSchedule, depth_schedules
from sweep.answers.health import NOT_REPRESENTATIVE
from sweep.cli.shared import add_study_options
from sweep.core.errors import UserError
from sweep.core.files import write_atomic
from sweep.engines import engine_class, schedule_forms
from sweep.engines.schedules import (
    drafts_somewhere,
)
from sweep.outputs.export import FORMATS, Export, WithheldRun, render, served, with_port
from sweep.probes.workloads import Workload
from sweep.records import TrialRecord
from sweep.run.preflight import build_engine
from sweep.run.study import open_study, read_study, stored_space
from sweep.storage import Study, study_engine


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "export", help="recommended flags as a command line, compose, JSON or YAML", description=__doc__
    )
    add_study_options(parser, study_required=True)
    parser.add_argument("--workload", help="the workload to export for (default: one configuration for all)")
    parser.add_argument("--format", choices=FORMATS, default="cli", help="output format (default: cli)")
    parser.add_argument("--port", type=int, help="port in the exported command (default: the engine's own)")
    parser.add_argument(
        "--out",
        type=Path,
        help="with --format schedule: a folder to write the schedule and SGLang's adaptive config file into",
    )
    parser.add_argument(
        "--pin-graphs",
        action="store_true",
        help="add the flags that cap CUDA-graph capture at the batch sizes the server can reach (from the sizing "
        "doctor's verdicts on the exported trial's launch)",
    )
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    study = open_study(args.study, args.storage, args.runs)
    found = read_study(study)
    if args.format == "schedule":
        return export_schedule(args, study, found)
    views = found.search
    verdicts = study_verdicts(found)
    if args.workload:
        recs = {r.workload: r for r in verdicts.recommendations}
        if args.workload not in recs:
            raise UserError(
                f"study '{args.study}' has no measured workload '{args.workload}'",
                f"choose one of: {', '.join(recs) or '(none)'}",
            )
        rec = recs[args.workload]
        name, params = rec.recommended_label, rec.recommended_params
        notes = [f"{rec.verdict_text} ({rec.why_verdict}); {rec.why}"]
        keys = [args.workload]
        withheld = rec.withheld
    else:
        overall = verdicts.overall
        if overall is None:
            raise UserError(
                f"study '{args.study}' has no completed baseline to compare with",
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
    port = args.port or engine_class(engine).default_port
    measured = with_port(record.argv, port)
    argv = served(measured, record.measuring_argv)
    if argv != measured:
        notes.append(
            f"measured with {shlex.join(record.measuring_argv)} too, which specsweep adds to read the server's "
            "log; left out here, as a server in service need not pay for it"
        )
    if args.pin_graphs:
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
    export = Export(engine, args.study, view.number, args.workload, params, argv, tuple(notes), name, shelved)
    if args.format == "cli":  # the command alone on stdout (to paste or run); what to know on stderr
        for note in notes:
            print(f"# {note}", file=sys.stderr)
        if shelved:
            print(shelved.comment(), file=sys.stderr)
    print(render(export, args.format))
    return 0


def graph_pins(record: TrialRecord) -> dict[str, Any]:
    """The flags the sizing doctor named on this launch to cap graph capture (empty: none to cap)."""
    pins: dict[str, Any] = {}
    for finding in record.facts.sizing:
        pins |= finding.flags
    return pins


def export_schedule(args: argparse.Namespace, study: optuna.Study, found: Study) -> int:
    """The best depth per concurrency of each workload measured at several stream counts, in every engine's form."""
    space = stored_space(study, None)
    engine = build_engine(space)
    schedules = [
        s
        for s in depth_schedules(found.search, space.workloads, engine.schedule_runs)
        if args.workload in (None, s.family)
    ]
    families = sorted({w.family for w in space.workloads})
    if args.workload is not None and args.workload not in families:
        raise UserError(
            f"study '{args.study}' has no workload '{args.workload}'",
            f"pass --workload one of: {', '.join(families)} (or leave it out for every workload)",
        )
    if not schedules:
        raise UserError(
            f"study '{args.study}' has no {'workload ' + repr(args.workload) + ' ' if args.workload else 'workload '}"
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
        if args.out:
            config = str((args.out / config).resolve())
            if native is not None:
                write_atomic(Path(config), json.dumps(native, indent=2) + "\n")
        launch = engine.schedule_params(schedule.params, depths, config)
        port = args.port or engine.default_port
        document = schedule_document(schedule, depths, space.workloads, found)
        document[engine.name] = {
            "params": launch,
            "argv": engine.argv(launch, port) if launch else None,
            "file": {"path": config, "content": native} if launch and native is not None else None,
            "note": None if launch else no_schedule_note(engine.name, depths),
        }
        documents.append(document)
        if args.out:
            write_atomic(args.out / f"{name}-schedule.json", json.dumps(document, indent=2) + "\n")
    print(json.dumps(documents if len(documents) > 1 else documents[0], indent=2))
    return 0


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

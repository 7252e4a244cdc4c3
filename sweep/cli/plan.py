"""`specsweep plan`: a dry run. What the space holds after the engine's rules, the launches a run will make, and
how long they take (measured in the study if it exists, else assumed and said so). Nothing is launched."""

from __future__ import annotations

import argparse
from pathlib import Path

import optuna

from sweep.cli.shared import add_space_option, add_study_options, duration
from sweep.engines import Engine
from sweep.launch.gpu import ReadFailed, open_source
from sweep.model.files import weights_on_disk
from sweep.run.plan import Hardware, StudyPlan, plan_study
from sweep.run.preflight import build_engine, validate
from sweep.search.costs import CostProfile, check_space
from sweep.space import load_space
from sweep.storage import StudyPaths, make_storage


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "plan", help="dry run: configurations, launches, wall time", description=__doc__
    )
    add_space_option(parser)
    add_study_options(parser)
    parser.add_argument("--trials", type=int, help="the search's trials (default: the space's)")
    parser.add_argument("--budget", type=duration, help="a night to fit, e.g. 8h: how many trials it holds")
    parser.add_argument(
        "--profile", type=Path, help="the cost profile `run --profile` will read (`specsweep profile`)"
    )
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    space = load_space(args.space)
    engine = build_engine(space)
    validate(space, engine)
    paths = StudyPaths.for_study(args.study or args.space.stem, args.runs, args.storage)
    study = None
    if args.storage or (paths.run_dir / "study.db").is_file():
        try:
            study = optuna.load_study(study_name=paths.name, storage=make_storage(paths.storage_url))
        except KeyError:
            study = None  # no such study yet: plan with assumed times
    costs = None
    if args.profile is not None:
        costs = CostProfile.load(args.profile)
        check_space(costs, args.profile, space, engine)
    plan = plan_study(space, engine, args.trials, study, args.budget, costs, hardware(engine))
    read = {w.name: w.source for w in space.workloads if w.source}  # each file once, whatever its variants
    print(
        "\n".join(
            [
                *(f"workload {name}: {source}" for name, source in read.items()),
                *lines(plan, space.search.value),
            ]
        )
    )
    return 0


def hardware(engine: Engine) -> Hardware:
    """This machine's GPUs (the servers run here) and the model's weights, for a plan with nothing measured."""
    source = open_source()
    names: tuple[str, ...] = ()
    if not isinstance(source, str):
        try:
            names = source.read().names
        except ReadFailed:
            names = ()
    return Hardware(names, weights_on_disk(engine.setup.model))


def lines(plan: StudyPlan, search: str) -> list[str]:
    pool = plan.pool
    out = [
        f"space: {pool.grid} grid points{' (the first ones only: the space is larger)' if pool.truncated else ''}; "
        f"{len(pool.items)} launchable after the engine's rules ({pool.infeasible} infeasible, {pool.invalid} "
        f"invalid, {pool.duplicates} the same as another after derivation)",
        "  per method: " + ", ".join(f"{m} {n}" for m, n in sorted(plan.methods.items())),
    ]
    if plan.budget_s is not None:
        out.append(
            f"budget: {_hours(plan.budget_s)} holds {plan.trials} search launches and the confirmation's first rounds"
        )
    if plan.acceptance is None:
        out.append(
            f"search ({search}): {plan.search_launches} launches (the baseline, {plan.cover} start-up trials covering "
            f"each method shallow and deep, then {max(0, plan.search_launches - 1 - plan.cover)} chosen by the search)"
        )
    else:
        rest = (
            f", then up to {plan.unprofiled} of the configurations the profile gives no step times for, until "
            "confident"
            if plan.unprofiled
            else "; the profile gives the step times of the rest"
        )
        out.append(
            f"search (cost profile): at most {plan.search_launches} launches (the baseline, {plan.acceptance} "
            f"acceptance launch{'es' if plan.acceptance != 1 else ''}, one per method: a deeper chain where it "
            f"fails to start{rest})"
        )
    out += [
        f"confirmation: {plan.confirm_min} launches, up to {plan.confirm_most} where a verdict stays open"
        + (" (as the budget holds)" if plan.confirm_most < plan.confirm_max else ""),
        f"one launch: {plan.launch.startup_s:.0f} s start-up + {plan.launch.probe_s:.0f} s probing ({plan.launch.source})",
        f"wall time: search {_hours(plan.search_s)}, then confirmation {_hours(plan.confirm_s(most=False))} to "
        f"{_hours(plan.confirm_s(most=True))}; total {_hours(plan.search_s + plan.confirm_s(most=False))} to "
        f"{_hours(plan.search_s + plan.confirm_s(most=True))}",
    ]
    return out


def _hours(seconds: float) -> str:
    minutes = round(seconds / 60)
    return f"{minutes // 60}h{minutes % 60:02d}m"

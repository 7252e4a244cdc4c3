"""The night's plan (`specsweep plan`) as lines for the terminal: the space after the engine's rules, the
launches and their wall time."""

from __future__ import annotations

from sweep.run.plan import StudyPlan
from sweep.space import Space


def plan_lines(space: Space, plan: StudyPlan) -> list[str]:
    pool = plan.pool
    read = {w.name: w.source for w in space.workloads if w.source}  # each file once, whatever its variants
    out = [
        *(f"workload {name}: {source}" for name, source in read.items()),
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
            f"search ({space.search.value}): {plan.search_launches} launches (the baseline, {plan.cover} start-up "
            f"trials covering each method shallow and deep, then "
            f"{max(0, plan.search_launches - 1 - plan.cover)} chosen by the search)"
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

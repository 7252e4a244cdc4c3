"""Warnings about the host and the study: a baseline that drifted, launches that spread, a busy machine, sizes
the engine read wrong."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from sweep.analysis.evidence import (
    DRIFT_MIN,
    HELD_BACK,
    SPREAD_MAX,
    baseline_health,
    launches,
    quiet_only,
    study_noise,
)
from sweep.answers import health
from sweep.core import stats
from sweep.records import HostLoad, describe_loads
from sweep.storage import BASELINE, Phase, TrialView

# --- warnings about the host and the study ------------------------------------------------------------------


@dataclass(frozen=True)
class StudyWarnings:
    """What makes this study's numbers less than trustworthy, in words with the numbers."""

    messages: list[str] = field(default_factory=list)
    busy: set[tuple[Phase, int, str]] = field(default_factory=set)  # (phase, launch, workload) on a busy host
    unreliable_workloads: set[str] = field(default_factory=set)
    # Workloads whose baseline moved between the search and the confirmation: the search's launches of them are
    # off by that much (its ranking too); the confirmation's interleaved rounds cancel the move (stats.py).
    drifted: set[str] = field(default_factory=set)
    # Workloads whose baseline answers are not text (loops, echoes, template tokens): no verdict speaks for them.
    not_representative: set[str] = field(default_factory=set)


def sizing_messages(views: list[TrialView]) -> list[str]:
    """What the sizing doctor found wrong at launch (`specsweep doctor`), each finding once for the study."""
    seen: dict[str, str] = {}
    for view in views:
        for finding in view.record.facts.sizing if view.record else []:
            if not finding.ok and finding.what not in seen:
                seen[finding.what] = f"sizing (trial {view.number}): {finding.what}: {finding.detail}"
    return list(seen.values())


def busy_message(key: str, found: list[tuple[Phase, int, HostLoad]]) -> str:
    """A workload's launches on a busy host, said once: which, and the load's range over them."""
    names = " and ".join(
        _launch_names(phase, [n for p, n, _ in found if p == phase])
        for phase in (Phase.SEARCH, Phase.CONFIRM)
        if any(p == phase for p, _, _ in found)
    )
    return f"host busy during {names}, {key}: {describe_loads([load for _, _, load in found])}"


def _launch_names(phase: Phase, numbers: list[int]) -> str:
    """`trial 3`, `trials 0-3`, `confirmation launches 0, 2, 5-9`."""
    runs: list[list[int]] = []
    for n in sorted(numbers):
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    listed = ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)
    one, many = (
        ("trial", "trials") if phase == Phase.SEARCH else ("confirmation launch", "confirmation launches")
    )
    return f"{one if len(numbers) == 1 else many} {listed}"


def study_warnings(search: list[TrialView], confirm: list[TrialView], keys: list[str]) -> StudyWarnings:
    warnings = StudyWarnings()
    queued: set[str] = set()
    busy: dict[str, list[tuple[Phase, int, HostLoad]]] = {}  # a workload's launches on a busy host
    for view in (*search, *confirm):
        for key, summary in view.record.workloads.items() if view.complete and view.record else ():
            cap = view.record.facts.max_running_requests if view.record else None
            if cap and summary.streams > cap and key not in queued:
                # Its requests queued: the number is for fewer streams than the workload's, on this trial only.
                queued.add(key)
                warnings.unreliable_workloads.add(key)
                warnings.messages.append(
                    f"{key}: trial {view.number}'s server decoded at most {cap} requests at once, fewer than the "
                    f"workload's {summary.streams} streams (the rest queued): raise the server's limit on running "
                    "requests or lower the streams"
                )
            if (
                summary.batch is not None
                and summary.batch.median < HELD_BACK * summary.streams
                and key not in queued
            ):
                queued.add(key)
                warnings.messages.append(
                    f"{key}: trial {view.number}'s {summary.streams} streams decoded {summary.batch.median:.1f} at "
                    "once on average (the client, prefill or the server's limits held requests back): its numbers "
                    "are for that batch, and schedules are keyed by it"
                )
            if summary.on_busy_host and summary.host is not None:
                warnings.busy.add((view.phase, view.number, key))
                busy.setdefault(key, []).append((view.phase, view.number, summary.host))
            elif summary.host is not None and summary.host.lagged:
                warnings.messages.append(
                    f"{key}: during {_launch_names(view.phase, [view.number])} {summary.host.lag_text()}: its "
                    "numbers on the "
                    "client's clock (aggregate t/s, latencies) are this host's pace; the verdict reads the "
                    "durations the server reported, which stay the model's"
                )
    warnings.messages.extend(busy_message(key, found) for key, found in busy.items())
    warnings.messages.extend(sizing_messages([*search, *confirm]))
    for key in keys:
        found, form = baseline_health([*search, *confirm], key)
        if found is not None and not found.healthy:
            warnings.not_representative.add(key)
            warnings.messages.append(
                f"{key}: {found.describe()} with speculation off, sent in the {form}: {health.NOT_REPRESENTATIVE}, "
                "so its verdict is not representative"
            )
        # Quiet launches only: a busy one moved for a reason already named above, not because the host drifted.
        first = launches(quiet_only(search, key), BASELINE, key)
        later = launches(quiet_only(confirm, key), BASELINE, key)
        noise = study_noise(confirm or search, key)
        if first and later:
            n = stats.common_prompts(first, later)
            moved = (
                math.exp(
                    statistics.fmean(x.log_mean(n) for x in later)
                    - statistics.fmean(x.log_mean(n) for x in first)
                )
                - 1
            )
            limit = max(DRIFT_MIN, 3 * (noise.launch_sd or 0.0))
            if abs(moved) > limit:
                warnings.drifted.add(key)
                warnings.messages.append(
                    f"{key}: the baseline moved {moved:+.0%} between the search and the confirmation "
                    "(more than the launch noise allows): the search's figures for it are off by about that "
                    "much, and it may have ranked its candidates wrongly (re-run on a quiet machine to trust "
                    "them); the confirmation's interleaved rounds carry the verdict"
                )
        if noise.measured and (noise.launch_sd or 0.0) > SPREAD_MAX:
            # Not unreliable by itself: a comparison whose interval this noise dwarfs says so on its own.
            warnings.messages.append(
                f"{key}: launches of one configuration differ by {noise.launch_sd:.0%} (sd): "
                "effects smaller than a few times that cannot be told from noise"
            )
    return warnings

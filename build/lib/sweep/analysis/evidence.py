"""A study's launches as evidence: the baseline's view, a workload's summary on a launch, whether the host was
quiet, the headline number, what a configuration costs, and the launches and noise a comparison reads."""

from __future__ import annotations

from sweep.answers import health
from sweep.answers.health import OutputHealth
from sweep.core import stats
from sweep.core.stats import Launch, Noise
from sweep.records import Spread, WorkloadSummary
from sweep.storage import BASELINE, Phase, TrialView

DRIFT_MIN = 0.05  # a baseline that moved less than this (and less than 3 launch sds) did not drift
SPREAD_MAX = 0.10  # launch-to-launch noise beyond this is worth a warning
# A verdict rests on at least this many launches (or paired rounds) per side measured on a quiet host before
# the busy host's are left out of it.
MIN_CLEAN = 2
# Streams that decoded fewer than this share of themselves at once were held back (by the client, prefill or a
# cap): the ramp up and down of a batch sent together costs a few percent, not a quarter.
HELD_BACK = 0.75


def baseline_view(views: list[TrialView]) -> TrialView | None:
    return next((v for v in views if v.role == BASELINE and v.complete and v.phase == Phase.SEARCH), None)


def ok_summary(view: TrialView, workload: str) -> WorkloadSummary | None:
    summary = view.record.workloads.get(workload) if view.record else None
    # A capacity of 0 (the limits held at no rate tried) is below the range, not a number to compare on a log
    # scale: the configuration has no verdict there.
    if summary is None or summary.status != "ok" or summary.headline is None or summary.headline.median <= 0:
        return None
    return summary


def on_busy_host(view: TrialView, workload: str) -> bool:
    """Whether this launch measured the workload on a busy host (`WorkloadSummary.on_busy_host`)."""
    summary = ok_summary(view, workload)
    return summary is not None and summary.on_busy_host


def quiet_only(views: list[TrialView], workload: str) -> list[TrialView]:
    """The launches that measured the workload on a quiet host (`on_busy_host` left out)."""
    return [v for v in views if not on_busy_host(v, workload)]


def headline_median(view: TrialView, workload: str) -> float | None:
    """The median of what verdicts compare on the workload (`WorkloadSummary.headline`: decode t/s, or the
    capacity where one was searched for)."""
    summary = ok_summary(view, workload)
    return summary.headline.median if summary and summary.headline else None


def baseline_health(views: list[TrialView], workload: str) -> tuple[OutputHealth | None, str]:
    """The answers of every launch without speculation on the workload, added up, and the form they were
    sent in: whether acceptance measured on this workload speaks for real text."""
    found = [s for v in views if v.label == BASELINE and v.complete and (s := ok_summary(v, workload))]
    form = next((f"{s.form} form ({s.form_reason})" for s in found if s.form), "")
    return health.total(s.output_health for s in found), form


def cost(view: TrialView) -> tuple[bool, float, float]:
    """Cheaper first: speculation off, then less draft work per step (the engine's reading of the
    configuration, `shape`), then less KV."""
    assert view.record is not None
    shape = view.record.shape
    work = float(shape.draft_work) if shape else 0.0
    return (view.record.facts.speculation_requested, work, float(view.record.facts.kv_pool_tokens or 0))


def cheaper_by(cheap: TrialView, dear: TrialView) -> str:
    """What `cost` found cheaper, in its own terms: the draft work a step, then the KV pool."""
    mine, theirs = cost(cheap), cost(dear)
    if mine[1] != theirs[1]:
        return f"draft work {mine[1]:g} against {theirs[1]:g} a step"
    return f"KV pool {mine[2]:,.0f} against {theirs[2]:,.0f} tokens"


def launches(views: list[TrialView], label: str, workload: str, metric: str = "headline") -> list[Launch]:
    """Each complete launch of a configuration, as its per-prompt values of `metric` for one workload."""
    out = []
    for view in views:
        summary = ok_summary(view, workload) if view.label == label and view.complete else None
        spread: Spread | None = getattr(summary, metric) if summary else None
        if spread is not None and spread.values:
            out.append(Launch(spread.values, view.round if view.phase == Phase.CONFIRM else None))
    return out


def study_noise(
    views: list[TrialView], workload: str, metric: str = "headline", reference: str = BASELINE
) -> Noise:
    """This study's own noise for a workload: every configuration launched more than once, pooled, and the
    round-paired differences against the reference configuration; launches on a busy host are not the
    machine's noise and are left out."""
    views = quiet_only(views, workload)
    groups = {
        label: launches(views, label, workload, metric) for label in dict.fromkeys(v.label for v in views)
    }
    return stats.measure_noise(list(groups.values()), groups.get(reference, []))

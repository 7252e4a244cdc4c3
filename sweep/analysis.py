"""A study read back: trials with their records, what to confirm, and the verdict per workload.

Two phases feed it. The *search* launches each configuration once and is biased upwards at its top (the best of
N by one measurement is partly luck: the winner's curse). The *confirmation* launches the search's best
candidates again, interleaved with the baseline, several times each; every verdict and recommendation comes
from the confirmation, with the search's number shown beside it. Without confirmation data, verdicts say
"unconfirmed".
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from sweep.answers import fidelity, health
from sweep.answers.health import OutputHealth
from sweep.core import stats
from sweep.core.stats import Comparison, Launch, Noise, Verdict
from sweep.records import Spread, WorkloadSummary
from sweep.storage import BASELINE, Phase, Study, TrialView, complete_views, latest_plan

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
    """Whether this launch measured the workload while other processes took the machine (see `HostLoad.busy`)."""
    summary = ok_summary(view, workload)
    return summary is not None and summary.host is not None and summary.host.busy


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


def study_warnings(search: list[TrialView], confirm: list[TrialView], keys: list[str]) -> StudyWarnings:
    warnings = StudyWarnings()
    queued: set[str] = set()
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
            if summary.host is not None and summary.host.busy:
                warnings.busy.add((view.phase, view.number, key))
                name = f"{'confirmation launch' if view.phase == Phase.CONFIRM else 'trial'} {view.number}"
                warnings.messages.append(f"host busy during {name}, {key}: {summary.host.describe()}")
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


# --- the verdict per workload ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Recommendation:
    """Per workload: the search's best, the confirmed verdict on the best confirmed candidate, what to run."""

    workload: str
    # The configuration the verdict is about: its search trial's number, or its first confirmation launch's where
    # only the confirmation launched it (a configuration the model predicted); `label` names it.
    trial: int
    params: dict[str, Any]
    # The search's measurement of it and of the baseline: decode t/s, or requests per second within the latency
    # limits on a capacity workload (`summary.unit` says which; `WorkloadSummary.headline`).
    value: Spread
    baseline_value: Spread | None  # the search's baseline
    search_gain: float | None  # what the search alone said (one launch each)
    comparison: Comparison | None  # from the confirmation where there is one
    verdict: Verdict
    why_verdict: str
    noise: Noise
    confirmed: bool
    summary: WorkloadSummary
    recommended_trial: int = -1
    recommended_params: dict[str, Any] = dataclasses.field(default_factory=dict)
    why: str = ""
    label: str = ""  # the configuration's label ("trial N", "predicted K")
    recommended_name: str = ""  # how outputs name what to run ("trial N", "predicted K")
    output: fidelity.OutputCheck | None = None
    # What to run's answers moved where the baseline reproduced itself and nothing explains it, below the veto:
    # said in its own line with why the evidence is too thin (`OutputCheck.silent_change`); "" otherwise.
    output_note: str = ""
    confirmed_value: float | None = None  # mean over the confirmation launches (geometric)
    confirmed_baseline_value: float | None = None
    # The baseline's answers on this workload (every launch without speculation) and the form they were sent in.
    health: OutputHealth | None = None
    form: str = ""
    # The fastest configuration confirmed faster and not what to run, with the one veto that holds.
    withheld: Withheld | None = None

    @property
    def representative(self) -> bool:
        """Whether the baseline's answers read as text (acceptance measured on loops says nothing real)."""
        return self.health is None or self.health.healthy

    @property
    def verdict_text(self) -> str:
        return str(self.verdict) + ("" if self.representative else ", not representative")

    @property
    def trial_label(self) -> str:
        return self.label or f"trial {self.trial}"

    @property
    def recommended_label(self) -> str:
        return self.recommended_name or f"trial {self.recommended_trial}"

    @property
    def gain(self) -> float | None:
        return self.comparison.gain if self.comparison else self.search_gain

    @property
    def gain_low(self) -> float | None:
        return self.comparison.low if self.comparison else None

    @property
    def gain_high(self) -> float | None:
        return self.comparison.high if self.comparison else None

    @property
    def within_noise(self) -> bool:
        return self.verdict == Verdict.WITHIN_NOISE

    def to_dict(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "trial": self.trial,
            "params": self.params,
            "unit": self.summary.unit,
            # The keys keep their first names (scripts read them); `unit` says what the values are.
            "decode_tps": dataclasses.asdict(self.value),
            "baseline_tps": dataclasses.asdict(self.baseline_value) if self.baseline_value else None,
            "confirmed_tps": self.confirmed_value,
            "confirmed_baseline_tps": self.confirmed_baseline_value,
            "search_gain": self.search_gain,
            "gain": self.gain,
            "gain_interval": [self.gain_low, self.gain_high],
            "launches": list(self.comparison.launches) if self.comparison else None,
            "verdict": str(self.verdict),
            "why_verdict": self.why_verdict,
            "confirmed": self.confirmed,
            "within_noise": self.within_noise,
            "noise": dataclasses.asdict(self.noise),
            "configuration": self.trial_label,
            "recommended_trial": self.recommended_trial,
            "recommended_configuration": self.recommended_label,
            "recommended_params": self.recommended_params,
            "why": self.why,
            "output": self.output.to_dict() if self.output else None,
            "output_note": self.output_note,
            "representative": self.representative,
            "baseline_output_health": self.health.to_dict() if self.health else None,
            "form": self.form,
            "withheld": self.withheld.to_dict() if self.withheld else None,
            "acceptance_rate": dataclasses.asdict(self.summary.acceptance_rate)
            if self.summary.acceptance_rate
            else None,
            "acceptance_length": dataclasses.asdict(self.summary.acceptance_length)
            if self.summary.acceptance_length
            else None,
            "latency": self.summary.latency,
            "draft_tokens": self.summary.draft_tokens,
            "accepted_tokens": self.summary.accepted_tokens,
        }


def _evidence(study: Study, key: str) -> tuple[list[TrialView], bool]:
    """The launches verdicts come from: the confirmation's where it measured this workload, else the search's."""
    confirm = latest_plan(study.confirm)
    if launches(confirm, BASELINE, key) and any(
        v.label != BASELINE and ok_summary(v, key) for v in confirm if v.complete
    ):
        return confirm, True
    return study.search, False


def _compare(
    views: list[TrialView], label: str, key: str, noise: Noise, study: Study, warnings: StudyWarnings
) -> Comparison | None:
    return quiet_compare(views, (label, BASELINE), key, noise, study.min_gain, warnings)


def quiet_views(
    views: list[TrialView], labels: tuple[str, ...], key: str, metric: str = "headline"
) -> list[TrialView]:
    """The launches a comparison of `labels` rests on: those measured on a quiet host where at least MIN_CLEAN
    of each side remain, else all of them (and the verdict is unreliable, see `host_checked`)."""
    quiet = quiet_only(views, key)
    if len(quiet) == len(views) or any(len(launches(quiet, x, key, metric)) < MIN_CLEAN for x in labels):
        return views
    return quiet


def quiet_compare(
    views: list[TrialView],
    labels: tuple[str, str],
    key: str,
    noise: Noise,
    min_gain: float,
    warnings: StudyWarnings,
    metric: str = "headline",
) -> Comparison | None:
    """The first configuration against the second (its reference), on `quiet_views`; the verdict says how many
    launches on a busy host were left out."""
    label, reference = labels
    used = quiet_views(views, labels, key, metric)
    mine, theirs = launches(used, label, key, metric), launches(used, reference, key, metric)
    found = stats.compare(mine, theirs, noise, min_gain) if mine and theirs else None
    if found is None:
        return None
    kept = {id(v) for v in used}
    left_out = sum(1 for v in views if v.label in labels and id(v) not in kept)
    if left_out:
        why = f"{found.why}; {left_out} launch{'es' if left_out > 1 else ''} on a busy host left out"
        found = dataclasses.replace(found, why=why)
    return host_checked(found, used, labels, key, warnings)


def host_checked(
    found: Comparison, views: list[TrialView], labels: tuple[str, ...], key: str, warnings: StudyWarnings
) -> Comparison:
    """The comparison, or "unreliable" where a launch behind it ran on a busy host, the workload's streams
    queued, or it rests on search launches of a workload whose baseline drifted (a comparison in confirmation
    rounds does not: a move that the round's both sides share cancels)."""
    used = {(v.phase, v.number, key) for v in views if v.label in labels and ok_summary(v, key)}
    searched = any(phase == Phase.SEARCH for phase, _, _ in used)
    if used & warnings.busy or key in warnings.unreliable_workloads or (searched and key in warnings.drifted):
        reason = "measured on a busy or drifting host (see the warnings)"
        return dataclasses.replace(found, verdict=Verdict.UNRELIABLE, why=reason)
    return found


def within_limits(views: list[TrialView], label: str, key: str, limits: dict[str, float]) -> bool:
    """Whether the configuration's launches meet every latency limit on the workload (median over launches)."""
    measured = any(v.label == label and ok_summary(v, key) for v in views)
    return not limits or (measured and not latency_excess(views, label, key, limits))


def latency_excess(views: list[TrialView], label: str, key: str, limits: dict[str, float]) -> str:
    """The latency limit the configuration breaks most (median over its launches), with its figure:
    `tpot p90 0.031 s over the 0.025 s limit at 4 req/s`; "" where it meets every limit."""
    found = [s for v in views if v.label == label and (s := ok_summary(v, key))]
    if not limits or not found:
        return ""
    over = {n: statistics.median(s.over_limits(limits)[n] for s in found) for n in limits}
    name = max(over, key=lambda n: over[n] / limits[n])
    if over[name] <= 0:
        return ""
    measure = name.removesuffix("_s").replace("_", " ")
    at = f" at {found[0].rate:g} req/s" if found[0].rate else ""
    if math.isinf(over[name]):
        return f"{measure} not measured (no token came) against the {limits[name]:g} s limit{at}"
    return f"{measure} {limits[name] + over[name]:.3g} s over the {limits[name]:g} s limit{at}"


class VetoKind(StrEnum):
    """Why a faster configuration is not what to run: the one reason that holds, in the order they are tried."""

    NOT_REPRESENTATIVE = "the baseline's answers are not text"
    OUTPUT = "changes the output"
    LATENCY = "breaks a latency limit"


@dataclass(frozen=True)
class Veto:
    kind: VetoKind
    evidence: str  # the figure: "1/3 identical against a floor of 3/3 (...)", "ttft p90 0.31 s over ..."

    def describe(self) -> str:
        return f"{self.kind}: {self.evidence}"


@dataclass(frozen=True)
class Withheld:
    """The fastest configuration confirmed faster that a veto keeps from being what to run: shown beside the
    recommendation (report, dashboard, export) so that a user can judge the veto."""

    label: str
    params: dict[str, Any]
    gain: float
    veto: Veto

    def describe(self) -> str:
        """`trial 5 (+94%): changes the output: 1/3 identical ...` (outputs say "withheld" before it)."""
        return f"{self.label} ({self.gain:+.0%}): {self.veto.describe()}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "configuration": self.label,
            "params": self.params,
            "gain": self.gain,
            "veto": str(self.veto.kind),
            "evidence": self.veto.evidence,
        }


def veto_of(study: Study, views: list[TrialView], label: str, key: str) -> Veto | None:
    """The one reason a configuration is not to run on a workload, the first that holds: its answers changed
    beyond the floor (on the same prompts), then a latency limit broken (median over its launches)."""
    check = output_check(study, label, key)
    if check is not None and check.changed:
        return Veto(VetoKind.OUTPUT, check.evidence())
    if excess := latency_excess(views, label, key, study.latency_limits):
        return Veto(VetoKind.LATENCY, excess)
    return None


def output_check(study: Study, label: str, key: str) -> fidelity.OutputCheck | None:
    """The configuration's texts against the baseline's where the same prompt was sent (search and
    confirmation launches alike), the floor from the baseline's own launches."""

    def summaries(name: str) -> list[WorkloadSummary]:
        return [s for v in study.views if v.label == name and (s := ok_summary(v, key)) and s.outputs]

    base, mine = summaries(BASELINE), summaries(label)
    if not base or not mine or label == BASELINE:
        return None
    return fidelity.check(
        [fidelity.answers(s.outputs, s.output_prompts) for s in mine],
        [fidelity.answers(s.outputs, s.output_prompts) for s in base],
        [tie for s in base for tie in s.ties],
    )


def silent_change(study: Study, label: str, key: str) -> str:
    """What a configuration to run changed in the answers without a veto (`OutputCheck.silent_change`)."""
    check = output_check(study, label, key)
    return check.silent_change() if check is not None else ""


def recommendations(study: Study, warnings: StudyWarnings) -> list[Recommendation]:
    baseline = baseline_view(study.search)
    search_by_label = study.by_label()
    out = []
    for key in study.keys:
        measured = [
            v for v in complete_views(study.search) if v.label != BASELINE and headline_median(v, key)
        ]
        if not measured:
            continue
        views, confirmed = _evidence(study, key)
        noise = study_noise(views, key)
        candidates = (
            [label for label in dict.fromkeys(v.label for v in views if v.complete) if label != BASELINE]
            if confirmed
            else [max(measured, key=lambda v: headline_median(v, key) or 0.0).label]
        )
        scored = [
            (c, comp)
            for c in candidates
            if c in search_by_label and ok_summary(search_by_label[c], key)
            if (comp := _compare(views, c, key, noise, study, warnings)) is not None
        ]
        base_summary = ok_summary(baseline, key) if baseline else None
        base_tps = base_summary.headline if base_summary else None
        if not scored:
            best = max(measured, key=lambda v: headline_median(v, key) or 0.0)
            summary = ok_summary(best, key)
            assert summary is not None and summary.headline is not None and best.record is not None
            out.append(
                Recommendation(
                    key,
                    best.number,
                    best.record.params,
                    summary.headline,
                    base_tps,
                    search_gain=None,
                    comparison=None,
                    verdict=Verdict.NO_BASELINE,
                    why_verdict="no baseline measured this workload",
                    noise=noise,
                    confirmed=False,
                    summary=summary,
                    recommended_trial=best.number,
                    recommended_params=best.record.params,
                    why="no baseline to compare with",
                    label=best.label,
                    recommended_name=best.name,
                )
            )
            continue
        label, comparison = max(scored, key=lambda item: item[1].gain)
        view = search_by_label[label]
        summary = ok_summary(view, key)
        assert view.record is not None and summary is not None and summary.headline is not None
        rec = Recommendation(
            key,
            view.number,
            view.record.params,
            summary.headline,
            base_tps,
            # What the search alone said (one launch each): nothing, where only the confirmation launched it.
            search_gain=summary.headline.median / base_tps.median - 1
            if base_tps and base_tps.median > 0 and view.phase is Phase.SEARCH
            else None,
            comparison=comparison,
            verdict=comparison.verdict,
            why_verdict=comparison.why,
            noise=noise,
            confirmed=confirmed,
            summary=summary,
            output=output_check(study, label, key),
            confirmed_value=_geo_mean(launches(views, label, key)) if confirmed else None,
            confirmed_baseline_value=_geo_mean(launches(views, BASELINE, key)) if confirmed else None,
            label=label,
        )
        out.append(_what_to_run(rec, scored, search_by_label, baseline, study, views, noise, key))
    return [_with_health(rec, study) for rec in out]


def _with_health(rec: Recommendation, study: Study) -> Recommendation:
    """The baseline's answers beside the verdict; where they are not text, speculation stays off, as no
    measurement here speaks for real text."""
    found, form = baseline_health(study.views, rec.workload)
    rec = dataclasses.replace(rec, health=found, form=form)
    if found is None or rec.representative:
        return rec
    baseline = baseline_view(study.search)
    why = (
        f"not representative: speculation off answered with degenerate output ({found.describe()}), "
        f"and {health.NOT_REPRESENTATIVE}: {found.remedy()}"
    )
    # What the study found faster stays in view, with this, the one veto that holds on the whole workload.
    veto = Veto(VetoKind.NOT_REPRESENTATIVE, found.describe())
    faster = None
    if rec.withheld is not None:
        faster = dataclasses.replace(rec.withheld, veto=veto)
    elif rec.verdict == Verdict.FASTER:
        faster = Withheld(rec.trial_label, rec.params, rec.gain or 0.0, veto)
    if faster is not None:
        why = f"withheld {faster.describe()}: {health.NOT_REPRESENTATIVE}; {found.remedy()}"
    return dataclasses.replace(_baseline_run(rec, baseline, why), withheld=faster)


def _geo_mean(found: list[Launch]) -> float | None:
    n = stats.common_prompts(found)
    return math.exp(statistics.fmean(x.log_mean(n) for x in found)) if found and n else None


def _baseline_run(rec: Recommendation, baseline: TrialView | None, why: str) -> Recommendation:
    """Speculation off: the baseline's parameters (none where it was never measured)."""
    params = baseline.record.params if baseline and baseline.record else {}
    return dataclasses.replace(
        rec,
        recommended_trial=baseline.number if baseline else -1,
        recommended_params=params,
        why=why,
        recommended_name=baseline.name if baseline else "none",
    )


def _what_to_run(
    rec: Recommendation,
    scored: list[tuple[str, Comparison]],
    search_by_label: dict[str, TrialView],
    baseline: TrialView | None,
    study: Study,
    views: list[TrialView],
    noise: Noise,
    key: str,
) -> Recommendation:
    """Faster for sure: of the candidates faster than the baseline that no veto holds against (`veto_of`), the
    cheapest not slower than the best of them. Anything else: speculation off, which costs nothing; where a
    faster candidate is vetoed, the fastest of them stays beside the recommendation with its one veto."""
    veto = veto_of(study, views, rec.trial_label, key)
    if rec.verdict == Verdict.UNCONFIRMED and veto is None and (rec.gain or 0.0) <= 0:
        why = f"the best measured was slower than no speculation ({rec.gain:+.0%}, one launch each)"
        return _baseline_run(rec, baseline, why)
    if rec.verdict == Verdict.UNCONFIRMED and veto is None:
        why = "unconfirmed: one launch each; run `specsweep confirm` before acting on it"
        return dataclasses.replace(
            rec,
            recommended_trial=rec.trial,
            recommended_params=rec.params,
            why=why,
            recommended_name=rec.trial_label,
            output_note=silent_change(study, rec.trial_label, key),
        )
    if rec.verdict == Verdict.UNRELIABLE and not rec.confirmed and veto is None:
        # One launch each, and the warnings say why even that one cannot be trusted: the confirmation measures
        # again, so it is the way forward once what the warnings name (a busy host, queued streams) is mended.
        why = (
            "unreliable and unconfirmed (see the warnings): keep speculation off, or mend what the warnings name "
            "and run `specsweep confirm`"
        )
        return _baseline_run(rec, baseline, why)
    if rec.verdict != Verdict.FASTER or baseline is None or baseline.record is None:
        why = {
            Verdict.UNCONFIRMED: f"the best measured {veto.describe() if veto else 'has no verdict'}",
            Verdict.WITHIN_NOISE: "the best gain is within noise: no speculation costs less (memory, draft work)",
            Verdict.SLOWER: "every candidate is slower than no speculation",
            # The verdict's own reason: the warnings (a busy or drifting host) or the noise against the effect.
            Verdict.UNRELIABLE: f"unreliable, {rec.why_verdict}: keep speculation off",
        }.get(rec.verdict, "no verdict")
        return _baseline_run(rec, baseline, why)
    faster = sorted(
        ((label, c) for label, c in scored if c.verdict == Verdict.FASTER), key=lambda item: -item[1].gain
    )
    # The best's veto is read above already; each other faster candidate's once.
    vetoes = {
        label: veto if label == rec.trial_label else veto_of(study, views, label, key) for label, _ in faster
    }
    intact = [(label, c) for label, c in faster if vetoes[label] is None]
    first_label, first = faster[0]
    first_veto = vetoes[first_label]
    withheld = (
        Withheld(first_label, search_by_label[first_label].record.params, first.gain, first_veto)  # type: ignore[union-attr]
        if first_veto is not None
        else None
    )
    if not intact:
        assert withheld is not None
        why = f"withheld {withheld.describe()}: keep speculation off"
        return dataclasses.replace(_baseline_run(rec, baseline, why), withheld=withheld)
    best_label = intact[0][0]
    good = []
    for label, _ in intact:
        against_best = stats.compare(
            launches(views, label, key), launches(views, best_label, key), noise, study.min_gain
        )
        if label == best_label or (against_best is not None and against_best.verdict != Verdict.SLOWER):
            good.append(search_by_label[label])
    gains = dict(intact)

    def gives_up(view: TrialView) -> float:
        """The share of the best's speed a candidate gives up, as measured."""
        return 1 - (1 + gains[view.label].gain) / (1 + gains[best_label].gain)

    def by_cost(view: TrialView) -> tuple[tuple[bool, float, float], float]:
        return cost(view), -gains[view.label].gain  # of equal cost, the faster

    # A cheaper configuration replaces the best only where what it gives up as measured is within what a gain
    # must be worth (`min_gain`): "not slower beyond noise" alone let a noisy study trade 16% for a step less.
    cheapest = min((view for view in good if gives_up(view) <= study.min_gain), key=by_cost)
    cheaper = min(good, key=by_cost)
    assert cheapest.record is not None
    why = "the best confirmed"
    if cheapest.label != best_label:
        mine, best = gains[cheapest.label].gain, gains[best_label].gain
        why = (
            f"not slower than {best_label} beyond noise, and cheaper "
            f"({cheaper_by(cheapest, search_by_label[best_label])}); it gives up {gives_up(cheapest):.1%} "
            f"of {best_label}'s speed as measured ({mine:+.0%} against {best:+.0%} over no speculation)"
        )
    if by_cost(cheaper) < by_cost(cheapest) and cost(cheaper) != cost(cheapest):
        why += (
            f"; {cheaper.label} is cheaper ({cheaper_by(cheaper, cheapest)}) and not slower beyond noise, but gives"
            f" up {gives_up(cheaper):.1%} of {best_label}'s speed as measured, more than the {study.min_gain:.0%} a"
            " gain must be worth"
        )
    if withheld is not None:
        why += f"; withheld {withheld.describe()}"
    return dataclasses.replace(
        rec,
        recommended_trial=cheapest.number,
        recommended_params=cheapest.record.params,
        why=why,
        recommended_name=cheapest.name,
        withheld=withheld,
        output_note=silent_change(study, cheapest.label, key),
    )


@dataclass(frozen=True)
class OverallRecommendation:
    """One configuration for all workloads: the best worst-case gain over the baseline (most users run one server)."""

    trial: int
    params: dict[str, Any]
    worst_gain: float
    gains: dict[str, float]
    why: str
    confirmed: bool = False
    name: str = ""  # how outputs name it ("trial N", "predicted K")
    withheld: Withheld | None = None  # faster on every workload at a better worst case, and vetoed on one

    @property
    def trial_label(self) -> str:
        return self.name or f"trial {self.trial}"

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["withheld"] = self.withheld.to_dict() if self.withheld else None
        return data


def search_overall(
    views: list[TrialView], limits: dict[str, float] | None = None
) -> tuple[float, TrialView] | None:
    """The search's best worst-case configuration within the latency limits, with that worst-case gain (the
    confirmation checks it on every workload)."""
    baseline = baseline_view(views)
    if baseline is None or baseline.record is None:
        return None
    keys = [k for k in baseline.record.workloads if headline_median(baseline, k)]
    scored = []
    for view in complete_views(views):
        if view.label == BASELINE:
            continue
        medians = {k: headline_median(view, k) for k in keys}
        if (
            keys
            and all(medians.values())
            and all(within_limits([view], view.label, k, limits or {}) for k in keys)
        ):
            worst = min((medians[k] or 0.0) / (headline_median(baseline, k) or 1.0) - 1 for k in keys)
            scored.append((worst, view))
    if not scored:
        return None
    return max(scored, key=lambda item: (item[0], [-c for c in cost(item[1])]))


def overall_recommendation(study: Study, warnings: StudyWarnings) -> OverallRecommendation | None:
    baseline = baseline_view(study.search)
    if baseline is None or baseline.record is None:
        return None
    measured = [k for k in baseline.record.workloads if headline_median(baseline, k)]
    # Workloads whose baseline answers are not text say nothing about real gains: the headline leaves them out.
    keys = [k for k in measured if k not in warnings.not_representative]
    left_out = [k for k in measured if k in warnings.not_representative]
    confirm = latest_plan(study.confirm)
    by_label = study.by_label()
    evidence, confirmed = (confirm, True) if confirm else (study.search, False)
    scored, compared, vetoed = [], [], []
    for label in dict.fromkeys(v.label for v in evidence if v.complete):
        if label == BASELINE or label not in by_label:
            continue
        comparisons = {
            k: _compare(evidence, label, k, study_noise(evidence, k), study, warnings) for k in keys
        }
        if keys and all(comparisons.values()):
            done = {k: c for k, c in comparisons.items() if c is not None}
            compared.append((by_label[label], done))
            sure = all(c.verdict == Verdict.FASTER for c in done.values()) or not confirmed
            if not sure:
                continue
            worst = min(c.gain for c in done.values())
            veto = next((v for k in keys if (v := _workload_veto(study, evidence, label, k))), None)
            if veto is None:
                scored.append((worst, by_label[label], done))
            elif worst >= study.min_gain and (record := by_label[label].record) is not None:
                vetoed.append(Withheld(label, record.params, worst, veto))
    aside = (
        f"; {', '.join(left_out)} left out (its baseline output is degenerate: not representative)"
        if left_out
        else ""
    )
    best = max(scored, key=lambda item: (item[0], [-c for c in cost(item[1])]), default=None)
    # The faster-everywhere configuration a veto keeps from serving all: named where it beats what is run.
    withheld = max(
        (w for w in vetoed if best is None or best[0] < study.min_gain or w.gain > best[0]),
        key=lambda w: w.gain,
        default=None,
    )
    shelved = f"; withheld {withheld.describe()}" if withheld else ""
    if best is None or best[0] < study.min_gain:
        if withheld:
            why = f"withheld {withheld.describe()}: run without speculation"
        elif not keys and left_out:
            why = "no workload's baseline answers read as text: run without speculation"
        else:
            why = _no_one_server(compared, confirmed)
        return OverallRecommendation(
            baseline.number, baseline.record.params, 0.0, {}, why + aside, confirmed, baseline.name, withheld
        )
    worst, view, chosen = best
    assert view.record is not None
    why = "best worst-case gain across workloads" + ("" if confirmed else " (unconfirmed)") + shelved + aside
    return OverallRecommendation(
        view.number,
        view.record.params,
        worst,
        {k: c.gain for k, c in chosen.items()},
        why,
        confirmed,
        view.name,
        withheld,
    )


def _workload_veto(study: Study, views: list[TrialView], label: str, key: str) -> Veto | None:
    """A configuration's veto on one of several workloads, the workload named in its evidence."""
    veto = veto_of(study, views, label, key)
    return dataclasses.replace(veto, evidence=f"on {key}, {veto.evidence}") if veto else None


@dataclass(frozen=True)
class Verdicts:
    """A study's verdicts, computed once and shown by every output: its warnings, per workload what to run, and
    one server for all workloads."""

    warnings: StudyWarnings
    recommendations: list[Recommendation]
    overall: OverallRecommendation | None


def study_verdicts(study: Study) -> Verdicts:
    warnings = study_warnings(study.search, study.confirm, study.keys)
    return Verdicts(warnings, recommendations(study, warnings), overall_recommendation(study, warnings))


def _no_one_server(compared: list[tuple[TrialView, dict[str, Comparison]]], confirmed: bool) -> str:
    """Why speculation is off for one server: the configuration nearest to serving every workload and its
    weakest workload, or that none was measured on all of them (each confirmed only where it led)."""
    if not compared:
        where = "launched again" if confirmed else "measured"
        return f"none was {where} on every workload: run without speculation, or one server per workload"
    view, done = max(compared, key=lambda item: min(c.gain for c in item[1].values()))
    weakest = min(done, key=lambda k: done[k].gain)
    return (
        f"no configuration is faster on every workload beyond noise, the closest being {view.name} "
        f"({done[weakest].verdict} on {weakest}: {done[weakest].gain:+.0%}): run without speculation"
    )


# --- what the confirmation launches ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Relaunch:
    """A configuration to launch again: its label, its launch parameters and the workloads to measure."""

    label: str
    params: dict[str, Any]
    workloads: tuple[str, ...]


def confirmation_plan(
    views: list[TrialView],
    top: int,
    min_gain: float = stats.MIN_GAIN,
    limits: dict[str, float] | None = None,
    favoured: Mapping[str, int] | None = None,
) -> list[Relaunch]:
    """The search's `top` best configurations per workload that meet the latency limits, and its one-for-all
    pick, with the baseline. `favoured` (workload: trial number, the surface model's rating) goes second where
    it is not the fastest measured already: of two launches a hair apart, the faster is often the luckier."""
    baseline = baseline_view(views)
    if baseline is None or baseline.record is None or top <= 0:
        return []
    keys = [k for k in baseline.record.workloads if headline_median(baseline, k)]
    chosen: dict[str, tuple[dict[str, Any], set[str]]] = {}
    for key in keys:
        ranked = sorted(
            (
                v
                for v in complete_views(views)
                if v.label != BASELINE
                and headline_median(v, key)
                and within_limits([v], v.label, key, limits or {})
            ),
            key=lambda v: -(headline_median(v, key) or 0.0),
        )
        best: dict[str, TrialView] = {}
        for view in ranked:
            best.setdefault(view.label, view)  # one per configuration (a duplicate trial shares its label)
        order = list(best.values())
        if (number := (favoured or {}).get(key)) is not None:
            liked = [v for v in order[1:] if v.number == number]
            order = order[:1] + liked + [v for v in order[1:] if v not in liked]
        for view in order[:top] + _best_of_each_kind(order):
            assert view.record is not None
            chosen.setdefault(view.label, (view.record.params, set()))[1].add(key)
    # The best worst case, where it gains on every workload; where nothing did in the search's single launches
    # (too noisy to rule one server out), the nearest too, if it is launched again anyway: it is measured on
    # every workload (probes, no extra launch).
    if (overall := search_overall(views, limits)) is not None:
        worst, pick = overall
        if pick.record is not None and (worst >= min_gain or pick.label in chosen):
            chosen.setdefault(pick.label, (pick.record.params, set()))[1].update(keys)
    if not chosen:
        return []
    measured = sorted({k for _, ws in chosen.values() for k in ws}, key=keys.index)
    plan = [Relaunch(BASELINE, baseline.record.params, tuple(measured))]
    plan += [
        Relaunch(label, params, tuple(sorted(ws, key=keys.index))) for label, (params, ws) in chosen.items()
    ]
    return plan


def _best_of_each_kind(ranked: list[TrialView]) -> list[TrialView]:
    """Where the search measured both the engine's own controller and tuned static configurations, the fastest
    of each (`sweep/controllers.py` answers which to run from their confirmed launches); else none."""
    firsts: dict[bool, TrialView] = {}
    for view in ranked:
        shape = view.record.shape if view.record else None
        if shape is not None:
            firsts.setdefault(bool(shape.controller), view)
    return list(firsts.values()) if len(firsts) == 2 else []


def plan_id(plan: list[Relaunch], launches_each: int) -> str:
    """Names a plan: the same search results give the same plan on every worker."""
    text = json.dumps([[c.label, c.params, c.workloads] for c in plan] + [launches_each], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


# --- an A/B of two configurations -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ABRow:
    """One line of an A/B table: a metric under A and B, B's difference, and the verdict where one applies."""

    metric: str
    a: str
    b: str
    difference: str
    verdict: str = ""


def _plain(
    views: list[TrialView], metric: str, value: Callable[[TrialView], float | None], fmt: str
) -> ABRow | None:
    """A metric without a verdict: the median over each configuration's launches, and the difference."""
    medians = []
    for label in ("A", "B"):
        found = [
            x for view in views if view.label == label and view.complete if (x := value(view)) is not None
        ]
        medians.append(statistics.median(found) if found else None)
    a, b = medians
    if a is None and b is None:
        return None
    diff = "-"
    if a is not None and b is not None:
        diff = f"{b - a:+.3g}" + (f" ({b / a - 1:+.1%})" if a else "")
    return ABRow(metric, "-" if a is None else fmt.format(a), "-" if b is None else fmt.format(b), diff)


def _speed(
    views: list[TrialView], key: str, metric: str, name: str, min_gain: float, warnings: StudyWarnings
) -> ABRow | None:
    used = quiet_views(views, ("B", "A"), key, metric)
    a, b = launches(used, "A", key, metric), launches(used, "B", key, metric)
    noise = study_noise(views, key, metric, reference="A")
    found = quiet_compare(views, ("B", "A"), key, noise, min_gain, warnings, metric)
    a_mean, b_mean = _geo_mean(a), _geo_mean(b)
    if found is None or a_mean is None or b_mean is None:
        return None
    return ABRow(
        f"{key}: {name}",
        f"{a_mean:.1f} x{len(a)}",
        f"{b_mean:.1f} x{len(b)}",
        f"{found.gain:+.1%} [{found.interval}]",
        str(found.verdict),
    )


def _fact(view: TrialView, name: str) -> float | None:
    value = getattr(view.record.facts, name) if view.record else None
    return None if value is None else float(value)


def ab_rows(
    views: list[TrialView], keys: list[str], warnings: StudyWarnings, min_gain: float = stats.MIN_GAIN
) -> list[ABRow]:
    """B against A, interleaved launches of each: speeds with verdicts (unreliable where the host was busy),
    then latency, acceptance and memory."""
    rows: list[ABRow | None] = []
    for key in keys:
        rows += [
            _speed(
                views, key, "capacity_rps", "capacity (req/s within the latency limits)", min_gain, warnings
            ),
            _speed(views, key, "decode_tps", "decode t/s", min_gain, warnings),
            _speed(views, key, "aggregate_tps", "aggregate t/s (decode window)", min_gain, warnings),
            _speed(views, key, "sum_stream_tps", "sum of stream t/s", min_gain, warnings),
            *(
                _plain(
                    views,
                    f"{key}: {name} (s)",
                    functools.partial(_latency, key=key, part=part, quantile=q),
                    fmt,
                )
                for name, part, q, fmt in LATENCY_ROWS
            ),
            _plain(views, f"{key}: accept length", functools.partial(_accept_length, key=key), "{:.2f}"),
        ]
    for name, attr, fmt in (
        ("KV pool (tokens)", "kv_pool_tokens", "{:.0f}"),
        ("free after pool (GB)", "free_after_pool_gb", "{:.2f}"),
        ("CUDA-graph capture (GB)", "graph_capture_gb", "{:.2f}"),
        ("start-up (s)", "startup_s", "{:.1f}"),
    ):
        rows.append(_plain(views, name, functools.partial(_fact, name=attr), fmt))
    return [row for row in rows if row is not None]


# (row name, latency part, percentile, format). Speculation streams accepted tokens back to back, so the median
# gap between chunks can be ~0 (and p90 too at 20 tokens a step): time per output token is the per-token figure,
# the gaps' p99 shows the steps.
LATENCY_ROWS = (
    ("TTFT p50", "ttft_s", "p50", "{:.3f}"),
    ("time per output token p50", "tpot_s", "p50", "{:.4f}"),
    ("inter-token p99", "itl_s", "p99", "{:.4f}"),
)


def _latency(view: TrialView, key: str, part: str, quantile: str) -> float | None:
    summary = ok_summary(view, key)
    return summary.latency.get(part, {}).get(quantile) if summary else None


def _accept_length(view: TrialView, key: str) -> float | None:
    summary = ok_summary(view, key)
    return summary.acceptance_length.median if summary and summary.acceptance_length else None

"""The verdict per workload, and the one configuration to run for all of them.

Two phases feed it. The *search* launches each configuration once and is biased upwards at its top (the best of
N by one measurement is partly luck: the winner's curse). The *confirmation* launches the search's best
candidates again, interleaved with the baseline, several times each; every verdict and recommendation comes
from the confirmation, with the search's number shown beside it. Without confirmation data, verdicts say
"unconfirmed"."""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sweep.analysis.evidence import (
    MIN_CLEAN,
    baseline_health,
    baseline_view,
    cheaper_by,
    cost,
    headline_median,
    launches,
    ok_summary,
    quiet_only,
    study_noise,
)
from sweep.analysis.study_warnings import StudyWarnings, study_warnings
from sweep.answers import fidelity, health
from sweep.answers.health import OutputHealth
from sweep.core import stats
from sweep.core.stats import Comparison, Launch, Looks, Noise, Verdict
from sweep.records import Spread, WorkloadSummary
from sweep.storage import BASELINE, Phase, Study, TrialView, complete_views, latest_confirmation

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
    # Where the model could not rank a configuration below the picks and the confirmation measured it too
    # (`Relaunch.doubts`): why, in a line; "" otherwise.
    doubt: str = ""

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
            "doubt": self.doubt,
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
    confirm = latest_confirmation(study.confirm)
    if launches(confirm, BASELINE, key) and any(
        v.label != BASELINE and ok_summary(v, key) for v in confirm if v.complete
    ):
        return confirm, True
    return study.search, False


def _compare(
    views: list[TrialView], label: str, key: str, noise: Noise, study: Study, warnings: StudyWarnings
) -> Comparison | None:
    return quiet_compare(views, (label, BASELINE), key, noise, study.min_gain, warnings, looks=study.looks)


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
    looks: Looks | None = None,
) -> Comparison | None:
    """The first configuration against the second (its reference), on `quiet_views`, with the confirmation's
    `looks` where it has rounds; the verdict says how many launches on a busy host were left out."""
    label, reference = labels
    used = quiet_views(views, labels, key, metric)
    mine, theirs = launches(used, label, key, metric), launches(used, reference, key, metric)
    found = stats.compare(mine, theirs, noise, min_gain, looks=looks) if mine and theirs else None
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
            confirmed_value=geo_mean(launches(views, label, key)) if confirmed else None,
            confirmed_baseline_value=geo_mean(launches(views, BASELINE, key)) if confirmed else None,
            label=label,
            doubt=next((v.doubts[key] for v in views if key in v.doubts), ""),
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


def geo_mean(found: list[Launch]) -> float | None:
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
            launches(views, label, key),
            launches(views, best_label, key),
            noise,
            study.min_gain,
            looks=study.looks,
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
    confirm = latest_confirmation(study.confirm)
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

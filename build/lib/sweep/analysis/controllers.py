"""The engine's own controller against a tuned static configuration and against none, per workload and load.

The engines now size speculation themselves (vLLM's adaptive verification, SGLang's adaptive steps, llama.cpp's
draft confidence floor), so the
question a study answers is three-way: does the best static configuration the search found beat the engine's
controller, by how much, and does either beat no speculation? A configuration's kind is its shape's
(`SpecShape.controller`, which the engine writes: empty for a static one). Per workload key (each load is its
own key: `code/8streams`, `chat/2rps`), the best static and the best controller configuration are the complete
search trials with the highest median of what verdicts compare (decode t/s, or the capacity). Each is compared
with no speculation, and the controller with the static one, by `stats.compare` with the noise measured in the
same study, on the confirmation's launches where it launched both sides again, else on the search's: an
interval, and a verdict that is "faster" or "slower" only when the interval says so.

Which to run is the study's one verdict for the workload (its recommendation, `analysis.recommendations`:
confirmed against none, vetoed where the answers change or are no text), named here by its kind, so the report
never says two things; the comparisons say by how much each arm differs from the others.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sweep.analysis.evidence import headline_median, launches, study_noise
from sweep.analysis.study_warnings import StudyWarnings
from sweep.analysis.verdicts import Verdicts, quiet_compare
from sweep.core.stats import Comparison
from sweep.storage import BASELINE, Study, TrialView, latest_confirmation


class ArmKind(StrEnum):
    NONE = "none"  # no speculation: the baseline
    STATIC = "static"  # a tuned configuration, every step alike
    CONTROLLER = "controller"  # the engine's own controller within its bound


@dataclass(frozen=True)
class Arm:
    kind: ArmKind
    label: str  # the configuration ("baseline", "trial N")
    params: dict[str, Any]
    median: float
    controller: str = ""  # the engine's name for its controller ("" for none and a static configuration)


@dataclass(frozen=True)
class ControllerAnswer:
    """One workload's three arms, their comparisons, and which to run."""

    workload: str
    controller: str  # the engine's name for its controller
    arms: tuple[Arm, Arm, Arm]  # none, static, controller
    static_vs_none: Comparison | None
    controller_vs_none: Comparison | None
    controller_vs_static: Comparison | None
    run: ArmKind
    run_label: str  # the configuration the study's verdict runs ("baseline", "trial N")
    why: str

    def to_dict(self) -> dict[str, Any]:
        def compared(c: Comparison | None) -> dict[str, Any] | None:
            return (
                None
                if c is None
                else {"gain": c.gain, "interval": [c.low, c.high], "verdict": str(c.verdict)}
            )

        return {
            "workload": self.workload,
            "controller": self.controller,
            "arms": {
                a.kind.value: {"configuration": a.label, "params": a.params, "median": a.median}
                for a in self.arms
            },
            "static_vs_none": compared(self.static_vs_none),
            "controller_vs_none": compared(self.controller_vs_none),
            "controller_vs_static": compared(self.controller_vs_static),
            "run": self.run.value,
            "run_configuration": self.run_label,
            "why": self.why,
        }


def controller_of(view: TrialView) -> str | None:
    """The engine's controller a configuration runs ("" static), None where it does not speculate."""
    shape = view.record.shape if view.record else None
    return None if shape is None else shape.controller


def _best(views: list[TrialView], key: str, kind: ArmKind) -> Arm | None:
    found = []
    for view in views:
        controller = controller_of(view)
        if not view.complete or view.role == BASELINE or controller is None:
            continue
        if (kind is ArmKind.CONTROLLER) != bool(controller):
            continue
        median = headline_median(view, key)
        if median is not None and view.record is not None:
            found.append(Arm(kind, view.name, dict(view.record.params), median, controller))
    return max(found, key=lambda a: a.median, default=None)


@dataclass(frozen=True)
class Judged:
    """One workload's comparisons: an arm against another by `quiet_compare`, on the confirmation's launches
    where both sides were launched again, else on the search's, with that evidence's noise."""

    study: Study
    key: str
    warnings: StudyWarnings

    def __call__(self, mine: Arm, reference: Arm) -> Comparison | None:
        labels = (mine.label, reference.label)
        confirm = latest_confirmation(self.study.confirm)
        views = confirm if all(launches(confirm, x, self.key) for x in labels) else self.study.search
        noise = study_noise(views, self.key)
        return quiet_compare(
            views, labels, self.key, noise, self.study.min_gain, self.warnings, looks=self.study.looks
        )


def controller_answers(study: Study, verdicts: Verdicts) -> list[ControllerAnswer]:
    """Per workload where the study measured both a static and a controller configuration, the answer."""
    recommended = {r.workload: r for r in verdicts.recommendations}
    answers = []
    for key in study.keys:
        views = study.search
        static, adaptive = _best(views, key, ArmKind.STATIC), _best(views, key, ArmKind.CONTROLLER)
        baseline = next((v for v in views if v.label == BASELINE and headline_median(v, key)), None)
        rec = recommended.get(key)
        if static is None or adaptive is None or baseline is None or rec is None:
            continue
        none = Arm(ArmKind.NONE, BASELINE, {}, headline_median(baseline, key) or 0.0)
        judged = Judged(study, key, verdicts.warnings)
        s_none, c_none, c_static = judged(static, none), judged(adaptive, none), judged(adaptive, static)
        run = _kind(next((v for v in views if v.number == rec.recommended_trial), None))
        answers.append(
            ControllerAnswer(
                key,
                adaptive.controller,
                (none, static, adaptive),
                s_none,
                c_none,
                c_static,
                run,
                rec.recommended_label,
                rec.why,
            )
        )
    return answers


def _kind(view: TrialView | None) -> ArmKind:
    """The kind of the configuration a recommendation names (the baseline, or one that does not speculate:
    none)."""
    controller = controller_of(view) if view is not None else None
    if controller is None:
        return ArmKind.NONE
    return ArmKind.CONTROLLER if controller else ArmKind.STATIC

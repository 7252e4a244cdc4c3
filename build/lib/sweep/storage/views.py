"""Trials read back as views (`TrialView`, `trial_views`, `Study`) for the analysis and every output."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

import optuna
from optuna.trial import TrialState

from sweep.core.stats import MIN_GAIN, Looks
from sweep.records import TrialRecord
from sweep.storage.trials import (
    DOUBT_ATTR,
    INTERRUPTED,
    LABEL_ATTR,
    LOOKS_ATTR,
    RECORD_ATTR,
    ROLE_ATTR,
    ROUND_ATTR,
    SET_ATTR,
)

BASELINE = "baseline"  # the label of the configuration without speculation


class Phase(StrEnum):
    SEARCH = "search"
    CONFIRM = "confirm"


@dataclass(frozen=True)
class TrialView:
    number: int
    state: str
    role: str
    record: TrialRecord | None
    phase: Phase = Phase.SEARCH
    label: str = ""  # the configuration: "baseline", "trial N" (search) or a confirmation launch's label
    round: int = 0
    plan: str = ""
    doubts: dict[str, str] = field(default_factory=dict)  # a confirmation launch's `Relaunch.doubts`

    @property
    def failure(self) -> str:
        if self.state == "FAIL":
            return (self.record.failure if self.record else "") or INTERRUPTED
        return ""

    @property
    def complete(self) -> bool:
        return self.state == TrialState.COMPLETE.name and self.record is not None

    @property
    def name(self) -> str:
        """How outputs name the configuration: "trial N" for a search trial; for a confirmation launch its
        configuration's label ("trial N", or "predicted K" for one the model predicted and only the
        confirmation launched)."""
        return self.label if self.phase is Phase.CONFIRM else f"trial {self.number}"


def trial_views(study: optuna.Study, phase: Phase = Phase.SEARCH) -> list[TrialView]:
    views = []
    for t in study.get_trials(deepcopy=False):
        data = t.user_attrs.get(RECORD_ATTR)
        role = t.user_attrs.get(ROLE_ATTR, "search")
        default_label = (
            BASELINE if role == BASELINE else f"trial {t.user_attrs.get('duplicate_of', t.number)}"
        )
        views.append(
            TrialView(
                t.number,
                t.state.name,
                role,
                TrialRecord.from_dict(data) if data else None,
                phase,
                str(t.user_attrs.get(LABEL_ATTR, default_label)),
                int(t.user_attrs.get(ROUND_ATTR, 0)),
                str(t.user_attrs.get(SET_ATTR, "")),
                dict(t.user_attrs.get(DOUBT_ATTR, {})),
            )
        )
    return views


def study_looks(confirm: optuna.Study | None) -> Looks | None:
    """The looks the confirmation study's newest rounds were taken with (None: none, or kept before looks were)."""
    kept = confirm.user_attrs.get(LOOKS_ATTR) if confirm is not None else None
    return Looks(int(kept[0]), int(kept[1])) if kept else None


def latest_confirmation(confirm: list[TrialView]) -> list[TrialView]:
    """Confirmation launches of the newest plan only (a longer search makes a new plan, launched afresh)."""
    if not confirm:
        return []
    newest = confirm[-1].plan
    return [v for v in confirm if v.plan == newest]


def complete_views(views: list[TrialView]) -> list[TrialView]:
    return [v for v in views if v.complete and v.record is not None and v.record.workloads]


@dataclass(frozen=True)
class Study:
    """Everything a morning output needs, read once: the search, its confirmation, noise and warnings."""

    search: list[TrialView]
    confirm: list[TrialView]
    min_gain: float = MIN_GAIN
    latency_limits: dict[str, float] = field(default_factory=dict)
    looks: Looks | None = None  # the confirmation's rounds' looks (None: a study from before they were kept)

    @property
    def views(self) -> list[TrialView]:
        return [*self.search, *self.confirm]

    @property
    def keys(self) -> list[str]:
        return list(
            dict.fromkeys(k for v in complete_views(self.search) if v.record for k in v.record.workloads)
        )

    def by_label(self) -> dict[str, TrialView]:
        """The launch behind each configuration label: its search trial, or, for a configuration only the
        confirmation launched (the model's prediction, with a cost profile), its first confirmation launch."""
        out: dict[str, TrialView] = {}
        for view in [*complete_views(self.search), *complete_views(latest_confirmation(self.confirm))]:
            out.setdefault(view.label, view)
        return out

    def named(self, name: str) -> TrialView | None:
        """The launch outputs name `name` ("trial N", "predicted K"): a search trial, else a confirmation's."""
        return next((v for v in self.views if v.name == name and v.record is not None), None)

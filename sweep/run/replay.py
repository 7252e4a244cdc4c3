"""A finished study's n-gram acceptance replayed on its baseline's own tokens: every drafter configuration the
engine can replay (`Engine.replay_arms`), per workload, without launching anything (`specsweep replay`)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sweep.core.errors import UserError
from sweep.records import RequestMeasurement
from sweep.replay import ReplayArm, TokenIds
from sweep.run.preflight import build_engine
from sweep.run.study import DEFAULT_RUNS, open_study, stored_space
from sweep.storage import StudyPaths
from sweep.storage.views import BASELINE, trial_views


@dataclass(frozen=True)
class ReplayedWorkload:
    """One drafter configuration replayed over one workload's baseline answers."""

    workload: str
    arm: str  # the configuration, as a space names its parameters
    params: dict[str, Any]
    requests: int
    steps: int
    drafted: int
    accepted: int

    @property
    def acceptance_length(self) -> float | None:
        """Tokens per verify step (the accepted ones and the target's own), as the engines report it."""
        return 1.0 + self.accepted / self.steps if self.steps else None

    @property
    def acceptance_rate(self) -> float | None:
        return self.accepted / self.drafted if self.drafted else None


@dataclass(frozen=True)
class StudyReplay:
    """What a study's baseline replays to, and what it could not replay: per workload the requests without
    token ids, with the reasons the rows give."""

    study: str
    baseline: int  # the baseline trial's number
    rows: tuple[ReplayedWorkload, ...]
    missing: dict[str, int] = field(default_factory=dict)
    reasons: tuple[str, ...] = ()


def replay_study(name: str, storage: str | None = None, runs: Path = DEFAULT_RUNS) -> StudyReplay:
    """Replay every configuration the study's engine can replay on the study's baseline answers."""
    study = open_study(name, storage, runs)
    space = stored_space(study, None)
    temperature = space.probe.request.temperature
    if temperature > 0:
        raise UserError(
            f"study '{name}' was probed at temperature {temperature:g}: the replay holds for greedy decoding only",
            "replay a study probed at temperature 0 (the default)",
        )
    arms = build_engine(space).replay_arms()
    if not arms:
        raise UserError(
            f"no drafter of the engine study '{name}' ran is replayed yet",
            "see the replay's page in the docs for the drafters that are",
        )
    baseline = next((v for v in trial_views(study) if v.role == BASELINE and v.complete), None)
    if baseline is None or baseline.record is None:
        raise UserError(
            f"study '{name}' has no complete baseline trial", "run the study until its baseline is done"
        )
    facts = baseline.record.facts
    context = facts.n_ctx_slot or facts.usable_context
    if not context:
        raise UserError(
            f"study '{name}''s baseline recorded no context length", "run the study again with this specsweep"
        )
    path = StudyPaths.for_study(name, runs, storage).trial_dir(baseline.number) / "requests.jsonl"
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise UserError(
            f"cannot read {path}: {exc.strerror}", "replay where the study's folder is (--runs)"
        ) from exc
    rows = [RequestMeasurement.from_dict(json.loads(line)) for line in lines if line.strip()]
    answered = [r for r in rows if r.status == "ok"]
    kept = [r for r in answered if r.output_ids and r.prompt_ids]
    missing = Counter(r.workload for r in answered if not (r.output_ids and r.prompt_ids))
    reasons = tuple(sorted({r.ids_missing for r in answered if r.ids_missing}))
    found = [
        _replayed(workload, arm, [r for r in kept if r.workload == workload], context)
        for workload in dict.fromkeys(r.workload for r in kept)
        for arm in arms
    ]
    return StudyReplay(name, baseline.number, tuple(found), dict(missing), reasons)


def _replayed(
    workload: str, arm: ReplayArm, rows: list[RequestMeasurement], context: int
) -> ReplayedWorkload:
    steps = drafted = accepted = 0
    for row in rows:
        replayed = arm.replay(TokenIds(row.prompt_ids, row.output_ids), row.max_tokens, context)
        steps += len(replayed.steps)
        drafted += replayed.drafted
        accepted += replayed.accepted
    return ReplayedWorkload(workload, arm.label, dict(arm.params), len(rows), steps, drafted, accepted)

"""Verdicts from the analysis: confirmation first, the search's number beside it, noise and warnings, outputs."""

from __future__ import annotations

import dataclasses
import math
import random
import sys
from pathlib import Path
from typing import Any

import pytest

from sweep.analysis import (
    Relaunch,
    VetoKind,
    ab_rows,
    confirmation_plan,
    study_verdicts,
    study_warnings,
)
from sweep.answers import fidelity
from sweep.answers.fidelity import TieProbe
from sweep.answers.health import OutputHealth
from sweep.core.stats import Verdict
from sweep.records import (
    HostLoad,
    LaunchFacts,
    SpecShape,
    Spread,
    Stage,
    TrialRecord,
    WorkloadSummary,
)
from sweep.run.confirm import Confirmation, others_to_ask
from sweep.run.preflight import build_engine
from sweep.run.trial import TrialRunner
from sweep.space import parse_space
from sweep.storage import BASELINE, Phase, Study, StudyPaths, TrialView

QUIET = HostLoad(other_cpu=0.01, steal=0.0, loadavg=1.0, cpus=2, seconds=5.0)
BUSY = HostLoad(other_cpu=0.6, steal=0.0, loadavg=3.0, cpus=2, seconds=5.0)


def summary(
    key: str, tps: list[float], outputs: tuple[str, ...] = (), host: HostLoad = QUIET
) -> WorkloadSummary:
    spread = Spread.of(tps)
    return WorkloadSummary(key, "ok", decode_tps=spread, outputs=outputs or ("same",) * len(tps), host=host)


def view(
    number: int,
    params: dict[str, Any],
    speeds: dict[str, float],
    *,
    phase: Phase = Phase.SEARCH,
    label: str = "",
    round_: int = 0,
    role: str = "search",
    rng: random.Random | None = None,
    outputs: tuple[str, ...] = (),
    host: HostLoad = QUIET,
    drift_sd: float = 0.01,
) -> TrialView:
    rng = rng or random.Random(number * 7 + round_)
    spec = params.get("speculative-algorithm") != "none"
    steps = params.get("speculative-num-steps")
    # What the SGLang engine writes for a NEXTN chain (the analysis reads the shape, not parameter names).
    shape = SpecShape("NEXTN", int(steps), 1, int(steps)) if spec and isinstance(steps, int) else None
    record = TrialRecord(number, params, facts=LaunchFacts(speculation_requested=spec), shape=shape)
    drift = math.exp(rng.gauss(0, drift_sd))
    for key, speed in speeds.items():
        tps = [speed * p * drift * math.exp(rng.gauss(0, 0.005)) for p in (1.0, 1.2, 0.9)]
        record.workloads[key] = summary(key, tps, outputs, host)
    label = label or (BASELINE if role == BASELINE else f"trial {number}")
    return TrialView(number, "COMPLETE", role, record, phase, label, round_)


BASE = {"speculative-algorithm": "none"}
DEEP = {"speculative-algorithm": "NEXTN", "speculative-num-steps": 5}
SHALLOW = {"speculative-algorithm": "NEXTN", "speculative-num-steps": 3}
SPEEDS = {"code": 40.0, "prose": 40.0}


def search() -> list[TrialView]:
    return [
        view(0, BASE, SPEEDS, role=BASELINE),
        view(1, DEEP, {"code": 100.0, "prose": 60.0}),
        view(2, SHALLOW, {"code": 98.0, "prose": 70.0}),
        view(
            3, {"speculative-algorithm": "NEXTN", "speculative-num-steps": 1}, {"code": 60.0, "prose": 55.0}
        ),
    ]


def confirm(truth: dict[str, dict[str, float]], rounds: int = 3, **extra: Any) -> list[TrialView]:
    out, number = [], 0
    for r in range(rounds):
        for label, speeds in truth.items():
            params = {BASELINE: BASE, "trial 1": DEEP, "trial 2": SHALLOW}[label]
            out.append(
                view(
                    number,
                    params,
                    speeds,
                    phase=Phase.CONFIRM,
                    label=label,
                    round_=r,
                    rng=random.Random(number + 100 * r),
                    **extra.get(label, {}),
                )
            )
            number += 1
    return out


def test_the_plan_takes_the_top_per_workload_and_the_one_for_all_pick() -> None:
    plan = confirmation_plan(search(), top=1)
    assert [c.label for c in plan] == [BASELINE, "trial 1", "trial 2"]
    assert plan[0].workloads == ("code", "prose")  # the baseline measures every workload a candidate does
    assert plan[1].workloads == ("code",)  # best on code
    assert plan[2].workloads == ("code", "prose")  # best on prose, and the best worst case
    assert confirmation_plan(search(), top=0) == []


def test_the_models_favourite_goes_second_in_place_of_the_runner_up() -> None:
    """Trial 2 measured 2% under trial 1 on code; the surface model rates trial 3 (60 t/s measured, an unlucky
    launch among fast neighbours, say) higher: the plan's code pair is trial 1 and trial 3."""
    plain = confirmation_plan(search(), top=2)
    assert [c.label for c in plain] == [BASELINE, "trial 1", "trial 2"]
    favoured = confirmation_plan(search(), top=2, favoured={"code": 3})
    code = [c.label for c in favoured if "code" in c.workloads and c.label != BASELINE]
    assert "trial 3" in code and "trial 1" in code
    # The favourite already the fastest measured: the runner-up keeps its place.
    assert confirmation_plan(search(), top=2, favoured={"code": 1}) == plain


def test_without_confirmation_verdicts_are_unconfirmed() -> None:
    recs = {r.workload: r for r in study_verdicts(Study(search(), [])).recommendations}
    assert recs["code"].verdict == Verdict.UNCONFIRMED and not recs["code"].confirmed
    assert recs["code"].search_gain is not None and recs["code"].search_gain > 1
    assert "specsweep confirm" in recs["code"].why


def test_an_unconfirmed_search_on_a_busy_host_is_unreliable_and_points_to_the_confirmation() -> None:
    """One launch each, trial 1's on a busy host: nothing remains to leave it out for, so code's verdict is
    unreliable; the way forward is still the confirmation, on a quiet machine."""
    views = search()
    views[1] = view(1, DEEP, {"code": 100.0, "prose": 60.0}, host=BUSY)
    recs = {r.workload: r for r in study_verdicts(Study(views, [])).recommendations}
    assert recs["code"].verdict == Verdict.UNRELIABLE and recs["code"].trial == 1
    assert recs["code"].recommended_trial == 0 and "specsweep confirm" in recs["code"].why
    assert recs["prose"].verdict == Verdict.UNCONFIRMED  # trial 2 leads prose, measured on a quiet host


def test_the_plan_measures_the_nearest_one_for_all_on_every_workload_it_is_launched_for_anyway() -> None:
    """No trial led every workload in the search (trial 2: code +1%, one launch each): the nearest is
    measured on every workload where it is launched again anyway (for prose), with no extra launch, so one
    server is not ruled out by one noisy search launch (the demo's tool: +0% in the search, +45% confirmed)."""
    views = [
        view(0, BASE, SPEEDS, role=BASELINE),
        view(1, DEEP, {"code": 100.0, "prose": 39.0}),
        view(2, SHALLOW, {"code": 40.4, "prose": 70.0}),
    ]
    plan = {c.label: c.workloads for c in confirmation_plan(views, top=1)}
    assert plan == {BASELINE: ("code", "prose"), "trial 1": ("code",), "trial 2": ("code", "prose")}


def test_confirmed_verdicts_come_from_the_confirmation_and_show_the_search_beside_them() -> None:
    # The search's trial 1 read 100 t/s on code; its truth is 90: the winner's curse, corrected.
    truth = {BASELINE: SPEEDS, "trial 1": {"code": 90.0}, "trial 2": {"code": 88.0, "prose": 70.0}}
    recs = {r.workload: r for r in study_verdicts(Study(search(), confirm(truth))).recommendations}
    code = recs["code"]
    assert code.confirmed and code.verdict == Verdict.FASTER and code.comparison is not None
    assert code.comparison.launches == (3, 3)
    assert abs(code.gain - 1.25) < 0.05  # type: ignore[operator]
    assert code.search_gain is not None and code.search_gain > 1.4
    assert code.noise.paired
    # Trial 2 is within noise of trial 1 on code and cheaper (fewer steps): it is what to run.
    assert code.recommended_trial == 2 and "cheaper (draft work" in code.why
    # It says what the cheaper one gives up: trial 1 confirmed +125%, trial 2 +121% (90 and 88 t/s, drawn).
    assert (
        "it gives up 1.8% of trial 1's speed as measured (+121% against +125% over no speculation)"
        in code.why
    )


def test_a_configuration_the_models_doubt_put_in_the_confirmation_says_so_beside_the_verdict() -> None:
    """Trial 2 joined the plan on code because the model could not rank it below trial 1 (`Relaunch.doubts`):
    code's recommendation carries that line (report, JSON); prose, where it was picked for itself, does not."""
    truth = {BASELINE: SPEEDS, "trial 1": {"code": 90.0}, "trial 2": {"code": 88.0, "prose": 70.0}}
    said = "the model could not rank trial 2 below trial 1: a 31% chance it is faster"
    views = [
        dataclasses.replace(v, doubts={"code": said}) if v.label == "trial 2" else v for v in confirm(truth)
    ]
    from sweep.outputs.console import report_text

    study = Study(search(), views)
    recs = {r.workload: r for r in study_verdicts(study).recommendations}
    assert recs["code"].doubt == said and recs["code"].to_dict()["doubt"] == said
    assert recs["prose"].doubt == ""
    text = report_text("s", study, study_verdicts(study))
    assert text.count("the model's doubt: " + said) == 1


def test_the_plan_says_why_the_models_doubt_added_a_configuration() -> None:
    """A doubt adds its configuration to the plan on its workload (or its workload to one already planned) and
    says why there, naming both as the report names them."""
    from sweep.run.confirm import PlanNames, predicted_plan
    from sweep.search import Candidate, Doubt, Picks

    chain4, tree = SpecShape("NEXTN", 4, 1, 4), SpecShape("NEXTN", 4, 2, 7)
    four = Candidate({}, PREDICTED, chain4)
    wide = Candidate({}, {**PREDICTED, "speculative-eagle-topk": 2}, tree)
    picks = Picks({"code": [four], "prose": [wide]}, None, {"code": [Doubt(wide, four, 0.31)]})
    plan = predicted_plan(search(), picks, 0.03)
    assert [(c.label, c.workloads) for c in plan] == [
        (BASELINE, ("code", "prose")),
        ("predicted 1", ("code",)),
        ("predicted 2", ("prose", "code")),
    ]
    (why,) = plan[2].doubts.values()
    assert list(plan[2].doubts) == ["code"] and not plan[1].doubts
    assert why.startswith(
        "the model could not rank predicted 2 (2 wide, depth 4) below predicted 1 (a chain, depth 4): a 31% chance"
    )
    names = PlanNames(search())
    assert names(DEEP) == "trial 1" and names(PREDICTED) == "predicted 1" and names(DEEP) == "trial 1"


def test_a_cheaper_configuration_that_gives_up_more_than_min_gain_is_named_beside_the_best() -> None:
    """Trial 2 (3 steps) truly 7% under trial 1 (5 steps) on code, its launches too noisy to call it slower: it
    does not replace trial 1, it is named beside it with what it gives up (more than the 3% a gain must be worth)."""
    truth = {BASELINE: SPEEDS, "trial 1": {"code": 90.0}, "trial 2": {"code": 84.0, "prose": 70.0}}
    noisy = {"trial 1": {"drift_sd": 0.08}, "trial 2": {"drift_sd": 0.08}}
    views = confirm(truth, rounds=2, **noisy)
    code = {r.workload: r for r in study_verdicts(Study(search(), views)).recommendations}["code"]
    assert code.verdict == Verdict.FASTER and code.trial == 1
    assert code.recommended_trial == 1 and code.why.startswith(
        "the best confirmed; trial 2 is cheaper (draft work"
    )
    gave = float(code.why.split(" gives up ")[1].split("%")[0])
    assert 3 < gave < 15
    assert code.why.endswith("of trial 1's speed as measured, more than the 3% a gain must be worth")


def test_a_candidate_within_noise_of_the_baseline_keeps_speculation_off() -> None:
    truth = {BASELINE: SPEEDS, "trial 1": {"code": 40.4}, "trial 2": {"code": 40.2, "prose": 40.3}}
    recs = {r.workload: r for r in study_verdicts(Study(search(), confirm(truth))).recommendations}
    assert recs["prose"].verdict == Verdict.WITHIN_NOISE
    assert recs["prose"].recommended_trial == 0 and "within noise" in recs["prose"].why
    overall = study_verdicts(Study(search(), confirm(truth))).overall
    assert overall is not None and overall.trial == 0 and overall.confirmed
    # Trial 2 was launched again on both workloads: it is named as the nearest, with what held it back.
    assert "the closest being trial 2 (within noise on prose: +1%)" in overall.why and not overall.gains


def test_one_server_for_all_says_when_no_configuration_was_measured_on_every_workload() -> None:
    """Each candidate confirmed only on the workload it led (trial 1 on code, trial 2 on prose): speculation
    off for one server, saying that none was launched again on every workload, not a list of +0% gains."""
    truth = {BASELINE: SPEEDS, "trial 1": {"code": 90.0}, "trial 2": {"prose": 70.0}}
    overall = study_verdicts(Study(search(), confirm(truth))).overall
    assert overall is not None and overall.trial == 0 and not overall.gains
    assert "none was launched again on every workload" in overall.why


def test_a_busy_host_makes_the_verdicts_it_touched_unreliable() -> None:
    truth = {BASELINE: SPEEDS, "trial 1": {"code": 90.0}, "trial 2": {"code": 88.0, "prose": 70.0}}
    views = confirm(truth, **{"trial 2": {"host": BUSY}})
    study = Study(search(), views)
    warnings = study_warnings(study.search, study.confirm, study.keys)
    assert any("host busy during confirmation launch" in m and "60%" in m for m in warnings.messages)
    recs = {r.workload: r for r in study_verdicts(study).recommendations}
    assert recs["prose"].verdict == Verdict.UNRELIABLE  # only trial 2 was confirmed on prose
    assert recs["prose"].recommended_trial == 0 and "see the warnings" in recs["prose"].why


def test_an_effect_the_noise_dwarfs_says_so_where_no_warning_does() -> None:
    """Quiet launches that differ by 10% round to round, trial 1 ahead by 1%: unreliable for the noise, and the
    recommendation gives that reason rather than pointing at warnings that do not name the workload."""
    views = []
    for r, (base, fast) in enumerate(((40.0, 36.6), (44.0, 47.5), (36.0, 38.0))):
        for number, (label, params, tps) in enumerate(((BASELINE, BASE, base), ("trial 1", DEEP, fast))):
            views.append(
                view(2 * r + number, params, {"code": tps}, phase=Phase.CONFIRM, label=label, round_=r)
            )
    study = Study(search(), views)
    recs = {r.workload: r for r in study_verdicts(study).recommendations}
    assert recs["code"].verdict == Verdict.UNRELIABLE and "dwarfs" in recs["code"].why
    assert "see the warnings" not in recs["code"].why and recs["code"].recommended_trial == 0


def test_a_busy_round_is_left_out_where_enough_quiet_ones_remain() -> None:
    """Four rounds, trial 2's second on a busy host: its verdicts rest on the three quiet rounds and say one
    launch was left out; with only one quiet round left, the verdict is unreliable as before."""
    truth = {BASELINE: SPEEDS, "trial 1": {"code": 90.0}, "trial 2": {"code": 88.0, "prose": 70.0}}
    views = confirm(truth, rounds=4)
    busy = [i for i, v in enumerate(views) if v.label == "trial 2" and v.round == 1]
    for i in busy:
        views[i] = view(
            views[i].number,
            SHALLOW,
            truth["trial 2"],
            phase=Phase.CONFIRM,
            label="trial 2",
            round_=1,
            host=BUSY,
        )
    study = Study(search(), views)
    recs = {r.workload: r for r in study_verdicts(study).recommendations}
    assert recs["prose"].verdict == Verdict.FASTER and recs["prose"].recommended_trial == 2
    assert "1 launch on a busy host left out" in recs["prose"].why_verdict
    for i, v in enumerate(views):
        if v.label == "trial 2" and v.round > 0:
            views[i] = view(
                v.number,
                SHALLOW,
                truth["trial 2"],
                phase=Phase.CONFIRM,
                label="trial 2",
                round_=v.round,
                host=BUSY,
            )
    study = Study(search(), views)
    recs = {r.workload: r for r in study_verdicts(study).recommendations}
    assert recs["prose"].verdict == Verdict.UNRELIABLE


def test_ab_leaves_a_busy_launch_out_of_its_means_and_verdict() -> None:
    """An A/B of four rounds, B's third on a busy host (and measured slow there): B's mean and verdict are
    from its three quiet launches."""
    views = []
    for r in range(4):
        for label, tps in (("A", 40.0), ("B", 60.0)):
            busy = label == "B" and r == 2
            views.append(
                view(
                    len(views),
                    BASE if label == "A" else DEEP,
                    {"code": 30.0 if busy else tps},
                    phase=Phase.CONFIRM,
                    label=label,
                    round_=r,
                    host=BUSY if busy else QUIET,
                )
            )
    warnings = study_warnings([], views, ["code"])
    row = next(r for r in ab_rows(views, ["code"], warnings) if r.metric == "code: decode t/s")
    assert row.b.endswith("x3") and float(row.b.split()[0]) > 55
    assert row.verdict == str(Verdict.FASTER)


def test_a_busy_launch_keeps_the_confirmation_going(tmp_path: Path) -> None:
    """The confirmation asks for another round while a candidate has fewer than two quiet launches per side:
    the busy one is replaced, not counted."""
    the_space = parse_space(
        {
            "engine": "sglang",
            "server": {"launcher": [sys.executable, "-m", "sweep.sim"], "model": "/models/m"},
            "params": {"speculative-num-steps": {"int": [1, 3]}},
            "workloads": [{"class": "code"}],
        },
        tmp_path,
    )
    engine = build_engine(the_space)
    trials = TrialRunner(the_space, engine, StudyPaths.for_study("s", tmp_path / "runs", None))
    candidate = Relaunch("trial 1", DEEP, ("code",))
    truth = {BASELINE: SPEEDS, "trial 1": {"code": 90.0}}
    quiet = confirm(truth, rounds=2)
    assert Confirmation(trials, lambda _m: None)._settled(
        quiet, candidate
    )  # +100% over two quiet rounds: faster, settled
    busy = confirm(truth, rounds=2, **{"trial 1": {"host": BUSY}})
    assert not Confirmation(trials, lambda _m: None)._settled(busy, candidate)


def test_streams_beyond_what_the_server_decoded_at_once_make_the_workload_unreliable() -> None:
    views = search()
    capped = views[1]
    assert capped.record is not None
    capped.record.facts = dataclasses.replace(capped.record.facts, max_running_requests=2)
    capped.record.workloads["code"] = dataclasses.replace(capped.record.workloads["code"], streams=4)
    views[2].record.workloads["prose"] = dataclasses.replace(views[2].record.workloads["prose"], streams=2)  # type: ignore[union-attr]
    warnings = study_warnings(views, [], ["code", "prose"])
    assert warnings.unreliable_workloads == {"code"}  # 2 streams on an uncapped server: fine
    (message,) = [m for m in warnings.messages if "queued" in m]
    assert message.startswith(
        "code: trial 1's server decoded at most 2 requests at once, fewer than the workload's 4"
    )


def test_streams_that_decoded_fewer_at_once_are_named_with_the_batch_they_ran_in() -> None:
    views = search()
    held, full = views[1].record, views[2].record
    assert held is not None and full is not None
    held.workloads["code"] = dataclasses.replace(
        held.workloads["code"], streams=8, batch=Spread.of([4.6, 5.2, 4.9])
    )
    full.workloads["prose"] = dataclasses.replace(
        full.workloads["prose"], streams=8, batch=Spread.of([7.4, 7.7])
    )
    warnings = study_warnings(views, [], ["code", "prose"])
    (message,) = [m for m in warnings.messages if "at once on average" in m]
    assert message.startswith("code: trial 1's 8 streams decoded 4.9 at once on average")


def test_a_baseline_that_moved_during_the_study_is_named() -> None:
    """The machine ran 25% slower in the confirmation than in the search: the move is named; a verdict from
    the confirmation's interleaved rounds stands (both sides of a round moved alike), while one that rests on
    search launches (no candidate was launched again on `tool`) is unreliable."""
    truth = {
        BASELINE: {"code": 30.0, "prose": 30.0, "tool": 30.0},
        "trial 1": {"code": 70.0},
        "trial 2": {"code": 68.0, "prose": 52.0},
    }
    views = search()
    for v, tool in zip(views, (40.0, 80.0, 50.0, 45.0), strict=True):
        assert v.record is not None
        v.record.workloads["tool"] = summary("tool", [tool, 1.2 * tool, 0.9 * tool])
    study = Study(views, confirm(truth))
    warnings = study_warnings(study.search, study.confirm, study.keys)
    assert warnings.drifted == {"code", "prose", "tool"} and not warnings.unreliable_workloads
    assert any("the baseline moved -25%" in m and "quiet machine" in m for m in warnings.messages)
    verdicts = {r.workload: r.verdict for r in study_verdicts(study).recommendations}
    assert verdicts == {"code": Verdict.FASTER, "prose": Verdict.FASTER, "tool": Verdict.UNRELIABLE}


def test_a_baseline_measured_on_a_busy_host_is_no_drift() -> None:
    """The search's baseline ran while other processes took the machine and measured 25% slow: the busy host
    is named, and the quiet confirmation's baselines are not read as the host drifting (the demo's tool verdict
    was lost to it); the same slow baseline on a quiet host is drift."""
    truth = {BASELINE: SPEEDS, "trial 1": {"code": 70.0}, "trial 2": {"code": 68.0, "prose": 52.0}}
    slow = {key: 0.75 * speed for key, speed in SPEEDS.items()}
    for host, drifted in ((BUSY, False), (QUIET, True)):
        views = [view(0, BASE, slow, role=BASELINE, host=host), *search()[1:]]
        warnings = study_warnings(views, confirm(truth), ["code", "prose"])
        assert any("host busy during trial 0" in m for m in warnings.messages) is not drifted
        assert any("the baseline moved +3" in m for m in warnings.messages) is drifted
        assert ("code" in warnings.drifted) is drifted


def test_a_configuration_that_changes_the_output_is_not_recommended() -> None:
    truth = {BASELINE: SPEEDS, "trial 1": {"code": 90.0}, "trial 2": {"code": 70.0, "prose": 70.0}}
    broken = ("wrong", "wrong", "wrong")
    views = [
        v if v.label != "trial 1" else view(1, DEEP, {"code": 100.0, "prose": 60.0}, outputs=broken)
        for v in search()
    ]
    recs = {r.workload: r for r in study_verdicts(Study(views, confirm(truth))).recommendations}
    code = recs["code"]
    assert code.trial == 1 and code.output is not None and code.output.changed
    assert (
        code.recommended_trial == 2
        and "withheld trial 1 (+125%): changes the output: 0/3 identical" in code.why
    )
    assert code.withheld is not None and code.withheld.label == "trial 1"
    assert code.withheld.veto.kind is VetoKind.OUTPUT and "a floor of 3/3" in code.withheld.veto.evidence


def test_a_latency_limit_keeps_a_configuration_out() -> None:
    truth = {BASELINE: SPEEDS, "trial 1": {"code": 90.0}, "trial 2": {"code": 88.0, "prose": 70.0}}
    views = confirm(truth)
    slow_first_token = {"ttft_s": {"p50": 0.5, "p90": 3.0, "p99": 4.0}}
    quick = {"ttft_s": {"p50": 0.2, "p90": 0.4, "p99": 0.5}}
    for v in views:
        assert v.record is not None
        for key, s in v.record.workloads.items():
            v.record.workloads[key] = dataclasses.replace(
                s, latency=slow_first_token if v.label == "trial 2" else quick
            )
    limited = {
        r.workload: r
        for r in study_verdicts(Study(search(), views, latency_limits={"ttft_p90_s": 1.0})).recommendations
    }
    assert limited["code"].recommended_trial == 1  # trial 2 is cheaper but its p90 TTFT is 3 s
    prose = limited["prose"]
    assert prose.recommended_trial == 0
    # One veto, named with its figure; the faster configuration stays in view.
    assert "withheld trial 2 (+75%): breaks a latency limit: ttft p90 3 s over the 1 s limit" in prose.why
    assert prose.withheld is not None and prose.withheld.veto.kind is VetoKind.LATENCY
    free = {r.workload: r for r in study_verdicts(Study(search(), views)).recommendations}
    assert free["code"].recommended_trial == 2


def test_the_report_lists_failed_confirmation_launches_and_the_noise() -> None:
    from sweep.outputs.console import report_text

    truth = {BASELINE: SPEEDS, "trial 1": {"code": 90.0}, "trial 2": {"code": 88.0, "prose": 70.0}}
    views = confirm(truth)
    died = TrialRecord(99, DEEP, failure="server died while probing: CUDA out of memory", stage=Stage.PROBE)
    views.append(TrialView(99, "FAIL", "confirm", died, Phase.CONFIRM, "trial 1", 2))
    study = Study(search(), views)
    text = report_text("s", study, study_verdicts(study))
    assert "confirmation: 9 launches" in text and "search said" in text
    assert "launch 99 (trial 1, round 3): server died while probing: CUDA out of memory" in text
    assert "noise measured in this study: within a round" in text and "per launch" in text


def test_an_unconfirmed_report_says_once_that_the_noise_is_not_measured() -> None:
    from sweep.outputs.console import report_text

    study = Study(search(), [])
    text = report_text("s", study, study_verdicts(study))
    # Every workload's verdict reads alike: said once for all of them, the noise once in it.
    said = [line for line in text.splitlines() if "not measured" in line]
    assert len(said) == 1 and said[0].startswith("every workload: verdict: unconfirmed: ")
    assert said[0].count("not measured") == 1 and "launched twice" in said[0]


def test_a_baseline_that_loops_makes_the_verdict_not_representative() -> None:
    """Acceptance measured on repeating output says nothing about text: where the baseline's answers are
    degenerate, the verdict is marked, speculation stays off for that workload, and the one-for-all pick
    leaves it out and says so."""
    views = search()
    looping = OutputHealth.of([("loop",), ("loop", "template"), ()])
    for v in views:
        assert v.record is not None
        prose = v.record.workloads["prose"]
        v.record.workloads["prose"] = dataclasses.replace(prose, output_health=looping, form="chat")
        code = v.record.workloads["code"]
        v.record.workloads["code"] = dataclasses.replace(code, output_health=OutputHealth.of([(), (), ()]))
    study = Study(views, [])
    warnings = study_warnings(study.search, study.confirm, study.keys)
    assert warnings.not_representative == {"prose"}
    assert any(m.startswith("prose: 2/3 answers degenerate (loop 2: ") for m in warnings.messages)
    recs = {r.workload: r for r in study_verdicts(study).recommendations}
    assert recs["code"].representative and recs["code"].verdict_text == str(recs["code"].verdict)
    prose = recs["prose"]
    assert not prose.representative and prose.verdict_text.endswith(", not representative")
    assert prose.recommended_trial == 0 and prose.why.startswith("not representative")
    overall = study_verdicts(study).overall
    assert overall is not None and "prose left out" in overall.why and "prose" not in overall.gains


def test_an_unconfirmed_best_slower_than_the_baseline_is_not_recommended() -> None:
    views = [view(0, BASE, SPEEDS, role=BASELINE), view(1, DEEP, {"code": 30.0, "prose": 36.0})]
    recs = {r.workload: r for r in study_verdicts(Study(views, [])).recommendations}
    for rec in recs.values():
        assert rec.verdict == Verdict.UNCONFIRMED and rec.gain is not None and rec.gain < 0
        assert rec.recommended_trial == 0 and rec.why.startswith("the best measured was slower")


@pytest.mark.parametrize("faster", ["trial 1", "trial 2"])
def test_of_equal_cost_the_faster_is_run_and_never_called_cheaper(faster: str) -> None:
    """Two configurations with the same draft work within noise of each other (the GPU run's two n-gram sizes:
    956 against 1012 t/s): the faster measured is what to run, as "the best confirmed", whichever came first."""
    twin = {**DEEP, "speculative-eagle-topk": 1}  # another parameter, the same chain: the same cost
    params = {BASELINE: BASE, "trial 1": twin, "trial 2": DEEP}
    speed = {"trial 1": 100.0, "trial 2": 100.0, faster: 100.6}
    truth = {BASELINE: SPEEDS, "trial 1": {"code": speed["trial 1"]}, "trial 2": {"code": speed["trial 2"]}}
    searched = [
        view(0, BASE, SPEEDS, role=BASELINE),
        view(1, twin, {"code": 99.0}),
        view(2, DEEP, {"code": 99.0}),
    ]
    confirmed = [
        view(
            10 * r + i,
            params[label],
            speeds,
            phase=Phase.CONFIRM,
            label=label,
            round_=r,
            rng=random.Random(i + 100 * r),
        )
        for r in range(3)
        for i, (label, speeds) in enumerate(truth.items())
    ]
    code = {r.workload: r for r in study_verdicts(Study(searched, confirmed)).recommendations}["code"]
    assert code.recommended_trial == int(faster.split()[1]), code.why
    assert "cheaper" not in code.why


PREDICTED = {"speculative-algorithm": "NEXTN", "speculative-num-steps": 4}


def test_a_configuration_only_the_confirmation_launched_is_recommended_by_its_label() -> None:
    """With a cost profile the search launches the baseline and the deepest chain, and the confirmation the
    model's picks: the pick it never launched ("predicted 1") confirmed fastest is what to run, named so in the
    report, with nothing "the search said" about it."""
    from sweep.outputs.console import report_text

    searched = [view(0, BASE, {"code": 40.0}, role=BASELINE), view(1, DEEP, {"code": 80.0})]
    truth = {BASELINE: (BASE, 40.0), "trial 1": (DEEP, 80.0), "predicted 1": (PREDICTED, 100.0)}
    confirmed, number = [], 0
    for r in range(3):
        for label, (params, speed) in truth.items():
            confirmed.append(
                view(number, params, {"code": speed}, phase=Phase.CONFIRM, label=label, round_=r)
            )
            number += 1
    study = Study(searched, confirmed)
    (code,) = study_verdicts(study).recommendations
    assert code.confirmed and code.verdict == Verdict.FASTER
    assert code.trial_label == "predicted 1" and code.recommended_label == "predicted 1"
    assert code.recommended_params == PREDICTED and code.trial == 2  # its first confirmation launch
    assert code.search_gain is None  # the search never launched it
    named = study.named("predicted 1")
    assert named is not None and named.phase is Phase.CONFIRM and named.record is not None
    assert named.record.params == PREDICTED
    text = report_text("s", study, study_verdicts(study))
    assert "run for code: predicted 1: speculative-algorithm=NEXTN speculative-num-steps=4" in text
    assert "one server for all workloads: predicted 1:" in text
    assert study_verdicts(study).recommendations[0].to_dict()["recommended_configuration"] == "predicted 1"


def test_the_predicted_plan_keeps_a_launched_configurations_label_and_names_the_rest() -> None:
    from sweep.run.confirm import predicted_plan
    from sweep.search import Candidate, Picks

    searched = search()
    shape = SpecShape("NEXTN", 4, 1, 4)
    deep, four, six = (
        Candidate({}, DEEP, shape),
        Candidate({}, PREDICTED, shape),
        Candidate({}, {**PREDICTED, "speculative-num-steps": 6}, shape),
    )
    plan = predicted_plan(searched, Picks({"code": [four, deep], "prose": [six, four]}, (0.01, six)), 0.03)
    assert [(c.label, c.workloads) for c in plan] == [
        (BASELINE, ("code", "prose")),
        ("predicted 1", ("code", "prose")),
        ("trial 1", ("code",)),
        ("predicted 2", ("prose",)),  # the one-for-all pick predicts +1%, under the 3% worth a configuration
    ]
    assert plan[1].params == PREDICTED
    with_all = predicted_plan(searched, Picks({"code": [four]}, (0.2, six)), 0.03)
    assert [(c.label, c.workloads) for c in with_all][1:] == [
        ("predicted 1", ("code",)),
        ("predicted 2", ("code",)),
    ]


def test_a_baseline_launch_asks_about_each_difference_once() -> None:
    """The confirmation hands a baseline launch the other configurations' answers that part from its own and
    that no earlier baseline launch asked about: each difference is probed once, however many rounds follow."""
    said, other = "The river runs past the mill.", "The river runs under the bridge."

    def answered(number: int, label: str, text: str, ties: tuple[TieProbe, ...] = ()) -> TrialView:
        found = view(
            number, BASE if label == BASELINE else DEEP, {"code": 50.0}, phase=Phase.CONFIRM, label=label
        )
        assert found.record is not None
        summary = found.record.workloads["code"]
        found.record.workloads["code"] = dataclasses.replace(
            summary, outputs=(text,), output_prompts=("p1",), ties=ties
        )
        return found

    first = [answered(0, BASELINE, said), answered(1, "trial 1", other)]
    assert others_to_ask(first, BASELINE) == {"code": {"p1": (other,)}}
    at = fidelity.part_at(said, other)
    assert at == len("The river runs")
    probed = TieProbe("p1", at, "", said[at:], other[at:], ((" past", -0.2), (" under", -0.3)))
    later = [
        answered(0, BASELINE, said, (probed,)),
        answered(1, "trial 1", other),
        answered(2, "trial 1", said),
    ]
    assert others_to_ask(later, BASELINE) == {"code": {}}  # asked already; the same text is no difference


def with_answers(views: list[TrialView], answers: dict[str, tuple[str, str]]) -> list[TrialView]:
    """Each launch's code answers to prompts p1 and p2, by its configuration's label."""
    for found in views:
        if found.record is not None and "code" in found.record.workloads and found.label in answers:
            summary = found.record.workloads["code"]
            found.record.workloads["code"] = dataclasses.replace(
                summary, outputs=answers[found.label], output_prompts=("p1", "p2")
            )
    return views


SAID = ("def add(a, b):\n    return a + b\n", "The mill stands by the river, and its wheel turns all day.")
MOVED = "The mill stands by the river, and its wheel stops at night."


@pytest.mark.parametrize(("moved", "vetoed"), [(1, False), (2, True)])
def test_an_answer_speculation_moved_with_nothing_to_explain_it_is_said_in_its_own_line(
    moved: int, vetoed: bool
) -> None:
    """The baseline reproduced both answers in every launch; trial 1 (faster on code) parts from one of them with
    no probe to explain it: not vetoed, and its own line says what moved and why one of two is too thin (a
    configuration parting on half the prompts would do as much 75% of the time); both parted: vetoed, withheld."""
    truth = {BASELINE: SPEEDS, "trial 1": {"code": 90.0}, "trial 2": {"code": 60.0, "prose": 70.0}}
    from sweep.outputs.console import report_text

    mine = (SAID[0], MOVED) if moved == 1 else ("def add(x, y):\n    return x + y\n", MOVED)
    answers = {BASELINE: SAID, "trial 1": mine, "trial 2": SAID}
    study = Study(with_answers(search(), answers), with_answers(confirm(truth), answers))
    verdicts = study_verdicts(study)
    code = {r.workload: r for r in verdicts.recommendations}["code"]
    assert code.output is not None and code.output.changed is vetoed
    text = report_text("s", study, verdicts)
    if vetoed:
        assert code.withheld is not None and code.recommended_trial != 1 and not code.output_note
        assert "its answers:" not in text
        return
    assert code.recommended_trial == 1 and code.output_note.startswith(
        "speculation moved 1 of 2 answers that the baseline reproduced every time, and no probe asked its server"
        " where they part; prompt 2 parts at character 44: after 'mill stands by the river, and its wheel ' the"
        " baseline says 'turns', this configuration 'stops'; not vetoed"
    )
    assert code.output_note.endswith(
        "not vetoed, the evidence is too thin: a configuration whose answers part on 50% of the prompts (batched"
        " verification alone was seen to part on one in three) would part on 1 or more of 2 75% of the time;"
        " a veto needs 2 of 2"
    )
    assert (
        f"run for code: trial 1: speculative-algorithm=NEXTN speculative-num-steps=5  (the best confirmed)\n  its answers: {code.output_note}"
        in text
    )
    as_json = code.to_dict()
    assert as_json["output_note"] == code.output_note and as_json["output"]["changed"] is False
    assert as_json["output"]["unexplained"] == 1


def test_a_workloads_busy_launches_are_said_once_with_the_loads_range() -> None:
    from sweep.analysis.study_warnings import busy_message
    from sweep.records import HostLoad
    from sweep.storage import Phase

    def load(cpu: float) -> HostLoad:
        return HostLoad(other_cpu=cpu, steal=0.0, loadavg=1.5 + cpu, cpus=2, seconds=5.0)

    one = busy_message("code", [(Phase.SEARCH, 3, load(0.4))])
    assert (
        one
        == "host busy during trial 3, code: other processes used 40% of 2 CPUs, steal 0%, load average 1.9"
    )
    found = [(Phase.SEARCH, n, load(0.3)) for n in (0, 1, 2)] + [
        (Phase.CONFIRM, n, load(cpu)) for n, cpu in ((0, 0.5), (2, 0.8), (3, 0.2))
    ]
    assert busy_message("code", found) == (
        "host busy during trials 0-2 and confirmation launches 0, 2-3, code: other processes used 20%-80% of "
        "2 CPUs, steal 0%, load average 1.7-2.3"
    )

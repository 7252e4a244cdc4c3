"""A gain the study confirmed is withheld only by a veto that holds, named with its evidence: structured answers
are text, capacity runs compare answers to the same prompts only, and the vetoes still fire where they should
(a looping baseline, answers changed beyond the floor, a latency limit broken)."""

from __future__ import annotations

import dataclasses
import json

from sweep.analysis import VetoKind, study_verdicts
from sweep.answers.health import OutputHealth, distinct_share, judge, pieces
from sweep.core.stats import Verdict
from sweep.outputs.export import Export, WithheldRun, render
from sweep.records import Spread
from sweep.sim.text import GreedyText
from sweep.storage import BASELINE, Study, TrialView
from tests.test_analysis import BASE, DEEP, SPEEDS, confirm, search

LOOP = "The next day, she went to the sea to see if the water was still there. " * 4


def answered(views: list[TrialView], texts: dict[str, list[str]], prompts: list[str] | None = None) -> None:
    """Every launch's answers (by label), keyed by the prompts they answered, with their health judged."""
    for v in views:
        assert v.record is not None
        said = texts.get(v.label, texts[BASELINE])
        for key, s in v.record.workloads.items():
            health = OutputHealth.of(judge(t).symptoms for t in said)
            v.record.workloads[key] = dataclasses.replace(
                s, outputs=tuple(said), output_prompts=tuple(prompts or ()), output_health=health
            )


def recommendations(views: list[TrialView], confirmation: list[TrialView]) -> dict[str, object]:
    return {r.workload: r for r in study_verdicts(Study(views, confirmation)).recommendations}


USERS = ("lina.park", "tomas.novak", "amara.obi", "kenji.sato", "olga.berg", "mei.lin")


def flags(shift: int) -> str:
    """A JSON list of records a person would call structured output: keys repeated, few values to each."""
    rows = [
        {"user": u, "beta": (i + shift) % 2 == 0, "admin": False, "verified": True, "region": "eu"}
        for i, u in enumerate(USERS)
    ]
    return json.dumps(rows, indent=2)


def test_a_structured_tool_workload_keeps_its_confirmed_gain() -> None:
    """Structured answers repeat their keys: the old rule (distinct 4-grams of every piece under 0.4) read them
    as degenerate and withheld the gain; judged by their values they are text, and the gain is what to run."""
    records = [flags(i) for i in range(3)]
    assert all(share is not None and share < 0.4 for share in (distinct_share(pieces(r)) for r in records))
    assert all(judge(r).symptoms == () for r in records)
    truth = {BASELINE: SPEEDS, "trial 1": {"code": 90.0}, "trial 2": {"code": 70.0, "prose": 70.0}}
    views, confirmation = search(), confirm(truth)
    answered(views + confirmation, {BASELINE: records}, ["p1", "p2", "p3"])
    code = recommendations(views, confirmation)["code"]
    assert code.representative and code.verdict is Verdict.FASTER  # type: ignore[attr-defined]
    assert code.recommended_trial == 1 and code.withheld is None  # type: ignore[attr-defined]


def test_the_simulators_tool_answers_are_records_that_read_as_text() -> None:
    for i in range(5):
        text = GreedyText(f"Copy this JSON exactly, order {i}", "tool", None).take(80)
        assert text.startswith('[{"id": "B-') and '"customer": ' in text and '"total": ' in text
        assert judge(text).symptoms == (), text[:120]
    whole = GreedyText("Copy this JSON exactly", "tool", None).take(10)  # one record: it parses
    assert json.loads(whole + "]")[0].keys() == {"id", "customer", "city", "items", "total"}


def test_a_looping_baseline_withholds_the_gain_and_names_the_loop() -> None:
    truth = {BASELINE: SPEEDS, "trial 1": {"code": 90.0}, "trial 2": {"code": 70.0, "prose": 70.0}}
    views, confirmation = search(), confirm(truth)
    answered(views + confirmation, {BASELINE: [LOOP, LOOP, LOOP]})
    code = recommendations(views, confirmation)["code"]
    assert code.recommended_trial == 0  # type: ignore[attr-defined]
    withheld = code.withheld  # type: ignore[attr-defined]
    assert withheld is not None and withheld.label == "trial 1"
    assert withheld.veto.kind is VetoKind.NOT_REPRESENTATIVE
    assert (
        "answers degenerate (loop" in withheld.veto.evidence
        and "withheld trial 1 (+" in code.why
        and "the baseline's answers are not text" in code.why
    )  # type: ignore[attr-defined]


def capacity(views: list[TrialView], rps: dict[str, float]) -> None:
    for v in views:
        assert v.record is not None
        for key, s in v.record.workloads.items():
            value = rps.get(v.label, rps[BASELINE]) * (s.decode_tps.median if s.decode_tps else 1.0) / 40.0
            v.record.workloads[key] = dataclasses.replace(s, capacity_rps=Spread.of([value]))


def test_a_capacity_gain_is_recommended_where_its_runs_visited_other_rates() -> None:
    """A capacity search's bisection visits other rates on other launches: their answers are to other prompts
    (each rate its own nonces). Compared by position they differ; compared where the same prompt was sent
    (both ends of the range) they are identical, and the confirmed faster configuration is what to run."""
    truth = {BASELINE: SPEEDS, "trial 1": {"code": 90.0}, "trial 2": {"code": 70.0, "prose": 70.0}}
    base_texts = ["low rate answer", "high rate answer", "at 20 rps", "at 6.3 rps", "at 11 rps"]
    mine = ["low rate answer", "high rate answer", "at 63 rps", "at 112 rps", "at 84 rps"]
    for keyed, vetoed in ((True, False), (False, True)):
        views, confirmation = search(), confirm(truth)
        capacity(views + confirmation, {BASELINE: 20.0})
        prompts = {
            BASELINE: ["2rps/0", "200rps/0", "20rps/0", "6.3rps/0", "11rps/0"],
            "mine": ["2rps/0", "200rps/0", "63rps/0", "112rps/0", "84rps/0"],
        }
        for v in views + confirmation:
            assert v.record is not None
            spec = v.label != BASELINE
            for key, s in v.record.workloads.items():
                v.record.workloads[key] = dataclasses.replace(
                    s,
                    outputs=tuple(mine if spec else base_texts),
                    output_prompts=tuple(prompts["mine" if spec else BASELINE]) if keyed else (),
                )
        code = recommendations(views, confirmation)["code"]
        assert code.verdict is Verdict.FASTER and code.summary.unit == "req/s"  # type: ignore[attr-defined]
        assert (code.recommended_trial == 0) is vetoed, code.why  # type: ignore[attr-defined]
        if keyed:
            assert code.output.prompts == 2 and code.output.identical == 2  # type: ignore[attr-defined]
        else:  # what happened before: a veto from answers to prompts that were never the same
            assert code.withheld.veto.kind is VetoKind.OUTPUT  # type: ignore[attr-defined]


def test_answers_changed_beyond_the_floor_are_vetoed_and_say_the_engine_moved() -> None:
    truth = {BASELINE: SPEEDS, "trial 1": {"code": 90.0}, "trial 2": {"code": 70.0, "prose": 70.0}}
    same = ["a quote of the first paragraph, word for word", "the second answer", "the third answer"]
    changed = ["a quote of the first paragraph, word by word", "the second reply", "the third reply"]
    views, confirmation = search(), confirm(truth)
    answered(
        views + confirmation, {BASELINE: same, "trial 1": changed, "trial 2": changed}, ["p1", "p2", "p3"]
    )
    code = recommendations(views, confirmation)["code"]
    assert code.recommended_trial == 0  # type: ignore[attr-defined]
    output = code.output  # type: ignore[attr-defined]
    assert output.changed and output.moved == "engine" and output.example.prompt == 1
    assert (output.example.baseline, output.example.candidate) == ("for", "by")
    assert code.withheld.veto.kind is VetoKind.OUTPUT  # type: ignore[attr-defined]
    assert code.withheld.veto.evidence.startswith("0/3 identical against a floor of 3/3")  # type: ignore[attr-defined]
    assert "speculation moved these answers" in output.describe()
    # The same answers where the baseline itself moves launch to launch: within the floor, not a veto.
    views, confirmation = search(), confirm(truth)
    answered(
        views + confirmation, {BASELINE: same, "trial 1": changed, "trial 2": changed}, ["p1", "p2", "p3"]
    )
    for v in confirmation[::3]:  # one baseline launch in each round answers as the candidates do
        assert v.record is not None and v.label == BASELINE
        for key, s in v.record.workloads.items():
            v.record.workloads[key] = dataclasses.replace(s, outputs=tuple(changed))
    code = recommendations(views, confirmation)["code"]
    assert (code.output.floor.prompts, code.output.floor.share) == (3, 0.0)  # type: ignore[attr-defined]
    assert not code.output.changed  # type: ignore[attr-defined]
    assert code.recommended_trial == 1 and code.withheld is None  # type: ignore[attr-defined]


def test_the_export_keeps_the_withheld_configuration_commented_out() -> None:
    shelved = WithheldRun("trial 5", "trial 5 (+94%): changes the output: 1/3 identical", ["srv", "--x"])
    export = Export("sglang", "s", 0, "code", BASE, ["srv"], ("run without",), "baseline", shelved)
    compose = render(export, "compose")
    assert "# withheld: trial 5 (+94%): changes the output: 1/3 identical\n# srv --x" in compose
    assert json.loads(render(export, "json"))["withheld"]["argv"] == ["srv", "--x"]
    assert DEEP != BASE  # the two parameter sets the tests above compare


def test_one_server_for_all_names_the_configuration_a_veto_holds_back() -> None:
    """Trial 1 is the fastest on every workload and changes the code answers: the one server for all runs
    trial 2, and names trial 1 withheld with the workload its veto holds on."""
    truth = {
        BASELINE: SPEEDS,
        "trial 1": {"code": 90.0, "prose": 80.0},
        "trial 2": {"code": 60.0, "prose": 60.0},
    }
    answers = ["The mill stood by the river.", "Rain came in June.", "She wrote twice a week."]
    views, confirmation = search(), confirm(truth)
    answered(views + confirmation, {BASELINE: answers, "trial 1": ["wrong"] * 3}, ["p1", "p2", "p3"])
    overall = study_verdicts(Study(views, confirmation)).overall
    assert overall is not None and overall.trial_label == "trial 2" and overall.worst_gain > 0.3
    withheld = overall.withheld
    assert withheld is not None and withheld.label == "trial 1" and withheld.veto.kind is VetoKind.OUTPUT
    assert withheld.gain > overall.worst_gain and withheld.veto.evidence.startswith("on code, 0/3 identical")
    assert (
        "withheld trial 1 (+" in overall.why and overall.to_dict()["withheld"]["veto"] == "changes the output"
    )
    # Without a faster configuration left, speculation is off and the withheld one still named.
    slower = {**truth, "trial 2": {"code": 40.0, "prose": 40.0}}
    views, confirmation = search(), confirm(slower)
    answered(views + confirmation, {BASELINE: answers, "trial 1": ["wrong"] * 3}, ["p1", "p2", "p3"])
    off = study_verdicts(Study(views, confirmation)).overall
    assert off is not None and off.trial == 0 and off.withheld is not None
    assert off.why.startswith("withheld trial 1 (+") and "run without speculation" in off.why

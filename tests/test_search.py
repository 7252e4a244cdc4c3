"""Model-guided search over the engine-derived grid, and the sweep's stop rules (confidence, time budget), run
end to end against the simulator."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
import yaml

from sweep.analysis import Relaunch
from sweep.engines import ServerSetup, SGLangEngine
from sweep.records import SpecShape, Spread, TrialRecord, WorkloadSummary
from sweep.run.confirm import Confirmation
from sweep.run.driver import Sweep
from sweep.run.preflight import build_engine
from sweep.search import ModelSearch, axes, candidates, launch_key
from sweep.sim.profile import PROFILES
from sweep.space import SearchKind, Space, parse_space
from sweep.storage import BASELINE, StudyPaths, launched, make_storage
from tests.conftest import specsweep_argv

SIM = [sys.executable, "-m", "sweep.sim"]
SPACE = """
engine: sglang
server: {launcher: ["{python}", -m, sweep.sim, --sim-time-scale, "0.005"], model: /models/q}
fixed: {kv-cache-dtype: fp8_e4m3}
params:
  speculative-algorithm: {choices: [NEXTN]}
  speculative-num-steps: {int: [1, 4]}
  speculative-eagle-topk: {choices: [1, 2]}
  speculative-num-draft-tokens: {int: [2, 8]}
workloads: [{class: code}, {class: prose}]
probe: {repeats: 2, max_tokens: 32}
confirm: {launches: 0}
trials: 30
"""


@pytest.fixture(scope="module")
def engine() -> SGLangEngine:
    engine = SGLangEngine(ServerSetup(SIM, "/models/q"))
    engine.prepare()
    return engine


def space(text: str = SPACE) -> Space:
    return parse_space(yaml.safe_load(text.replace("{python}", sys.executable)), Path("."))


@pytest.mark.server
def test_candidates_are_the_grid_after_the_engines_rules(engine: SGLangEngine) -> None:
    pool = candidates(space(), engine)
    assert pool.grid == 4 * 2 * 7
    # topk 1 forces draft tokens to steps + 1: seven draft-token values collapse into one launch per depth.
    assert pool.duplicates == 4 * 6
    # topk 2: the tree holds 2 + (steps - 1) * 4 candidates, so 1 step takes at most 3 draft tokens (4-8 are
    # out) and 2 steps at most 7 (8 is out).
    assert pool.infeasible == 5 + 1
    assert len(pool.items) == 4 + (4 * 7 - 6)
    assert len({launch_key(c.params) for c in pool.items}) == len(pool.items)
    assert all(c.shape is not None and c.shape.method == "NEXTN" for c in pool.items)


def record(
    number: int, params: dict[str, object], shape: SpecShape | None, tps: float, length: float | None
) -> TrialRecord:
    summary = WorkloadSummary(
        "code",
        "ok",
        decode_tps=Spread(tps, tps, tps, 2, (tps, tps)),
        acceptance_length=Spread(length, length, length, 1, (length,)) if length else None,
    )
    out = TrialRecord(number, dict(params), shape=shape)
    out.workloads = {"code": summary, "prose": summary}
    return out


@pytest.mark.server
def test_workloads_at_several_contexts_share_one_model_read_at_each_context(engine: SGLangEngine) -> None:
    the_space = space(
        SPACE.replace("[{class: code}, {class: prose}]", "[{class: code, context: [null, 16384]}]")
    )
    short, long = the_space.workload_keys
    tokens = {short: 300.0, long: 16000.0}

    def measured(number: int, steps: int | None, tps: dict[str, float], length: float | None) -> TrialRecord:
        params = {"speculative-algorithm": "none"} if steps is None else {"speculative-num-steps": steps}
        shape = None if steps is None else SpecShape("NEXTN", steps, 1, steps)
        out = TrialRecord(number, {**params, "context": number}, shape=shape)
        out.workloads = {
            key: WorkloadSummary(
                key,
                "ok",
                decode_tps=Spread(t, t, t, 2, (t, t)),
                acceptance_length=Spread(length, length, length, 1, (length,)) if length else None,
                prompt_tokens=Spread(tokens[key], tokens[key], tokens[key], 2, (tokens[key], tokens[key])),
            )
            for key, t in tps.items()
        }
        return out

    records = [
        measured(0, None, {short: 40.0, long: 30.0}, None),
        measured(1, 2, {short: 60.0, long: 40.0}, 2.6),
        measured(2, 4, {short: 70.0, long: 38.0}, 3.8),
    ]
    search = ModelSearch(the_space, candidates(the_space, engine))
    surfaces = search.surfaces(records, the_space.workload_keys)
    assert search.surfaces(records, the_space.workload_keys) is surfaces  # the same records: fitted once
    assert surfaces[short].surface is surfaces[long].surface and surfaces[short].surface.contexts.modelled
    assert (surfaces[short].best, surfaces[long].best) == (70.0, 40.0)  # each context's own best
    assert surfaces[long].context == 16000.0
    drawn = ModelSearch.of(the_space, engine).predicted(records)
    assert {c.shape.method for c in drawn.curves} == {"NEXTN"}
    (curve,) = drawn.curves
    assert curve.contexts[0] == pytest.approx(300) and curve.contexts[-1] == pytest.approx(16000)
    assert curve.tps[0] > curve.tps[-1]  # slower with the longer context, as measured

    # Without the prompt sizes the contexts cannot be placed: each workload gets its own model.
    for r in records:
        r.workloads = {k: dataclasses.replace(w, prompt_tokens=None) for k, w in r.workloads.items()}
    apart = search.surfaces(records, the_space.workload_keys)
    assert (
        apart[short].surface is not apart[long].surface
        and not ModelSearch.of(the_space, engine).predicted(records).curves
    )


@pytest.mark.server
def test_the_model_never_proposes_a_launched_configuration_and_runs_out(engine: SGLangEngine) -> None:
    the_space = space()
    pool = candidates(the_space, engine)
    search = ModelSearch(the_space, pool)
    records = [record(0, {"speculative-algorithm": "none"}, None, 40.0, None)]
    seen = set()
    for number in range(1, len(pool.items) + 1):
        proposal = search.propose(records)
        assert proposal is not None
        key = launch_key(proposal.candidate.params)
        assert key not in seen
        seen.add(key)
        shape = proposal.candidate.shape
        assert shape is not None
        length = 1 + sum(0.8**i for i in range(1, shape.depth + 1))
        records.append(
            record(number, proposal.candidate.params, shape, 40.0 * length / (1 + 0.2 * shape.depth), length)
        )
    assert search.propose(records) is None
    assert search.unconfident(records) == []  # nothing untried: nothing left to be unsure about


@pytest.mark.server
def test_the_models_favourite_is_a_launched_configuration_it_rates_fastest(engine: SGLangEngine) -> None:
    """Chains at depths 1-4 whose fourth position costs more than it accepts: the model's favourite per workload
    is the trial at depth 3 (the baseline and untried configurations are never favourites)."""
    the_space = space()
    chains = {c.shape.depth: c for c in candidates(the_space, engine).items if c.shape and c.shape.width == 1}
    records = [record(0, {"speculative-algorithm": "none"}, None, 40.0, None)]
    for depth, chain in sorted(chains.items()):
        length = 1 + sum(0.8**i for i in range(1, depth + 1))
        records.append(record(depth, chain.params, chain.shape, 40.0 * length / (1 + 0.25 * depth), length))
    model = ModelSearch.of(the_space, engine)
    assert model.favourites(records) == {"code": 3, "prose": 3}
    # The confirmation's favourites and the page's surface read the same records: one fit serves both.
    fitted = model.surfaces(records)
    assert model.predicted(records).points and model.surfaces(records) is fitted
    assert ModelSearch.of(the_space, engine).favourites(records[:1]) == {}


@pytest.mark.server
def test_a_width_the_search_did_not_measure_joins_the_confirmation_where_the_model_cannot_rank_it(
    engine: SGLangEngine,
) -> None:
    """Only chains launched: the model's guess at a 2-wide tree rests on no tree's launch, so the confirmation
    launches the best tree beside the chain it picked, with the chance the model gives it; once trees were
    launched and measured far slower, nothing is in doubt."""
    the_space = space()
    pool = candidates(the_space, engine)
    chains = {c.shape.depth: c for c in pool.items if c.shape and c.shape.width == 1}

    def launch(number: int, params: dict[str, object], shape: SpecShape, slower: float = 1.0) -> TrialRecord:
        length = 1 + sum(0.8**i for i in range(1, shape.depth + 1))
        return record(number, params, shape, slower * 40.0 * length / (1 + 0.25 * shape.depth), length)

    records = [record(0, {"speculative-algorithm": "none"}, None, 40.0, None)]
    records += [launch(d, c.params, c.shape) for d, c in sorted(chains.items()) if c.shape]
    picked = {"code": [chains[3].params]}
    (doubt,) = ModelSearch.of(the_space, engine).doubts(records, picked)["code"]
    assert doubt.candidate.shape is not None and doubt.candidate.shape.width == 2
    assert doubt.rival.params == chains[3].params and 0.25 <= doubt.chance <= 1.0
    trees = [c for c in pool.items if c.shape and c.shape.width == 2]
    records += [launch(10 + i, c.params, c.shape, slower=0.6) for i, c in enumerate(trees) if c.shape]
    assert ModelSearch.of(the_space, engine).doubts(records, picked) == {}


def run(tmp_path: Path, text: str, *extra: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "space.yaml").write_text(text)
    argv = specsweep_argv(
        "run",
        "--space",
        str(tmp_path / "space.yaml"),
        "--study",
        "s",
        "--runs",
        str(tmp_path / "runs"),
        *extra,
    )
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)


def trials(tmp_path: Path) -> list[optuna.trial.FrozenTrial]:
    url = f"sqlite:///{tmp_path / 'runs' / 's' / 'study.db'}"
    return optuna.load_study(study_name="s", storage=make_storage(url)).trials


SMALL = SPACE.replace(
    "  speculative-eagle-topk: {choices: [1, 2]}\n  speculative-num-draft-tokens: {int: [2, 8]}\n", ""
)


@pytest.mark.server
def test_until_confident_stops_before_the_target_and_launches_nothing_twice(tmp_path: Path) -> None:
    done = run(tmp_path, SMALL, "--until-confident", "--no-confirm")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "the search stops here:" in done.stderr
    ran = [t for t in trials(tmp_path) if launched(t)]
    # Four depths and the baseline: the target of 30 was never needed.
    assert len(ran) <= 5
    params = [launch_key(t.user_attrs["record"]["params"]) for t in ran]
    assert len(params) == len(set(params))
    roles = {t.user_attrs.get("role") for t in ran}
    assert "baseline" in roles and roles <= {"baseline", "cover", "model"}


@pytest.mark.server
def test_the_model_search_records_its_predictions(tmp_path: Path) -> None:
    done = run(tmp_path, SPACE.replace("trials: 30", "trials: 8"), "--no-confirm")
    assert done.returncode == 0, done.stderr[-2000:]
    picked = [t for t in trials(tmp_path) if t.user_attrs.get("role") == "model"]
    assert picked, done.stderr[-2000:]
    for trial in picked:
        predicted = trial.user_attrs["predicted"]
        assert set(predicted) == {"code", "prose"} and all(
            p["tps"] > 0 and p["sd"] > 0 for p in predicted.values()
        )
        assert trial.user_attrs["record"]["shape"]["method"] == "NEXTN"


@pytest.mark.server
def test_tpe_is_still_there(tmp_path: Path) -> None:
    done = run(tmp_path, SPACE.replace("trials: 30", "trials: 5\nsearch: tpe"), "--no-confirm")
    assert done.returncode == 0, done.stderr[-2000:]
    roles = [t.user_attrs.get("role", "search") for t in trials(tmp_path) if launched(t)]
    assert "model" not in roles and len(roles) == 5
    assert "search: model" not in done.stderr


@pytest.mark.server
def test_a_time_budget_ends_the_search(tmp_path: Path) -> None:
    done = run(
        tmp_path, SPACE.replace('time-scale, "0.005"', 'time-scale, "0.05"'), "--budget", "6s", "--no-confirm"
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "of the budget left]" in done.stderr
    assert "of the budget left, less than one more trial" in done.stderr
    assert 2 <= len([t for t in trials(tmp_path) if launched(t)]) < 30
    # The plan after the first launch speaks of the budget (no trial count bounds the search): the launches the
    # time left holds, their time within it, and no room for one more (was "99999 more search launches").
    plan = re.search(
        r"plan, measured on this launch \((\d+) s: [^)]*\): (\d+)m(\d+)s of the budget left: "
        r"(?:(\d+) more search launch(?:es)?, about (\d+)m(\d+)s|no more search launch)",
        done.stderr,
    )
    assert plan is not None, done.stderr[-2000:]
    took, left = int(plan[1]), 60 * int(plan[2]) + int(plan[3])
    count, held = int(plan[4] or 0), 60 * int(plan[5] or 0) + int(plan[6] or 0)
    assert count < 100 and held <= left + 1 and left - held <= took + 1.5


@pytest.mark.server
def test_a_spent_budget_adds_no_confirmation_round(tmp_path: Path) -> None:
    """Two launches of one configuration under two names: after the first two rounds their verdict is open (two
    launches each cannot say within 3%), which would launch round after round up to `max_launches`; with the
    budget spent, the confirmation stops after the rounds the search reserved time for, and says so."""
    text = SPACE.replace("workloads: [{class: code}, {class: prose}]", "workloads: [{class: prose}]")
    # The space's launcher (time scale, a profile that starts in a fraction of a second), not the fixture's. Each
    # launch draws the next seed from a file: the same launches every time (with seeds drawn at random, two
    # launches each now and then settle an A/A within 3%, and there is no round to refuse).
    seeds = tmp_path / "seeds"
    seeds.write_text("1000")
    profile = PROFILES / "small-draft-24gb.yaml"
    quick = f'"0.005", --sim-profile, "{profile}", --sim-seed-file, "{seeds}"'
    the_space = space(text.replace('"0.005"', quick))
    engine = build_engine(the_space)
    engine.prepare()
    said: list[str] = []
    paths = StudyPaths.for_study("budget", tmp_path / "runs", None)
    sweep = Sweep(the_space, engine, paths, said.append, budget_s=0.001)
    baseline = engine.derive(the_space.launch_params(engine.baseline_params()))
    plan = [Relaunch(BASELINE, baseline, ("prose",)), Relaunch("trial 1", dict(baseline), ("prose",))]
    confirmation = Confirmation(sweep.trials, said.append, time_left=sweep.time_left)
    study = confirmation.run(plan, rounds=2, max_rounds=10)
    assert len([t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]) == 4
    assert any("no round 3: the budget's time left is less than its 2 launches take" in m for m in said)


@pytest.mark.parametrize(
    ("value", "problem"), [("abc", "is not a duration"), ("0h", "is not a positive duration")]
)
@pytest.mark.server
def test_a_bad_budget_is_one_line(tmp_path: Path, value: str, problem: str) -> None:
    done = run(tmp_path, SPACE, "--budget", value)
    assert done.returncode == 2 and problem in done.stderr and len(done.stderr.strip().splitlines()) == 1


@pytest.mark.server
def test_an_unknown_search_is_refused(tmp_path: Path) -> None:
    done = run(tmp_path, SPACE + "search: bayes\n")
    assert done.returncode == 2 and "search: cannot be 'bayes'" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert SearchKind("model") is SearchKind.MODEL


@pytest.mark.server
def test_plan_counts_the_space_after_the_engines_rules_and_prices_the_night(tmp_path: Path) -> None:
    (tmp_path / "space.yaml").write_text(SPACE.replace("trials: 30", "trials: 10"))
    argv = specsweep_argv(
        "plan", "--space", str(tmp_path / "space.yaml"), "--study", "s", "--runs", str(tmp_path / "runs")
    )
    before = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True).stdout
    assert (
        "56 grid points; 26 launchable after the engine's rules (6 infeasible, 0 invalid, 24 the same"
        in before
    )
    assert "search (model): 10 launches" in before
    assert "sglang starts in ~60 s; assumed: decodes 30 t/s and prefills 1000 t/s" in before
    assert not (tmp_path / "runs" / "s").exists()  # a dry run launches and writes nothing
    budget = subprocess.run(
        [*argv, "--budget", "1h"], capture_output=True, text=True, timeout=120, check=True
    )
    # One launch is assumed at 60 s + 2 workloads x (2 repeats + warm-up) x (0.3 s + 32 / 30 s) = 68.2 s:
    # 1 h holds 52 of them (no confirmation in this space).
    assert "budget: 1h00m holds 52 search launches" in budget.stdout
    done = run(tmp_path, SPACE.replace("trials: 30", "trials: 3"), "--no-confirm")
    assert done.returncode == 0, done.stderr[-2000:]
    after = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True).stdout
    assert "measured: median of 3 launches in study 's'" in after


def test_plan_prices_a_launch_from_the_gpu_and_the_weights_where_nothing_was_measured() -> None:
    """The real SGLang 0.5.17 run on the H200 (a 4-layer model, 0.13 GB): 3 trials and 2 confirmation launches
    took about 5 minutes, launches 46-106 s and 450-2150 t/s; the plan once said 25 minutes (120 s a start-up
    and 30 t/s: 135 s a launch). From the GPU's datasheet and the weights it now prices a launch within that."""
    from sweep.run.plan import Hardware, estimated_speeds, plan_study

    recorded = Path(__file__).parent / "recordings" / "sglang-0.5.17-h200" / "space-ngram.yaml"
    data = yaml.safe_load(recorded.read_text().replace("MODEL_DIR", "/srv/models/tiny-llama"))
    the_space = parse_space(data, recorded.parent)
    engine = SGLangEngine(ServerSetup(launcher=["sglang"], model="/srv/models/tiny-llama"))
    h200 = Hardware(("NVIDIA H200",), 130_000_000)
    estimate = estimated_speeds(h200)
    assert estimate is not None and 450 < estimate[0] < 2150 and "on the H200" in estimate[2]
    plan = plan_study(the_space, engine, hardware=h200)
    assert 46 < plan.launch.seconds < 106 and plan.search_launches == 3
    assert "estimated: 0.13 GB of weights on the H200" in plan.launch.source
    unknown = plan_study(the_space, engine, hardware=Hardware(("Some Future GPU",), 130_000_000))
    assert "assumed: decodes 30 t/s" in unknown.launch.source  # no datasheet: said to be assumed
    slower = plan_study(the_space, engine, hardware=Hardware(("NVIDIA H200",), 140_000_000_000))
    assert slower.launch.probe_s > 10 * plan.launch.probe_s  # 140 GB of weights decode far slower


@pytest.mark.server
def test_plan_holds_the_confirmations_extra_rounds_to_the_budget(tmp_path: Path) -> None:
    """18 confirmation launches (2 workloads x top 2 + the one-for-all pick and the baseline, x 3) follow the
    search; their extra rounds (up to 10 launches each, of those and of the 2 a workload the model's doubt may
    add: 10 configurations) are planned only as far as the budget reaches."""
    text = SPACE.replace("confirm: {launches: 0}", "confirm: {launches: 3, max_launches: 10}")
    (tmp_path / "space.yaml").write_text(text.replace("{python}", sys.executable))
    argv = [sys.executable, "-m", "sweep", "plan", "--space", str(tmp_path / "space.yaml"), "--budget"]
    unbounded = [sys.executable, "-m", "sweep", "plan", "--space", str(tmp_path / "space.yaml")]
    free = subprocess.run(unbounded, capture_output=True, text=True, timeout=120, check=True).stdout
    assert "confirmation: 18 launches, up to 100 where a verdict stays open\n" in free
    # 68.2 s a launch (60 s start-up): the budget's hour holds 27 search launches, the first rounds (18) and
    # 7 of the extra rounds' launches.
    hour = subprocess.run([*argv, "1h"], capture_output=True, text=True, timeout=120, check=True).stdout
    assert "confirmation: 18 launches, up to 25 where a verdict stays open (as the budget holds)" in hour
    assert "total 0h51m to 0h59m" in hour
    tight = subprocess.run([*argv, "30m"], capture_output=True, text=True, timeout=120, check=True).stdout
    assert "confirmation: 18 launches, up to 18 where a verdict stays open (as the budget holds)" in tight
    assert "search (model): 8 launches" in tight and "total 0h30m to 0h30m" in tight


def test_numeric_choices_are_a_coarse_range_to_the_model() -> None:
    the_space = space(SPACE.replace("  speculative-num-draft-tokens: {int: [2, 8]}\n", "") + "\n")
    found = {a.name: a for a in axes(the_space)}
    # topk 1 and 2 are numbers: 1.5 would lie between them; the algorithm's names stay one dimension each.
    assert found["speculative-eagle-topk"].choices == () and found["speculative-eagle-topk"].encode(2) == [
        1.0
    ]
    assert found["speculative-algorithm"].choices == ("NEXTN",)
    # Sizes that span a factor of 4 or more are compared by ratio: 6 lies halfway between 3 and 12.
    sizes = space(SPACE.replace("{choices: [1, 2]}", "{choices: [3, 6, 12]}"))
    size_axis = next(a for a in axes(sizes) if a.name == "speculative-eagle-topk")
    assert size_axis.log and size_axis.encode(6) == pytest.approx([0.5])


@pytest.mark.server
def test_near_ties_step_from_the_best_configuration_not_to_the_farthest_corner(engine: SGLangEngine) -> None:
    """Depths 2 and 3 measured, 3 the faster: deeper chains promise about as much as each other, and the one
    nearest depth 3 goes first (expected improvement alone would jump to the far end, 7)."""
    the_space = space(SMALL.replace("{int: [1, 4]}", "{int: [1, 8]}"))
    search = ModelSearch(the_space, candidates(the_space, engine))
    records = [record(0, {"speculative-algorithm": "none"}, None, 40.0, None)]
    for number, depth, tps, length in ((1, 2, 60.0, 2.5), (2, 3, 66.0, 3.0)):
        params = engine.derive(
            the_space.launch_params({"speculative-algorithm": "NEXTN", "speculative-num-steps": depth})
        )
        records.append(record(number, params, SpecShape("NEXTN", depth, 1, depth), tps, length))
    proposal = search.propose(records)
    assert proposal is not None and proposal.candidate.params["speculative-num-steps"] in (4, 5)

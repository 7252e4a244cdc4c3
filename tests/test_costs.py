"""Cost profiles: step times measured with forced acceptance, keyed by what they hold for, read by the surface
model so that a new workload needs only its acceptance; end to end against the simulator, which honours
SGLang's forced-acceptance switch."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

from sweep.core.errors import UserError
from sweep.engines import ServerSetup, SGLangEngine
from sweep.records import LaunchFacts, SpecShape, Spread, Stage, TrialRecord, WorkloadSummary
from sweep.run.profiling import forced_lengths, spread_shapes
from sweep.search import (
    Candidate,
    ModelSearch,
    acceptance_launches,
    candidates,
    diverse,
    in_doubt,
)
from sweep.search.costs import (
    CostProfile,
    ProfileKey,
    ShapeStart,
    StepTable,
    StepTime,
    check_space,
    profile_mismatches,
)
from sweep.search.guided import DEPTH_DOUBT_CHANCE, WIDTH_DOUBT_CHANCE
from sweep.search.surface import (
    NOISE_FLOOR,
    Observation,
    Prediction,
    SurfaceAt,
    WorkloadSurface,
    accept_length,
)
from sweep.sim.flags import build_parser, normalize
from sweep.sim.model import StepModel
from sweep.sim.profile import DEFAULT_PROFILE, Profile
from sweep.sim.sglang import resolve
from sweep.space import parse_space
from sweep.storage import launched, make_storage
from tests.conftest import specsweep_argv

SIM = [sys.executable, "-m", "sweep.sim"]
KEY = ProfileKey("sglang", "0.5.23", "named /models/q", "NVIDIA H200", {"kv-cache-dtype": "fp8_e4m3"})


def chain(depth: int, width: int = 1, budget: int = 0) -> SpecShape:
    return SpecShape("NEXTN", depth, width, budget or depth)


def knee(shape: SpecShape) -> float:
    """A step's time in baseline tokens with a knee at 8 verified tokens: not a line."""
    verified = (shape.budget or shape.depth) + 1
    return 1.1 + 0.15 * shape.depth + 0.02 * verified + 0.2 * max(0, verified - 8)


def step(shape: SpecShape, tokens: float, streams: int = 1, context: float = 300.0) -> StepTime:
    # A forced length of 2 at 40 t/s of baseline: decode t/s from the step's tokens.
    return StepTime("code", streams, context, shape, 2.0, 2.0, 2.0 * 40.0 / tokens, 40.0)


def test_a_step_table_keeps_measured_shapes_and_doubts_what_lies_between() -> None:
    measured = [chain(1), chain(4), chain(8), chain(12), chain(16)]
    table = StepTable.fit([(s, knee(s)) for s in measured], draft_model=True)
    for shape in measured:
        assert table.tokens(shape) == pytest.approx(knee(shape), rel=0.05)
    # Between measured shapes the residuals carry over; far from all of them the doubt is larger.
    assert table.tokens(chain(10)) == pytest.approx(knee(chain(10)), rel=0.08)
    assert table.relative_sd(chain(8)) < table.relative_sd(SpecShape("NEXTN", 2, 4, 30))


def test_a_profile_is_read_per_stream_count_and_nearby_context() -> None:
    profile = CostProfile(KEY, (step(chain(2), 1.4), step(chain(4), 1.8), step(chain(2), 2.0, streams=4)))
    assert set(profile.tables(1, 350.0)) == {"NEXTN"}
    assert profile.tables(1, 350.0)["NEXTN"].tokens(chain(4)) == pytest.approx(1.8, rel=0.05)
    assert profile.tables(2, 300.0) == {}  # no launch at two streams
    assert profile.tables(1, 4000.0) == {}  # past CONTEXT_REACH of what it measured
    assert profile.covers() == ["1 stream at 300 tokens", "4 streams at 300 tokens"]


def test_a_profiles_repeated_launches_say_how_far_a_launch_strays() -> None:
    """Two launches of each shape (two forced lengths) 10% apart: one launch strays by about 7% (log scale),
    the mean of two by 5%; a profile of one launch per shape says nothing and keeps the floor."""
    pairs = [(chain(d), 1 + 0.2 * d) for d in (1, 3, 6)]
    steps = tuple(step(shape, tokens * f) for shape, tokens in pairs for f in (0.95, 1.05))
    profile = CostProfile(KEY, steps)
    assert profile.launch_noise == pytest.approx(math.log(1.05 / 0.95) / math.sqrt(2), rel=0.01)
    assert profile.tables(1, 300.0)["NEXTN"].noise == pytest.approx(
        profile.launch_noise / math.sqrt(2), rel=0.01
    )
    assert CostProfile(KEY, steps[::2]).launch_noise == NOISE_FLOOR


def test_a_profile_survives_its_file_and_a_damaged_one_is_one_line(tmp_path: Path) -> None:
    starts = (ShapeStart({"speculative-num-steps": 12}, chain(12), started=False),)
    profile = CostProfile(KEY, (step(chain(2), 1.4), step(SpecShape("NEXTN", 3, 2, 6), 1.9)), 5, starts)
    path = tmp_path / "p.json"
    profile.save(path)
    assert CostProfile.load(path) == profile
    for text, problem in (
        ("{", "is not JSON"),
        ('{"format": 99}', "is not a cost profile"),
        ('{"format": 1, "key": {}}', "is damaged"),
    ):
        path.write_text(text)
        with pytest.raises(UserError, match=problem):
            CostProfile.load(path)
    with pytest.raises(UserError, match="cannot read"):
        CostProfile.load(tmp_path / "missing.json")


def test_a_profile_for_another_set_up_is_refused_before_a_launch_and_dropped_after_one() -> None:
    space = parse_space(
        {
            "engine": "sglang",
            "server": {"launcher": SIM, "model": "/models/q"},
            "fixed": {"kv-cache-dtype": "fp8_e4m3"},
            "workloads": [{"class": "code"}],
        },
        Path("."),
    )
    engine = SGLangEngine(ServerSetup(SIM, "/models/q"))
    check_space(CostProfile(KEY, ()), Path("p.json"), space, engine)  # the same: accepted
    other = dataclasses.replace(KEY, model="named /models/other", fixed={})
    with pytest.raises(UserError, match=r"model: 'named /models/other' vs 'named /models/q'.*fixed"):
        check_space(CostProfile(other, ()), Path("p.json"), space, engine)
    record = TrialRecord(0, {}, facts=LaunchFacts(engine_version="0.5.24"))
    found = profile_mismatches(KEY, record)
    assert (
        found[0] == "engine version: '0.5.23' vs '0.5.24'" and "hardware: 'NVIDIA H200' vs 'CPU: " in found[1]
    )


def test_acceptance_is_launched_at_each_methods_deepest_chain() -> None:
    shapes = [chain(1), chain(6), SpecShape("NEXTN", 6, 2, 8), SpecShape("NEXTN", 8, 2, 11), chain(3)]
    lookups = [SpecShape("ngram", d, variant="n=3", draft_model=False) for d in (4, 16)]
    trees = [SpecShape("EAGLE", 4, 4, 12), SpecShape("EAGLE", 6, 2, 10), SpecShape("EAGLE", 5, 2, 10)]
    pool = [Candidate({}, {"i": i}, s) for i, s in enumerate([*shapes, *lookups, *trees])]
    picked = [c.shape for c in acceptance_launches(pool)]
    # A method with no chain: its narrowest tree, deepest, with the fewest tokens verified.
    assert picked == [chain(6), lookups[1], SpecShape("EAGLE", 6, 2, 10)]


def test_acceptance_skips_what_the_profile_saw_fail_and_falls_back_after_a_failed_start() -> None:
    """Memory is the set-up's: a chain whose forced launch did not start for the profile is not tried, and a
    method whose deepest chain fails in the study measures its acceptance one chain shallower."""
    space = parse_space(
        {
            "engine": "sglang",
            "server": {"launcher": SIM, "model": "/models/q"},
            "fixed": {"kv-cache-dtype": "fp8_e4m3"},
            "params": {
                "speculative-algorithm": {"choices": ["NEXTN"]},
                "speculative-num-steps": {"int": [1, 8]},
            },
            "workloads": [{"class": "code"}],
        },
        Path("."),
    )
    engine = SGLangEngine(ServerSetup(SIM, "/models/q"))
    pool = candidates(space, engine)
    by_depth = {c.shape.depth: c for c in pool.items if c.shape}
    failed = ShapeStart(by_depth[8].params, chain(8), started=False)
    costs = CostProfile(KEY, tuple(step(chain(d), knee(chain(d))) for d in (1, 4, 8)), 5, (failed,))
    model = ModelSearch(space, pool, costs)
    baseline = TrialRecord(0, {"speculative-algorithm": "none"})
    baseline.workloads["code"] = WorkloadSummary("code", "ok", decode_tps=Spread.of([40.0, 41.0]))
    first = model.acceptance_next([baseline])
    assert first is not None and first.shape == by_depth[7].shape
    seven = TrialRecord(
        1, first.params, shape=first.shape, failure="the server exits at start", stage=Stage.LAUNCH
    )
    second = model.acceptance_next([baseline, seven])
    assert second is not None and second.shape is not None and second.shape.depth == 6
    assert model.unconfident([baseline, seven]) == ["code"]  # acceptance not measured yet
    six = TrialRecord(2, second.params, shape=second.shape)
    six.workloads["code"] = WorkloadSummary(
        "code", "ok", decode_tps=Spread.of([90.0, 92.0]), acceptance_length=Spread.of([4.0, 4.2])
    )
    assert model.acceptance_next([baseline, seven, six]) is None
    assert model.unconfident([baseline, seven, six]) == []  # the rest is predicted: the confirmation's
    picks = model.picks([baseline, seven, six], 2).per_workload["code"]
    assert len(picks) == 2 and all(c.shape and c.shape.depth < 7 for c in picks)


def test_the_picks_take_the_best_of_another_family_second() -> None:
    """The runner-up chain is nearly the best chain's twin; the best tree is what one chain's launch could not
    measure (its width), so it goes second."""
    ranked = [
        Candidate({}, {"i": i}, s) for i, s in enumerate([chain(5), chain(4), chain(6), chain(4, 2, 6)])
    ]
    assert [c.params["i"] for c in diverse(ranked, 2)] == [0, 3]
    assert [c.params["i"] for c in diverse(ranked, 3)] == [0, 3, 1]
    assert [c.params["i"] for c in diverse(ranked[:3], 2)] == [0, 1]  # one family: the order as ranked


def test_a_width_the_step_times_cannot_rank_joins_the_picks() -> None:
    """Two trees predicted from the same chain's acceptance are ranked by their step times alone: where the
    profile's doubt about those leaves the best tree of another width a fair chance of being faster than the
    first pick, the confirmation launches it too; well behind it does not. Without a profile the predictions'
    own doubt decides: none (a prediction no surer than a launch) and nothing is in doubt."""
    measured = [chain(1), chain(8), chain(8, 4, 16), chain(4, 2, 8), chain(3, 4, 12)]
    tables = {
        "NEXTN": StepTable.fit([(s, knee(s) * (1 + 0.03 * (i % 2))) for i, s in enumerate(measured)], True)
    }
    seen = [Observation({}, None, 40.0)]
    at = SurfaceAt(WorkloadSurface([], seen, profiled=lambda method, _context: tables.get(method)))
    four, two, one = (
        Candidate({}, {"i": i}, s) for i, s in enumerate([chain(4, 4, 15), chain(4, 2, 8), chain(3)])
    )
    picks = [four, one]
    assert at.step_doubt(chain(4, 4, 15)) > 0
    near = [(Prediction(66.4, 0.08), four), (Prediction(66.1, 0.08), two), (Prediction(65.0, 0.08), one)]
    (doubt,) = in_doubt(at, near, picks)
    assert (doubt.candidate, doubt.rival) == (two, four) and doubt.chance >= WIDTH_DOUBT_CHANCE
    far = [(Prediction(66.4, 0.08), four), (Prediction(60.0, 0.08), one), (Prediction(50.0, 0.08), two)]
    assert in_doubt(at, far, picks) == []
    unprofiled = SurfaceAt(WorkloadSurface([], seen))
    assert [d.candidate for d in in_doubt(unprofiled, near, picks)] == [two]
    sure = [(dataclasses.replace(p, sd=unprofiled.noise), c) for p, c in near]
    assert in_doubt(unprofiled, sure, picks) == []
    assert in_doubt(at, near, [four, one, two]) == []  # no width left


def test_a_far_depth_at_even_odds_on_a_flat_ridge_joins_the_picks() -> None:
    """2-wide trees of depth 6, 7 and 8 predicted within 0.3% (a flat ridge: their acceptance is one chain's,
    their step times the profile's, each with its doubt): the depth two or more from the pick joins it at near
    even odds; the twin next door does not, a far depth clearly behind does not either, and another method's
    tree ranked between them is not the model's doubt (its own launches speak for it)."""
    measured = [chain(1), chain(8), chain(8, 4, 16), chain(4, 2, 8), chain(3, 4, 12)]
    tables = {"NEXTN": StepTable.fit([(s, knee(s)) for s in measured], True)}
    at = SurfaceAt(WorkloadSurface([], [Observation({}, None, 40.0)], profiled=lambda m, _c: tables.get(m)))
    six, seven, eight = (Candidate({}, {"d": d}, chain(d, 2, 2 * d)) for d in (6, 7, 8))
    other = Candidate({}, {"m": "EAGLE"}, SpecShape("EAGLE", 8, 2, 16))
    ridge = [
        (Prediction(116.1, 0.13), six),
        (Prediction(116.0, 0.13), seven),
        (Prediction(115.9, 0.13), other),
        (Prediction(115.7, 0.13), eight),
    ]
    (doubt,) = in_doubt(at, ridge, [six])
    assert doubt.candidate == eight and doubt.rival == six and doubt.chance >= DEPTH_DOUBT_CHANCE
    behind = [*ridge[:3], (Prediction(100.0, 0.13), eight)]
    assert in_doubt(at, behind, [six]) == []


def test_profiled_shapes_span_each_method_and_are_forced_within_their_reach() -> None:
    shapes = [chain(d) for d in range(1, 9)] + [SpecShape("NEXTN", 8, 4, 16), SpecShape("NEXTN", 5, 2, 1)]
    lookups = [SpecShape("ngram", d, draft_model=False) for d in (4, 16)]  # their step is their text's
    pool = [Candidate({}, {"i": i}, s) for i, s in enumerate([*shapes, *lookups])]
    picked = [c.shape for c in spread_shapes(pool, 3)]
    assert picked == [chain(1), SpecShape("NEXTN", 8, 4, 16), chain(8)]
    assert forced_lengths(chain(8), (0.25, 0.75)) == [3.0, 7.0]
    # Five steps and one token verified: a step accepts at most one draft, whatever its depth.
    assert forced_lengths(SpecShape("NEXTN", 5, 2, 1), (0.25, 0.75)) == [1.2, 1.8]


def knee_tps(depth: int, acceptance: float = 0.7) -> float:
    """A chain's true t/s where a step costs `knee` baseline tokens at 40 t/s and the draft accepts `acceptance`
    per position."""
    return accept_length(acceptance, 0.5, chain(depth)) / (knee(chain(depth)) / 40.0)


def deep_launch_surface(slowdown: float = 1.0, noise: float = NOISE_FLOOR) -> WorkloadSurface:
    """A profile's step times (the knee, at depths 1-12) and two launches: the baseline at 40 t/s and the
    depth-8 chain at `slowdown` of its true t/s."""
    tables = {"NEXTN": StepTable.fit([(chain(d), knee(chain(d))) for d in (1, 3, 5, 8, 12)], True)}
    length = accept_length(0.7, 0.5, chain(8))
    seen = [
        Observation({}, None, 40.0),
        Observation({"d": 8}, chain(8), slowdown * knee_tps(8), length),
    ]
    return WorkloadSurface([], seen, noise, profiled=lambda method, _context: tables.get(method))


def test_with_step_times_known_one_deep_launch_predicts_the_shallow_chains() -> None:
    """Prediction = cost x acceptance: a profile's step times and the acceptance one launch at depth 8 measured
    predict every shallower chain's t/s, the knee the step line alone would miss included."""
    surface = deep_launch_surface()
    for depth in (2, 4, 6):
        truth = knee_tps(depth)
        predicted = surface.predict({"d": depth}, chain(depth))
        assert predicted.tps == pytest.approx(truth, rel=0.05)
        assert predicted.sd < 0.1  # sure enough to leave unlaunched what it rates well below the best


def test_a_workload_whose_steps_cost_more_than_the_profiles_moves_every_priced_prediction() -> None:
    """One launch 20% slower than the profile's step times say (another workload's prompts, another night):
    most of it is taken as a factor common to every configuration the profile prices, the rest as the launch's
    own noise, so the launched configuration is predicted near what it measured and its neighbours with it;
    the baseline is not priced by the profile and stays where it was measured."""
    surface = deep_launch_surface(slowdown=0.8, noise=0.05)
    for depth in (4, 8):
        truth = knee_tps(depth)
        assert 0.8 <= surface.predict({"d": depth}, chain(depth)).tps / truth <= 0.88
    assert surface.predict({}, None).tps == pytest.approx(40.0)
    assert surface.predict({"d": 4}, chain(4)).sd > surface.noise  # the common factor is not known exactly


SPACE = """
engine: sglang
server: {launcher: ["{python}", -m, sweep.sim, --sim-time-scale, "0.01"], model: /models/q}
fixed: {kv-cache-dtype: fp8_e4m3}
params:
  speculative-algorithm: {choices: [NEXTN]}
  speculative-num-steps: {int: [1, 6]}
workloads: [{class: CLASS}]
probe: {repeats: 2, max_tokens: 64}
confirm: {launches: 0}
trials: 10
seed: 1
"""


def cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = specsweep_argv(*args, "--runs", str(tmp_path / "runs"))
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)


def sim_step_tokens(shape: SpecShape) -> float:
    """What the simulator's own model says a chain's step costs, in its baseline's tokens."""
    parser = build_parser(Profile.load(DEFAULT_PROFILE).sglang_version)

    def model(argv: list[str]) -> StepModel:
        args = normalize(parser.parse_known_args(["--model-path", "/m", *argv])[0])
        return StepModel(
            Profile.load(DEFAULT_PROFILE), resolve(args, Profile.load(DEFAULT_PROFILE)), "code", 300
        )

    speculative = model(
        [
            *("--speculative-algorithm", "NEXTN", "--speculative-eagle-topk", "1"),
            *(
                "--speculative-num-steps",
                str(shape.depth),
                "--speculative-num-draft-tokens",
                str(shape.depth + 1),
            ),
        ]
    )
    return speculative.mean_step_seconds(1) / model([]).mean_step_seconds(1)


@pytest.mark.server
def test_a_profile_measures_the_simulators_step_costs_and_a_new_workload_needs_its_acceptance_alone(
    tmp_path: Path,
) -> None:
    (tmp_path / "code.yaml").write_text(SPACE.replace("CLASS", "code").replace("{python}", sys.executable))
    confirmed = "confirm: {launches: 2, max_launches: 2}"
    (tmp_path / "tool.yaml").write_text(
        SPACE.replace("CLASS", "tool")
        .replace("{python}", sys.executable)
        .replace("confirm: {launches: 0}", confirmed)
    )
    made = cli(tmp_path, "profile", "--space", str(tmp_path / "code.yaml"), "--shapes", "3", "--study", "p")
    assert made.returncode == 0, made.stderr[-2000:]
    path = tmp_path / "runs" / "p" / "cost-profile.json"
    profile = CostProfile.load(path)
    assert profile.key.engine_version == "0.5.23" and profile.launches == 2 + 3 * 2
    assert {s.shape.depth for s in profile.steps} == {1, 6, 3}
    for measured in profile.steps:  # the forced length was what the server counted, and the step its cost
        assert measured.measured_length == pytest.approx(measured.forced_length, rel=0.15)
        assert measured.tokens == pytest.approx(sim_step_tokens(measured.shape), rel=0.15)
    files = [p.read_text() for p in (tmp_path / "runs" / "p" / "profile").glob("*/record.json")]
    forced = [json.loads(text) for text in files]
    assert sorted(r["synthetic_length"] or 0 for r in forced)[:2] == [0, 0]  # the baseline, before and after
    # Written as a study's trial records are (one writer: once ASCII-escaped here and not there).
    assert all(t == json.dumps(r, indent=2, ensure_ascii=False) for t, r in zip(files, forced, strict=True))

    planned = cli(tmp_path, "plan", "--space", str(tmp_path / "tool.yaml"), "--profile", str(path))
    assert planned.returncode == 0, planned.stderr[-2000:]
    # At most the baseline and the deepest chain; then (2 picks + another width + the one-for-all pick + the
    # baseline) x 2 launches, up to 2 more where the model's doubt adds a far depth too.
    assert "search (cost profile): at most 2 launches (the baseline, 1 acceptance launch, " in planned.stdout
    assert "confirmation: 10 launches, up to 12" in planned.stdout
    done = cli(
        tmp_path, "run", "--space", str(tmp_path / "tool.yaml"), "--study", "t", "--profile", str(path)
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "the search stops here: confident" in done.stderr
    storage = make_storage(f"sqlite:///{tmp_path / 'runs' / 't' / 'study.db'}")
    ran = [t for t in optuna.load_study(study_name="t", storage=storage).trials if launched(t)]
    # The baseline and the deepest chain's acceptance: the other five chains are predicted.
    assert len(ran) == 2
    assert all(t.user_attrs["record"]["synthetic_length"] is None for t in ran)
    assert ran[1].user_attrs["record"]["shape"]["depth"] == 6
    # The confirmation launches the model's two picks, one never launched, beside the baseline, twice each.
    again = [t for t in optuna.load_study(study_name="t:confirm", storage=storage).trials if launched(t)]
    labels = [t.user_attrs["label"] for t in again]
    assert len(again) == 6 and "predicted 1" in labels and labels.count("baseline") == 2
    assert "confirmation: 3 configurations (baseline, " in done.stderr
    run_line = next(line for line in done.stdout.splitlines() if line.startswith("run for tool: "))
    exported = cli(tmp_path, "export", "--study", "t", "--workload", "tool", "--format", "json")
    assert exported.returncode == 0, exported.stderr[-2000:]
    assert run_line.startswith(f"run for tool: {json.loads(exported.stdout)['configuration']}: ")
    # The study keeps the profile it read: its page draws it, and a later confirmation reads it.
    study = optuna.load_study(study_name="t", storage=storage)
    assert CostProfile.of_study(study) == profile
    page = (tmp_path / "dashboards" / "t.html").read_text()
    assert "Step cost from the cost profile" in page and "No cost profile" not in page


@pytest.mark.server
@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (("profile", "--shares", "x"), "--shares 'x' is not a list of numbers"),
        (("profile", "--shares", "1.5"), "--shares 1.5 is not a share of a draft"),
        (("profile", "--shapes", "0"), "--shapes 0 profiles nothing"),
        (("run", "--profile", "missing.json", "--no-confirm"), "cannot read cost profile missing.json"),
    ],
)
def test_bad_profile_input_is_one_line(tmp_path: Path, args: tuple[str, ...], problem: str) -> None:
    (tmp_path / "s.yaml").write_text(SPACE.replace("CLASS", "code").replace("{python}", sys.executable))
    done = cli(tmp_path, args[0], "--space", str(tmp_path / "s.yaml"), *args[1:])
    assert done.returncode == 2 and problem in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) <= 2


@pytest.mark.server
def test_a_profile_of_another_model_is_refused_before_any_launch(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(SPACE.replace("CLASS", "code").replace("{python}", sys.executable))
    CostProfile(dataclasses.replace(KEY, model="named /models/big"), (step(chain(2), 1.4),)).save(
        tmp_path / "p.json"
    )
    for command in ("run", "plan"):
        done = cli(
            tmp_path, command, "--space", str(tmp_path / "s.yaml"), "--profile", str(tmp_path / "p.json")
        )
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert (
            "was measured for another set-up (model: 'named /models/big' vs 'named /models/q')" in done.stderr
        )
    assert not (tmp_path / "runs" / "s" / "trials").exists()


@pytest.mark.server
def test_a_space_of_lookups_alone_has_nothing_to_profile(tmp_path: Path) -> None:
    """The demo's n-gram space: a lookup's counted step holds the plain steps its text leaves between drafts."""
    done = cli(
        tmp_path,
        "profile",
        "--space",
        str(Path(__file__).parents[1] / "sweep" / "space" / "examples" / "demo-llamacpp.yaml"),
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "no launchable configuration drafted by a model to profile" in done.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").rglob("record.json"))

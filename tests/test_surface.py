"""The surface model against the simulator's own performance model: what it learns from a few launches, what it
predicts for configurations never launched, and where it says it is unsure."""

from __future__ import annotations

import dataclasses
import math

import pytest

from sweep.records import SpecShape
from sweep.search.surface import (
    GAIN_PRIOR,
    Axis,
    Observation,
    StartChance,
    WorkloadSurface,
    accept_length,
)
from sweep.sim.model import StepModel
from sweep.sim.profile import DEFAULT_PROFILE, Profile
from sweep.sim.sglang import resolve
from tests.test_sim_model import args

PROFILE = Profile.load(DEFAULT_PROFILE)
AXES = [
    Axis("speculative-num-steps", 1, 8),
    Axis("speculative-eagle-topk", choices=(1, 2, 4)),
    Axis("speculative-num-draft-tokens", 2, 16),
]


def config(steps: int, topk: int = 1, draft: int | None = None) -> tuple[dict[str, int], SpecShape]:
    draft = steps + 1 if topk == 1 else (draft or steps + 1)
    params = {
        "speculative-num-steps": steps,
        "speculative-eagle-topk": topk,
        "speculative-num-draft-tokens": draft,
    }
    return params, SpecShape("NEXTN", steps, topk, draft - 1)


def truth(
    workload: str, steps: int, topk: int = 1, draft: int | None = None, context: int = 300
) -> StepModel:
    _, shape = config(steps, topk, draft)
    flags = ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", str(steps)]
    flags += ["--speculative-eagle-topk", str(topk), "--speculative-num-draft-tokens", str(shape.budget + 1)]
    return StepModel(PROFILE, resolve(args(*flags), PROFILE), workload, context)


def observe(
    workload: str, *configs: tuple[int, int, int | None], context: int | None = None
) -> list[Observation]:
    """The sim's expected numbers for the baseline and `configs`, at `context` prompt tokens (unknown: None)."""
    tokens = context or 300
    base = StepModel(PROFILE, resolve(args(), PROFILE), workload, tokens).expected_tps()
    out = [Observation({"speculative-algorithm": "none"}, None, base, None, context)]
    for steps, topk, draft in configs:
        params, shape = config(steps, topk, draft)
        model = truth(workload, steps, topk, draft, tokens)
        out.append(Observation(params, shape, model.expected_tps(), model.expected_accept_length(), context))
    return out


def test_accept_length_is_the_chain_sum_and_trees_add_with_diminishing_returns() -> None:
    assert accept_length(0.5, 0.5, SpecShape("X", 2, 1, 2)) == pytest.approx(1.75)
    # Per position (depth 1): a wider level catches more, each extra candidate less than the one before.
    chain, two, four = (accept_length(0.6, 0.5, SpecShape("X", 1, w, w)) for w in (1, 2, 4))
    assert chain < two < four and four - two < two - chain
    # A budget below the steps caps the depth: 3 steps with 1 draft token verify one position.
    assert accept_length(0.6, 0.5, SpecShape("X", 3, 2, 1)) == pytest.approx(1.6)


@pytest.mark.parametrize("workload", ["code", "prose"])
def test_a_few_launches_predict_configurations_never_launched(workload: str) -> None:
    measured = ((1, 1, None), (4, 1, None), (8, 1, None), (2, 2, 6), (6, 4, 16))
    surface = WorkloadSurface(AXES, observe(workload, *measured))
    for steps, topk, draft in ((3, 1, None), (6, 1, None), (4, 2, 9), (3, 4, 10)):
        params, shape = config(steps, topk, draft)
        predicted = surface.predict(params, shape)
        expected = truth(workload, steps, topk, draft)
        assert predicted.tps == pytest.approx(expected.expected_tps(), rel=0.08), (steps, topk, draft)
        assert predicted.accept_length == pytest.approx(expected.expected_accept_length(), rel=0.08)


@pytest.mark.parametrize("workload", ["code", "prose"])
def test_context_length_is_a_coordinate_read_between_the_contexts_measured(workload: str) -> None:
    """Measured at a short and a long context only, the model predicts other depths at contexts in between
    (acceptance falls and steps slow as the cache grows), and knows the long context wants a shallower draft."""
    short, long = 300, 32768
    surface = WorkloadSurface(
        AXES,
        observe(workload, (1, 1, None), (3, 1, None), (6, 1, None), context=short)
        + observe(workload, (2, 1, None), (5, 1, None), context=long),
    )
    assert surface.contexts.sizes == (short, long)
    for context in (4096, 16384):
        for steps in (1, 4, 7):
            params, shape = config(steps)
            predicted, expected = (
                surface.predict(params, shape, context),
                truth(workload, steps, context=context),
            )
            assert predicted.tps == pytest.approx(expected.expected_tps(), rel=0.04), (context, steps)
            assert predicted.accept_length == pytest.approx(expected.expected_accept_length(), rel=0.04)

    def best_depth(context: int) -> int:
        return max(range(1, 9), key=lambda s: surface.predict(*config(s), context).tps)

    def true_tps(steps: int, context: int) -> float:
        return truth(workload, steps, context=context).expected_tps()

    assert best_depth(long) < best_depth(short)
    # Between them, the depth it would pick is about as fast as the true best (the top is flat there).
    assert true_tps(best_depth(16384), 16384) >= 0.96 * max(true_tps(s, 16384) for s in range(1, 9))
    # The best measured speed is per context: a long context's best is not the short one's.
    assert surface.best_at(long) < surface.best_at(short)


def test_uncertainty_is_small_where_measured_and_grows_away_from_it() -> None:
    surface = WorkloadSurface(AXES, observe("code", (1, 1, None), (2, 1, None), (3, 1, None)))
    near_params, near_shape = config(2)
    far_params, far_shape = config(8, 4, 16)
    near, far = surface.predict(near_params, near_shape), surface.predict(far_params, far_shape)
    assert near.sd < far.sd
    assert near.sd < 0.05  # a measured point: the launch noise and little else
    # An unmeasured configuration that might be much faster is worth more than one the model knows well.
    assert far.expected_improvement(surface.best_at()) > near.expected_improvement(surface.best_at())


def test_a_method_never_measured_is_as_unsure_as_the_prior_says() -> None:
    surface = WorkloadSurface(AXES, observe("code", (3, 1, None)))
    unseen = surface.predict({}, SpecShape("EAGLE3", 3, 1, 3))
    assert unseen.sd > 0.3 and unseen.accept_length is None
    assert math.isclose(unseen.tps, 1 / surface.per_token(None), rel_tol=0.05)  # the baseline's speed


def lookup(n: int, m: int) -> tuple[dict[str, int], SpecShape]:
    """An n-gram lookup matching `n` tokens and drafting up to `m`."""
    return {"n": n, "m": m}, SpecShape("ngram", m, 1, m, draft_model=False, variant=f"n={n}")


def launched_lookup(n: int, m: int, length: float) -> Observation:
    """A lookup's launch: its acceptance length, at a verify step of m tokens in a 50 t/s baseline's time."""
    params, shape = lookup(n, m)
    return Observation(params, shape, length / ((1.1 + m / 50) / 50.0), length)


LOOKUP_AXES = [Axis("n", 3, 12, log=True), Axis("m", 16, 48)]


def test_variants_of_a_method_keep_their_own_acceptance() -> None:
    """Two match lengths of one n-gram method: a short match drafts often and wrongly, a longer one rarely
    and well. Each variant's acceptance is its own, so the long match's deeper draft is predicted from its own
    shallow launch, not from the short match's poor acceptance; a variant never measured is less sure."""
    short = [launched_lookup(3, m, accept_length(0.5, GAIN_PRIOR, lookup(3, m)[1])) for m in (16, 48)]
    long_shallow = launched_lookup(6, 16, accept_length(0.5, GAIN_PRIOR, lookup(6, 16)[1], copies=True))
    surface = WorkloadSurface(LOOKUP_AXES, [Observation({}, None, 50.0, None), *short, long_shallow])
    deep = surface.predict(*lookup(6, 48))
    assert deep.accept_length == pytest.approx(
        accept_length(0.5, GAIN_PRIOR, lookup(6, 48)[1], copies=True), rel=0.03
    )
    assert deep.tps > surface.best_at()  # the search has a reason to launch it
    assert surface.predict(*lookup(12, 16)).sd > surface.predict(*lookup(6, 16)).sd + 0.1


def test_a_lookup_that_copies_runs_keeps_paying_for_depth() -> None:
    """The real llama-server's ngram-simple on tool calls (n=6): accept length 7.98 with 16 drafted and 17.8
    with 48. Per-position acceptance cannot fit both (it saturates: 8.3 at 48 from the 16's fit); copied runs
    (a share of steps finds a run, a run is accepted nearly whole) do, and read 32 drafted in between."""
    copying = WorkloadSurface(
        LOOKUP_AXES,
        [Observation({}, None, 50.0, None), launched_lookup(6, 16, 7.98), launched_lookup(6, 48, 17.8)],
    )
    assert copying.methods["ngram"].copies_for("n=6")
    length = copying.predict(*lookup(6, 32)).accept_length
    assert length is not None and 12.0 < length < 15.0


def test_each_lookup_variant_keeps_the_form_its_own_depths_fit() -> None:
    """On the same tool calls the real server's n=3 match accepts 6.59 with 16 drafted and 6.59 with 48: its
    wrong matches break every run early, a chain that saturates. That variant is fitted position by position;
    the method's other match lengths are not judged by it: one never measured, or measured at one depth only,
    keeps the lookup's own form (copied runs), so a deeper draft of it still looks worth a launch."""
    saturating = [launched_lookup(3, m, accept_length(0.6, GAIN_PRIOR, lookup(3, m)[1])) for m in (16, 48)]
    surface = WorkloadSurface(
        LOOKUP_AXES, [Observation({}, None, 50.0, None), *saturating, launched_lookup(6, 16, 7.98)]
    )
    fit = surface.methods["ngram"]
    assert not fit.copies_for("n=3") and fit.copies_for("n=6") and fit.copies_for("n=12")
    assert surface.predict(*lookup(3, 32)).accept_length == pytest.approx(2.5, rel=0.02)  # 1 + 0.6/0.4
    deep, shallow = surface.predict(*lookup(6, 48)), surface.predict(*lookup(6, 16))
    assert deep.accept_length is not None and shallow.accept_length is not None
    assert deep.accept_length > 2 * shallow.accept_length - 1  # more than twice the accepted drafts
    unseen_deep, unseen_shallow = surface.predict(*lookup(12, 48)), surface.predict(*lookup(12, 16))
    assert unseen_deep.accept_length is not None and unseen_shallow.accept_length is not None
    assert unseen_deep.accept_length > 2 * unseen_shallow.accept_length - 1


def test_a_lookups_counted_step_costs_what_its_launches_say() -> None:
    """The real llama-server's ngram-simple on prose (CPU): a counted step cost about 5 tokens plus 0.2 per
    token allowed (the plain steps between drafts, and verifying what a match drafted), far from a model
    step's one token. Two launches overrule the prior: the surface reads both back from its structure alone,
    and a depth between them from the fit, not at 2 to 3 times what was measured, with each launch known
    only to within prose's spread between requests (15%)."""

    def launched(m: int, length: float) -> Observation:
        params, shape = lookup(3, m)
        return Observation(params, shape, length / ((5 + 0.2 * m) / 50.0), length)

    measured = [launched(16, 13.65), launched(48, 22.88)]
    surface = WorkloadSurface(LOOKUP_AXES, [Observation({}, None, 50.0, None), *measured], noise=0.15)
    for observation in measured:
        assert observation.shape is not None
        assert surface.structural_tps(observation.shape) == pytest.approx(observation.tps, rel=0.1)
    between = surface.structural_tps(lookup(3, 32)[1])
    assert between is not None
    assert min(o.tps for o in measured) * 0.8 < between < max(o.tps for o in measured) * 1.2


def test_a_failed_start_rules_out_larger_drafts_of_the_same_method() -> None:
    failed_params, failed_shape = config(3, 2, 7)
    started_params, started_shape = config(2, 1)
    chance = StartChance(AXES, [(failed_params, failed_shape, False), (started_params, started_shape, True)])
    bigger_params, bigger_shape = config(5, 4, 12)
    smaller_params, smaller_shape = config(1, 1)
    assert chance(bigger_params, bigger_shape) == StartChance.UNLIKELY
    assert chance(smaller_params, smaller_shape) == StartChance.LIKELY
    other = SpecShape("EAGLE3", 5, 1, 5)  # another method: its own memory, no evidence
    assert 0.2 < chance({}, other) < 0.95


def test_acceptance_per_position_gives_the_length_where_the_server_gave_none() -> None:
    """A verify step emits the bonus token and each position it accepted: length = 1 + the positions' shares,
    the identity the simulator's histograms obey."""
    from sweep.records import Spread, TrialRecord, WorkloadSummary
    from sweep.search.surface import observations

    _, shape = config(3)
    positions = (0.8, 0.6, 0.45)
    summary = WorkloadSummary("code", "ok", decode_tps=Spread.of([50.0]), position_acceptance=positions)
    record = TrialRecord(1, {"speculative-num-steps": 3}, shape=shape, workloads={"code": summary})
    (seen,) = observations([record], "code")
    assert seen.accept_length == pytest.approx(2.85)
    with_length = dataclasses.replace(summary, acceptance_length=Spread.of([2.5]))
    (measured,) = observations([dataclasses.replace(record, workloads={"code": with_length})], "code")
    assert measured.accept_length == 2.5  # the server's own length wins where it gave one
    model = truth("code", 3)
    a = model.acceptance()
    assert 1 + sum(a ** (i + 1) for i in range(3)) == pytest.approx(model.expected_accept_length())


def test_a_chain_that_reported_each_positions_acceptance_gives_every_shallower_chains_length() -> None:
    """Acceptance falling faster than a geometric form allows (0.9, 0.6, 0.3, 0.1 of the steps reach each
    position): the shallower chains' lengths are read off the curve (1.9, 2.5, 2.8), where the length alone
    (2.9 at depth 4) fitted as geometric would say 2.24 at depth 2; deeper and wider shapes keep the form."""
    deep = SpecShape("NEXTN", 4, 1, 4)
    seen = [
        Observation({}, None, 50.0),
        Observation({"d": 4}, deep, 60.0, 2.9, None, (0.9, 0.6, 0.3, 0.1)),
    ]
    surface = WorkloadSurface([], seen)
    lengths = [surface.accept_length(SpecShape("NEXTN", d, 1, d)) for d in (1, 2, 3, 4)]
    assert lengths == pytest.approx([1.9, 2.5, 2.8, 2.9])
    plain = WorkloadSurface([], [seen[0], dataclasses.replace(seen[1], positions=())])
    assert plain.accept_length(SpecShape("NEXTN", 2, 1, 2)) == pytest.approx(2.24, abs=0.02)
    deeper = surface.accept_length(SpecShape("NEXTN", 6, 1, 6))
    assert deeper is not None and deeper > 2.9  # past the curve: the fitted form

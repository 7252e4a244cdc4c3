"""The surface model against the simulator's own performance model: what it learns from a few launches, what it
predicts for configurations never launched, and where it says it is unsure."""

from __future__ import annotations

import math

import pytest

from sweep.results import SpecShape
from sweep.sim.model import StepModel, resolve
from sweep.sim.profile import DEFAULT_PROFILE, Profile
from sweep.surface import Axis, Observation, StartChance, WorkloadSurface, accept_length
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


def truth(workload: str, steps: int, topk: int = 1, draft: int | None = None) -> StepModel:
    _, shape = config(steps, topk, draft)
    flags = ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", str(steps)]
    flags += ["--speculative-eagle-topk", str(topk), "--speculative-num-draft-tokens", str(shape.budget + 1)]
    return StepModel(PROFILE, resolve(args(*flags), PROFILE), workload, 300)


def observe(workload: str, *configs: tuple[int, int, int | None]) -> list[Observation]:
    base = StepModel(PROFILE, resolve(args(), PROFILE), workload, 300).expected_tps()
    out = [Observation({"speculative-algorithm": "none"}, None, base)]
    for steps, topk, draft in configs:
        params, shape = config(steps, topk, draft)
        model = truth(workload, steps, topk, draft)
        out.append(Observation(params, shape, model.expected_tps(), model.expected_accept_length()))
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


def test_uncertainty_is_small_where_measured_and_grows_away_from_it() -> None:
    surface = WorkloadSurface(AXES, observe("code", (1, 1, None), (2, 1, None), (3, 1, None)))
    near_params, near_shape = config(2)
    far_params, far_shape = config(8, 4, 16)
    near, far = surface.predict(near_params, near_shape), surface.predict(far_params, far_shape)
    assert near.sd < far.sd
    assert near.sd < 0.05  # a measured point: the launch noise and little else
    # An unmeasured configuration that might be much faster is worth more than one the model knows well.
    assert far.expected_improvement(surface.best) > near.expected_improvement(surface.best)


def test_a_method_never_measured_is_as_unsure_as_the_prior_says() -> None:
    surface = WorkloadSurface(AXES, observe("code", (3, 1, None)))
    unseen = surface.predict({}, SpecShape("EAGLE3", 3, 1, 3))
    assert unseen.sd > 0.3 and unseen.accept_length is None
    assert math.isclose(unseen.tps, surface.baseline_tps or 0.0, rel_tol=0.05)


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

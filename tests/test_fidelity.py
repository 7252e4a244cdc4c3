"""The output check: texts against the baseline's, prompt by prompt, with structured answers parsed."""

from __future__ import annotations

from sweep import fidelity

BASE = [
    '{"city": "BUSAN", "id": "A-1042"}',
    "Once upon a time there was a lighthouse.",
    "def f(x):\n    return x",
]


def test_identical_outputs_pass() -> None:
    check = fidelity.check(list(BASE), BASE)
    assert check is not None and check.identical == 3 and check.first_divergence is None
    assert check.structured == 1 and check.structured_broken == 0 and not check.changed


def test_one_late_floating_point_divergence_is_tolerated() -> None:
    other = [BASE[0], "Once upon a time there was a lighthouse keeper.", BASE[2]]
    check = fidelity.check(other, BASE)
    assert check is not None and check.identical == 2 and not check.changed
    assert check.first_divergence == len("Once upon a time there was a lighthouse")


def test_most_outputs_changed_is_flagged() -> None:
    other = ["garbage", "Once upon a midnight dreary", BASE[2] + "  # changed"]
    check = fidelity.check(other, BASE)
    assert check is not None and check.changed and check.identical == 0
    assert "0/3 outputs identical" in check.describe()


def test_broken_json_answer_is_flagged_even_when_text_mostly_matches() -> None:
    other = ['{"city": "BUSAN", "id": "A-1O42"}', BASE[1], BASE[2]]  # one field's value changed
    check = fidelity.check(other, BASE)
    assert check is not None and check.structured_broken == 1 and check.changed


def test_fields_of_a_cut_answer_are_compared() -> None:
    # Answers cut by max_tokens do not parse: their complete "key": value fields must match the baseline's.
    cut = '```json\n{"orders": [{"id": "B-2010", "customer": "Ines Duarte", "city": "Porto", "ite'
    base = [cut, *BASE[1:]]
    same_fields = ['```json\n{"orders": [{"id": "B-2010", "customer": "Ines Duarte", "ci', *BASE[1:]]
    wrong_field = ['```json\n{"orders": [{"id": "B-2010", "customer": "Ines Duerte", "ci', *BASE[1:]]
    kept, broken = fidelity.check(same_fields, base), fidelity.check(wrong_field, base)
    assert kept is not None and kept.structured == 1 and kept.structured_broken == 0 and not kept.changed
    assert broken is not None and broken.structured_broken == 1 and broken.changed


def test_the_baselines_own_reproducibility_is_the_floor() -> None:
    runs = [BASE, [BASE[0], "different", "also different"]]
    floor = fidelity.reproducibility(runs)
    assert floor == 1 / 3
    other = [BASE[0], "y", "z"]
    assert fidelity.check(other, BASE).changed  # type: ignore[union-attr]
    assert not fidelity.check(other, BASE, floor=floor).changed  # type: ignore[union-attr]

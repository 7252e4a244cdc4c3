"""`specsweep replay`'s table: per workload, each replayed configuration's acceptance on the baseline's tokens,
best first, and what could not be replayed."""

from __future__ import annotations

import dataclasses
from typing import Any

from sweep.run.replay import StudyReplay


def replay_lines(found: StudyReplay, top: int | None = None) -> list[str]:
    """The table, `top` configurations per workload (all where None), marked as replayed, not measured."""
    lines = [
        f"study {found.study}: acceptance replayed on the baseline's tokens (trial {found.baseline}), not measured",
    ]
    for workload in dict.fromkeys(r.workload for r in found.rows):
        rows = sorted(
            (r for r in found.rows if r.workload == workload),
            key=lambda r: -(r.acceptance_length or 1.0),
        )
        lines += [
            "",
            f"{workload} ({rows[0].requests} requests)",
            "  acceptance length  accepted/drafted  configuration",
        ]
        for row in rows[:top]:
            length = f"{row.acceptance_length:.2f}" if row.acceptance_length else "-"
            lines.append(f"  {length:>17}  {row.accepted:>8}/{row.drafted:<7}  {row.arm}")
    for workload, count in found.missing.items():
        lines.append(f"\n{workload}: {count} requests not replayed (no token ids)")
    lines += [f"  {reason}" for reason in found.reasons]
    return lines


def replay_json(found: StudyReplay) -> dict[str, Any]:
    """The same as data: every row with its acceptance, marked replayed."""
    rows = [
        {
            **dataclasses.asdict(r),
            "acceptance_length": r.acceptance_length,
            "acceptance_rate": r.acceptance_rate,
        }
        for r in found.rows
    ]
    return {
        "study": found.study,
        "baseline": found.baseline,
        "replayed": True,
        "rows": rows,
        "missing": found.missing,
        "reasons": list(found.reasons),
    }

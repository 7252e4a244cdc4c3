"""`specsweep compare A B ...`: configurations side by side. A is a study (its one-server recommendation) or
STUDY:TRIAL; prints Markdown and writes an HTML file."""

from __future__ import annotations

import argparse
from pathlib import Path

from sweep.analysis import study_verdicts
from sweep.core.errors import UserError
from sweep.core.files import write_atomic
from sweep.outputs.compare import Column, html_page, markdown
from sweep.outputs.publish import DEFAULT_DIR
from sweep.run.study import DEFAULT_RUNS, open_study, read_study
from sweep.storage import Phase


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("compare", help="configurations side by side", description=__doc__)
    parser.add_argument("configs", nargs="+", help="STUDY (its recommendation) or STUDY:TRIAL, two or more")
    parser.add_argument(
        "--storage", help="Optuna storage URL shared by the studies (default: each one's SQLite)"
    )
    parser.add_argument(
        "--runs", type=Path, default=DEFAULT_RUNS, help="folder of study folders (default: runs)"
    )
    parser.add_argument(
        "-o", "--output", type=Path, help="HTML file (default: dashboards/compare-<A>-<B>.html)"
    )
    parser.set_defaults(handler=main)


def column(spec: str, storage: str | None, runs: Path) -> Column:
    name, _, trial_text = spec.partition(":")
    found = read_study(open_study(name, storage, runs))
    views = {v.number: v for v in found.search}
    if trial_text:
        if not trial_text.isdigit() or int(trial_text) not in views or views[int(trial_text)].record is None:
            raise UserError(
                f"study '{name}' has no measured trial '{trial_text}'",
                f"trials: {', '.join(map(str, views))}",
            )
        record = views[int(trial_text)].record
        assert record is not None
        return Column(f"{name}:{trial_text}", record)
    verdicts = study_verdicts(found)
    overall, recs = verdicts.overall, verdicts.recommendations
    if overall is None and not recs:
        raise UserError(f"study '{name}' has nothing measured to compare", "run it first")
    chosen = found.named(overall.trial_label if overall else recs[0].recommended_label)
    assert chosen is not None and chosen.record is not None
    where = chosen.number if chosen.phase is Phase.SEARCH else chosen.name.replace(" ", "-")
    return Column(f"{name}:{where}", chosen.record)


def main(args: argparse.Namespace) -> int:
    if len(args.configs) < 2:
        raise UserError("compare needs two or more configurations", "e.g. specsweep compare demo demo:0")
    columns = [column(spec, args.storage, args.runs) for spec in args.configs]
    print(markdown(columns))
    out = args.output or DEFAULT_DIR / (
        "compare-" + "-".join(c.label.replace(":", "_") for c in columns) + ".html"
    )
    write_atomic(out, html_page(columns, "specsweep compare: " + ", ".join(c.label for c in columns)))
    print(f"\n{out}")
    return 0

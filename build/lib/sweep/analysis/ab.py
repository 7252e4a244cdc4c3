"""An A/B of two configurations: their speeds, latencies and facts side by side, row by row."""

from __future__ import annotations

import functools
import statistics
from collections.abc import Callable
from dataclasses import dataclass

from sweep.analysis.evidence import launches, ok_summary, study_noise
from sweep.analysis.study_warnings import StudyWarnings
from sweep.analysis.verdicts import geo_mean, quiet_compare, quiet_views
from sweep.core import stats
from sweep.storage import TrialView

# --- an A/B of two configurations -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ABRow:
    """One line of an A/B table: a metric under A and B, B's difference, and the verdict where one applies."""

    metric: str
    a: str
    b: str
    difference: str
    verdict: str = ""


def _plain(
    views: list[TrialView], metric: str, value: Callable[[TrialView], float | None], fmt: str
) -> ABRow | None:
    """A metric without a verdict: the median over each configuration's launches, and the difference."""
    medians = []
    for label in ("A", "B"):
        found = [
            x for view in views if view.label == label and view.complete if (x := value(view)) is not None
        ]
        medians.append(statistics.median(found) if found else None)
    a, b = medians
    if a is None and b is None:
        return None
    diff = "-"
    if a is not None and b is not None:
        diff = f"{b - a:+.3g}" + (f" ({b / a - 1:+.1%})" if a else "")
    return ABRow(metric, "-" if a is None else fmt.format(a), "-" if b is None else fmt.format(b), diff)


def _speed(
    views: list[TrialView],
    key: str,
    metric: str,
    name: str,
    min_gain: float,
    warnings: StudyWarnings,
    looks: stats.Looks | None,
) -> ABRow | None:
    used = quiet_views(views, ("B", "A"), key, metric)
    a, b = launches(used, "A", key, metric), launches(used, "B", key, metric)
    noise = study_noise(views, key, metric, reference="A")
    found = quiet_compare(views, ("B", "A"), key, noise, min_gain, warnings, metric, looks)
    a_mean, b_mean = geo_mean(a), geo_mean(b)
    if found is None or a_mean is None or b_mean is None:
        return None
    return ABRow(
        f"{key}: {name}",
        f"{a_mean:.1f} x{len(a)}",
        f"{b_mean:.1f} x{len(b)}",
        f"{found.gain:+.1%} [{found.interval}]",
        str(found.verdict),
    )


def _fact(view: TrialView, name: str) -> float | None:
    value = getattr(view.record.facts, name) if view.record else None
    return None if value is None else float(value)


def ab_rows(
    views: list[TrialView],
    keys: list[str],
    warnings: StudyWarnings,
    min_gain: float = stats.MIN_GAIN,
    looks: stats.Looks | None = None,
) -> list[ABRow]:
    """B against A, interleaved launches of each (looked at as `looks` says): speeds with verdicts (unreliable
    where the host was busy), then latency, acceptance and memory."""
    rows: list[ABRow | None] = []
    for key in keys:
        rows += [
            _speed(
                views,
                key,
                "capacity_rps",
                "capacity (req/s within the latency limits)",
                min_gain,
                warnings,
                looks,
            ),
            _speed(views, key, "decode_tps", "decode t/s", min_gain, warnings, looks),
            _speed(views, key, "aggregate_tps", "aggregate t/s (decode window)", min_gain, warnings, looks),
            _speed(views, key, "sum_stream_tps", "sum of stream t/s", min_gain, warnings, looks),
            *(
                _plain(
                    views,
                    f"{key}: {name} (s)",
                    functools.partial(_latency, key=key, part=part, quantile=q),
                    fmt,
                )
                for name, part, q, fmt in LATENCY_ROWS
            ),
            _plain(views, f"{key}: accept length", functools.partial(_accept_length, key=key), "{:.2f}"),
        ]
    for name, attr, fmt in (
        ("KV pool (tokens)", "kv_pool_tokens", "{:.0f}"),
        ("free after pool (GB)", "free_after_pool_gb", "{:.2f}"),
        ("CUDA-graph capture (GB)", "graph_capture_gb", "{:.2f}"),
        ("start-up (s)", "startup_s", "{:.1f}"),
    ):
        rows.append(_plain(views, name, functools.partial(_fact, name=attr), fmt))
    return [row for row in rows if row is not None]


# (row name, latency part, percentile, format). Speculation streams accepted tokens back to back, so the median
# gap between chunks can be ~0 (and p90 too at 20 tokens a step): time per output token is the per-token figure,
# the gaps' p99 shows the steps.
LATENCY_ROWS = (
    ("TTFT p50", "ttft_s", "p50", "{:.3f}"),
    ("time per output token p50", "tpot_s", "p50", "{:.4f}"),
    ("inter-token p99", "itl_s", "p99", "{:.4f}"),
)


def _latency(view: TrialView, key: str, part: str, quantile: str) -> float | None:
    summary = ok_summary(view, key)
    return summary.latency.get(part, {}).get(quantile) if summary else None


def _accept_length(view: TrialView, key: str) -> float | None:
    summary = ok_summary(view, key)
    return summary.acceptance_length.median if summary and summary.acceptance_length else None

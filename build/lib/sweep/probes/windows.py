"""What a batch's rows say over time: the offered rate, goodput under latency limits, the decode window from the
server's clock or the client's, and how many streams decoded at once."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from sweep.core.stats import percentile
from sweep.records import (
    RequestMeasurement,
)


def offered_rate(rows: list[RequestMeasurement]) -> float | None:
    """Requests per second as they were sent: the gaps between the first send and the last."""
    span = max(r.sent_s for r in rows) - min(r.sent_s for r in rows)
    return (len(rows) - 1) / span if span > 0 else None


def goodput(rows: list[RequestMeasurement], limits: Mapping[str, float]) -> float | None:
    """Requests that met every latency limit, per second from the first sent to the last answered (every
    request counts where the space sets no limit: the served request rate)."""
    span = max(r.sent_s + r.wall_s for r in rows) - min(r.sent_s for r in rows)
    good = [r for r in rows if all(_request_value(r, name) <= limit for name, limit in limits.items())]
    return len(good) / span if span > 0 else None


def _request_value(row: RequestMeasurement, limit: str) -> float:
    """One request's own value of a latency limit's measure (`itl_p90_s`: its own 90th percentile gap); a
    measure it lacks (no token came) is infinitely late."""
    part, _, quantile = limit.removesuffix("_s").partition("_")
    value = REQUEST_MEASURES[part](row, int(quantile.removeprefix("p")))
    return math.inf if value is None else value


def _server_first(server: float | None, client: float | None) -> float | None:
    return server if server is not None else client


# A latency limit's measure on one request (the percentile matters only to the gaps between its tokens): the
# server's own times where it reports them (SGLang: they hold its queue, not the client machine's scheduling,
# so a busy client does not fail a limit the server held), else the client's; token gaps only the client sees.
REQUEST_MEASURES: dict[str, Callable[[RequestMeasurement, int], float | None]] = {
    "ttft": lambda row, _q: _server_first(row.server_ttft_s, row.ttft_s),
    "tpot": lambda row, _q: _server_first(row.server_tpot_s, row.tpot_s),
    "itl": lambda row, q: percentile(list(row.itl_s), q) if row.itl_s else None,
    "e2e": lambda row, _q: _server_first(row.server_e2e_s, row.wall_s),
}


def window_rate(rows: list[RequestMeasurement]) -> float | None:
    """Decode tokens of every request (the first token of each comes from prefill) over the decode window:
    from the first stream's first token to the last stream's last token, on one clock: the server's where it
    stamps every request's arrival (SGLang), the client's otherwise (each request's times from when it was
    sent). Never the two mixed: a simulator's modelled seconds and a client's wall seconds do not add."""
    windows = _server_windows(rows) or _client_windows(rows)
    tokens = sum(max(0, r.completion_tokens - 1) for r in rows)
    if not windows or not tokens:
        return None
    first, last = min(start for start, _ in windows), max(end for _, end in windows)
    return tokens / (last - first) if last > first else None


def _server_windows(rows: list[RequestMeasurement]) -> list[tuple[float, float]] | None:
    """Each request's first and last token on the server's clock; None unless the server stamped every one."""
    windows = []
    for r in rows:
        if r.server_received_s is None or r.server_ttft_s is None or r.server_e2e_s is None:
            return None
        windows.append((r.server_received_s + r.server_ttft_s, r.server_received_s + r.server_e2e_s))
    return windows


def _client_windows(rows: list[RequestMeasurement]) -> list[tuple[float, float]]:
    """Each request's first and last token as the client saw them, from its repeat's start."""
    return [
        (r.sent_s + r.ttft_s, r.sent_s + r.ttft_s + r.decode_s)
        for r in rows
        if r.ttft_s is not None and r.decode_s is not None
    ]


def decode_batch(rows: list[RequestMeasurement]) -> float | None:
    """How many requests decoded at once, on average over each request's decode time: the overlap of every
    pair of decode windows (a window with itself included) over the windows' total length, each on the
    client's clock from when it was sent."""
    windows = _client_windows(rows)
    total = sum(end - start for start, end in windows)
    if len(windows) < len(rows) or total <= 0:
        return None
    overlap = sum(max(0.0, min(e1, e2) - max(s1, s2)) for s1, e1 in windows for s2, e2 in windows)
    return overlap / total

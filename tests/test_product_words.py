"""The product speaks of the product: no file of the checkout (code, docs, prompts, scripts, recordings) names the
machines or the tracker it was built with. The markers are those that were there once: the folders and variables of
a lent machine's calls, the words for its limits, and issue numbers of a tracker the repository does not ship."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MARKERS = re.compile(
    r"\.s4\b|\$OUT\b|CALL_SECONDS|dev_call|\blent\b|warm machine|device time|a call carries|GPU call"
    r"|the call's (?:end|limit)|\.\./shared/|\bcarr(?:y|ies|ying) `?\.|\bissue \d+|\bissues? #\d+|back to back on",
    re.IGNORECASE,
)
SKIPPED = {".git", ".dev"}  # git's own files; a folder that .git/info/exclude keeps out of the checkout


def checkout_files() -> list[Path]:
    """Every file of the checkout that git would track: its folders' files less what .gitignore names."""
    ignored = {
        line.strip().strip("/")
        for line in (REPO / ".gitignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    }
    found = []
    for path in REPO.rglob("*"):
        parts = path.relative_to(REPO).parts
        if path.is_file() and not any(
            part in SKIPPED or part in ignored or any(Path(part).match(pattern) for pattern in ignored)
            for part in parts
        ):
            found.append(path)
    return found


def test_no_file_names_the_machines_or_the_tracker_it_was_built_with() -> None:
    files = [p for p in checkout_files() if p != Path(__file__).resolve()]
    assert len(files) > 200  # the walk found the checkout
    hits = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # a picture
        for number, line in enumerate(text.splitlines(), 1):
            if found := MARKERS.search(line):
                hits.append(f"{path.relative_to(REPO)}:{number}: {found.group(0)!r}: {line.strip()[:120]}")
    assert not hits, "\n".join(hits)


def test_the_markers_catch_what_they_are_for() -> None:
    for line in (
        "carrying `.s4/c`",
        "results come back under `$OUT`",
        "CALL_SECONDS=590 eagle3.sh study",
        "bash dev_call1.sh",
        "on the lent H200",
        "before and after issue 41",
        "one call per step, back to back on the same warm machine",
        "1,555 s of device time",
        "facts from `../shared/reference/llamacpp.md`",
    ):
        assert MARKERS.search(line), line
    for line in (
        "a silent failure",
        "the study carries its verdict",
        "issued 4 requests",
        "the call returns",
    ):
        assert not MARKERS.search(line), line

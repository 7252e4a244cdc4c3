"""Write the copy-heavy built-in classes' prompt files from specsweep's own code, docs and release tables.

The work where n-gram and prompt-lookup drafting pays is text whose answer quotes its input: an edit of a given
function, an answer quoted from a given document, a summary of it, a reformatting of given records. These
classes are made from real text (never generated filler): specsweep's own functions, the paragraphs of its
tutorials and reference (not its evidence pages: what was measured where reads as a lab's notes, not as a
document a user quotes) and the SGLang release's flag records it keeps. Each task ends where its answer does: an instruct model stops on
its own, and the completion form (a base model continues text) ends on the class's stop sequence.

    make prompts      # .venv/bin/python maintainers/make_prompts.py [--out DIR]: rewrites sweep/probes/prompts/

The files it writes are committed: the prompts stay what they were when the figures were measured, whatever
the code and docs become, so they lag the tree on purpose (tests/test_datasets.py runs the generator on the
current tree into a temporary folder, so that it keeps working). Run it again on purpose, and say so where
figures are compared.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "sweep" / "probes" / "prompts"
EVIDENCE = ROOT / "docs" / "evidence"  # measurements with their dates and machines: not quoted
PER_FORM = 36  # as many as the other built-in classes hold, so that repeats x streams rarely need one twice
# Modules whose functions an edit copies, by import name: their files are found wherever a module lives.
SOURCES = (
    "sweep.analysis.evidence",
    "sweep.analysis.verdicts",
    "sweep.analysis.ab",
    "sweep.analysis.relaunch",
    "sweep.analysis.study_warnings",
    "sweep.core.stats",
    "sweep.answers.health",
    "sweep.space.parse",
    "sweep.run.plan",
    "sweep.search.surface",
    "sweep.run.confirm",
    "sweep.search.guided",
    "sweep.search.candidates",
    "sweep.model.doctor",
    "sweep.model.geometry",
    "sweep.model.draft",
    "sweep.search.costs",
)
RELEASE = "sweep/releases/tables/sglang-0.5.23.json"
FENCE = "```"
QUOTED = 700  # the longest paragraph asked for word for word, in characters (about 170 tokens)
RECORDS = 4  # flag records per reformatting: their table fits 256 tokens


def functions() -> Iterator[tuple[str, str]]:
    """Top-level functions of 6 to 16 lines (at most 640 characters: the copy fits 256 tokens) with a parameter
    to rename: (source, the parameter's name)."""
    for module in SOURCES:
        text = module_file(module).read_text(encoding="utf-8")
        for node in ast.parse(text).body:
            if not isinstance(node, ast.FunctionDef) or node.name.startswith("__"):
                continue
            source = ast.get_source_segment(text, node, padded=False) or ""
            params = [a.arg for a in node.args.args if len(a.arg) > 2 and a.arg not in ("self", "cls")]
            if (
                params
                and 6 <= source.count("\n") + 1 <= 16
                and len(source) <= 640
                and source.count(params[0]) >= 2
            ):
                yield source, params[0]


def sections() -> Iterator[tuple[str, str]]:
    """Doc sections' prose (their tables, lists and code left out), then the modules' docstrings, each cut to at
    most 2,400 characters at a paragraph's end, where 300 or more remain: (title, text)."""
    seen: set[str] = set()  # a page that opens as another does (the docs' index and the README) comes once
    for title, body in [*_doc_parts(), *_docstrings()]:
        kept: list[str] = []
        for paragraph in paragraphs(body):
            if len("\n\n".join([*kept, paragraph])) > 2400:
                break
            kept.append(paragraph)
        if len(prose := "\n\n".join(kept)) >= 300 and prose[:60] not in seen:
            seen.add(prose[:60])
            yield title, prose


def _doc_parts() -> Iterator[tuple[str, str]]:
    pages = [p for p in sorted((ROOT / "docs").rglob("*.md")) if not p.is_relative_to(EVIDENCE)]
    for path in [ROOT / "README.md", *pages]:
        text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
        for part in re.split(r"\n(?=#{1,3} )", text):
            title, _, body = part.partition("\n")
            yield title.lstrip("# ").strip(), body


def _docstrings() -> Iterator[tuple[str, str]]:
    for path in sorted((ROOT / "sweep").rglob("*.py")):
        docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
        if docstring:
            yield (
                f"{path.relative_to(ROOT)} (a module's docstring)",
                re.sub(r"```.*?```", "", docstring, flags=re.S),
            )


def paragraphs(body: str) -> list[str]:
    """Paragraphs of running text: not a table, a list, a heading, an image or markup."""
    return [
        p.strip()
        for p in body.split("\n\n")
        if len(p.strip()) >= 160 and not p.lstrip().startswith(("-", "|", "#", "1.", "!", "<", "*", ">"))
    ]


def flag_groups() -> Iterator[list[dict[str, object]]]:
    """The release's flags RECORDS at a time, each as a record of what the table says of it."""
    table = json.loads((ROOT / RELEASE).read_text(encoding="utf-8"))
    rows = [
        {
            "flag": names[0],
            "type": "bool"
            if spec["kind"] == "switch"
            else f"list of {spec['type']}"
            if spec["kind"] == "list"
            else spec["type"],
            "default": spec["default"],
            "choices": spec["choices"],
        }
        for spec in table.values()
        if (names := spec["names"])
    ]
    for start in range(0, len(rows) - RECORDS + 1, RECORDS):
        yield rows[start : start + RECORDS]


def edit() -> tuple[list[str], list[str]]:
    chat, completion = [], []
    for source, name in list(functions())[:PER_FORM]:
        new = f"{name}_value"
        chat.append(
            f"Here is a Python function:\n\n{FENCE}python\n{source}\n{FENCE}\n\nRename the parameter `{name}` to "
            f"`{new}` everywhere in it and keep every other line exactly as it is. Output only the code."
        )
        completion.append(  # the code first: no two prompts open alike
            f"{FENCE}python\n{source}\n{FENCE}\n\nThe same function with its parameter `{name}` renamed to "
            f"`{new}` and every other line as it was:\n\n{FENCE}python\n"
        )
    return chat, completion


ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")


def quote() -> tuple[list[str], list[str]]:
    chat, completion = [], []
    for index, (title, body) in enumerate(sections()):
        short = [p for p in paragraphs(body) if len(p) <= QUOTED]  # the quote fits 256 tokens
        for paragraph in short[index % 2 :][:1] or short[:1]:  # one a section
            opening = " ".join(paragraph.split()[:6])
            chat.append(
                f'Here is the section "{title}" of a tool\'s documentation:\n\n{body}\n\nQuote, word for word, '
                f'the whole paragraph that begins "{opening}". Output only the quoted paragraph.'
            )
            # Named by its place, not its opening: the opening's only earlier occurrence is the paragraph itself,
            # so what a base model copies after it is the paragraph (quoted in the instruction, the opening was
            # followed by a closing mark, and Gemma 3 270M wrote "." and stopped).
            place = ORDINALS[paragraphs(body).index(paragraph)]
            completion.append(
                f"{body}\n\nThe {place} paragraph of the section above, quoted in full:\n\n{opening}"
            )
    return chat[:PER_FORM], completion[:PER_FORM]


def summary() -> tuple[list[str], list[str]]:
    chat, completion = [], []
    for title, body in sections():
        chat.append(
            f'Summarize the section "{title}" of a tool\'s documentation below in three sentences, keeping its '
            f"terms.\n\n{body}"
        )
        completion.append(f"## {title}\n\n{body}\n\nIn short:")
    return chat[:PER_FORM], completion[:PER_FORM]


def reformat() -> tuple[list[str], list[str]]:
    chat, completion = [], []
    for group in list(flag_groups())[: PER_FORM * 2 : 2]:
        records = "\n".join(json.dumps(row) for row in group)
        header = "| flag | type | default | choices |\n|---|---|---|---|"
        chat.append(
            "Here are records of a server's command-line flags, one JSON object per line:\n\n"
            f"{records}\n\nWrite them as a Markdown table with the columns flag, type, default and choices, one "
            "row per record, copying every value exactly. Output only the table."
        )
        completion.append(
            f"Flag records (JSON lines):\n\n{records}\n\nThe same records as a Markdown table:\n\n{header}\n|"
        )
    return chat, completion


# Each class: how its prompts are made, and the stop sequence that ends the completion form's task.
CLASSES = {"edit": edit, "quote": quote, "summary": summary, "reformat": reformat}


def module_file(module: str) -> Path:
    """The source file of `module` (an import name), found as Python finds it."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise SystemExit(f"make_prompts: {module} is gone: name the module its functions moved to in SOURCES")
    return Path(spec.origin)


def write(out: Path, name: str, form: str, prompts: list[str]) -> None:
    lines = [json.dumps({"form": form, "prompt": p}, ensure_ascii=False) for p in prompts]
    (out / f"{name}.{form}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(
        f"{name}.{form}.jsonl: {len(prompts)} prompts, {sum(map(len, prompts)) // len(prompts)} characters each"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--out", type=Path, default=OUT, help="the folder to write (default: the built-in one)"
    )
    out = parser.parse_args(argv).out
    out.mkdir(parents=True, exist_ok=True)
    for name, make in CLASSES.items():
        chat, completion = make()
        write(out, name, "chat", chat)
        write(out, name, "completion", completion)


if __name__ == "__main__":
    main()

"""The documentation: the command reference is every command's own `--help`, and the README's links land."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import yaml

from sweep.cli import build_parser

REPO = Path(__file__).resolve().parents[1]


def hook_reference() -> str:
    spec = importlib.util.spec_from_file_location("cli_reference", REPO / "docs/_hooks/cli_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    page = (REPO / "docs/reference/commands.md").read_text()
    built: str = module.on_page_markdown(page, None, None, None)
    assert module.MARKER not in built
    return built


def test_the_command_reference_is_every_commands_help() -> None:
    built = hook_reference()
    commands = re.findall(r"^## specsweep (\S+)$", built, re.M)
    parser = build_parser()
    choices = next(
        a.choices for a in parser._actions if hasattr(a, "choices") and isinstance(a.choices, dict)
    )
    assert commands == list(choices)
    for name, command in choices.items():
        for action in command._actions:
            for option in action.option_strings:  # every option of every command is on the page
                assert option in built, (name, option)


def test_readme_links_and_the_site_navigation_name_pages_that_exist() -> None:
    readme = (REPO / "README.md").read_text()
    linked = re.findall(r"\]\(((?:docs/)[^)#]+)\)", readme)
    assert len(linked) >= 10
    for target in linked:
        assert (REPO / target).exists(), target
    assert len(readme.splitlines()) <= 60  # one screen: the rest is the site

    def pages(nav: object) -> list[str]:
        if isinstance(nav, str):
            return [nav]
        if isinstance(nav, list):
            return [p for item in nav for p in pages(item)]
        if isinstance(nav, dict):
            return [p for value in nav.values() for p in pages(value)]
        return []

    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    listed = pages(config["nav"])
    on_disk = sorted(str(p.relative_to(REPO / "docs")) for p in (REPO / "docs").rglob("*.md"))
    assert sorted(listed) == on_disk

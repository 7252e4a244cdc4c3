"""A released vLLM, read from its own source: the truth the vLLM adapter and simulator are held against.

vLLM's wheel holds its whole Python tree; it cannot run here (no GPU, no torch), so it is read, not imported,
with `ast`:

- **`vllm serve`'s flags.** `make_arg_parser` (`entrypoints/common/cli_args.py`) registers a few by hand, then
  one flag per field of `FrontendArgs` (and its base), then `EngineArgs.add_cli_args` (`engine/arg_utils.py`),
  whose `group.add_argument("--flag", **x_kwargs["field"])` names a field of the config class that
  `x_kwargs = get_kwargs(Class)` was made from. A field's annotation and default make the flag as
  `_compute_kwargs` makes it, in its order: a config dataclass or a dict takes JSON; `bool | str | None` an
  optional value; a bool is `--flag` / `--no-flag` (`BooleanOptionalAction`); a Literal gives choices (none
  where a plain str is also allowed); a list, tuple or set takes several values; then int, float, str.
- **`--speculative-config`'s fields**: `SpeculativeConfig`'s (`config/speculative.py`), each with its type,
  default, choices and the bound its pydantic `Field` sets (`gt`, `ge`).
- **metric names**: every `vllm:` string of the `v1` tree (a counter is exported with `_total` added).

Names the source computes at run time (a registry's choices, a factory's default) are kept as "any value". The
table of each release specsweep knows is committed under `releases/` (`python -m sweep.releases.vllm
write`); the conformance tests read the source again and require the same table.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from sweep.releases.flags import Kind, ReleaseFlag, add_flags, flag_of, flags_data
from sweep.releases.sources import Releases

ARG_UTILS = Path("vllm/engine/arg_utils.py")
VLLM = Releases("vllm", "0.34.0", ("0.34.0",), ARG_UTILS, "vllm/")
PINNED = VLLM.pinned
FRONTEND = Path("vllm/entrypoints/common/cli_args.py")
SPECULATIVE = Path("vllm/config/speculative.py")

# A type the release's argparse converts with (json: a JSON value; any: a type computed at run time).
Converts = Literal["int", "float", "str", "json"]
COLLECTIONS = ("list", "tuple", "set")
WRAPPERS = ("Annotated", "SkipValidation", "Optional", "Union", "ClassVar")


@dataclass(frozen=True)
class ConfigField:
    """One field of a config dataclass (`--speculative-config`'s), as its annotation declares it."""

    type: str  # int, float, str, bool, json, list
    choices: tuple[Any, ...] | None = None
    default: Any = None
    low: float | None = None  # the least value its Field allows (gt counted as the next int)


@dataclass(frozen=True)
class Release:
    """What one vLLM release declares: its serve flags, its speculative config's fields, its metric names."""

    flags: dict[str, ReleaseFlag]
    speculative: dict[str, ConfigField]
    methods: tuple[str, ...]  # `SpeculativeMethod`'s options, its aliases expanded
    metrics: tuple[str, ...]


# --- the source tree's declarations ------------------------------------------------------------------------


class Tree:
    """The release's modules, parsed once: its classes by name and its module-level type aliases."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.classes: dict[str, ast.ClassDef] = {}
        self.aliases: dict[str, ast.expr] = {}
        for path in sorted((root / "vllm").rglob("*.py")):
            module = ast.parse(path.read_text(encoding="utf-8"))
            for node in module.body:
                if isinstance(node, ast.ClassDef):
                    self.classes.setdefault(node.name, node)
                elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                    target = node.targets[0]
                    if isinstance(target, ast.Name) and _is_type(node.value):
                        self.aliases.setdefault(target.id, node.value)
                elif (
                    isinstance(node, ast.AnnAssign)
                    and isinstance(node.target, ast.Name)
                    and node.value
                    and _is_type(node.value)  # `X: TypeAlias = Literal[...]`
                ):
                    self.aliases.setdefault(node.target.id, node.value)

    def fields(self, name: str) -> dict[str, ast.AnnAssign]:
        """A config class's annotated fields, its bases' first (as `dataclasses.fields` orders them)."""
        node = self.classes.get(name)
        if node is None:
            return {}
        found: dict[str, ast.AnnAssign] = {}
        for base in node.bases:
            if isinstance(base, ast.Name):
                found |= self.fields(base.id)
        for item in node.body:
            if (
                isinstance(item, ast.AnnAssign)
                and isinstance(item.target, ast.Name)
                and not _is_classvar(item.annotation)
            ):
                found[item.target.id] = item
        return found

    def is_config(self, name: str) -> bool:
        """Whether a name is a dataclass of the release (a config read from JSON on the command line)."""
        node = self.classes.get(name)
        return node is not None and any(
            (_name(d) or "").split(".")[-1] in ("config", "dataclass") for d in node.decorator_list
        )


def _is_type(value: ast.expr) -> bool:
    return isinstance(value, ast.Subscript) and _name(value.value) in ("Literal", "typing.Literal")


def _is_classvar(annotation: ast.expr) -> bool:
    target = annotation.value if isinstance(annotation, ast.Subscript) else annotation
    return (_name(target) or "").endswith("ClassVar")


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _name(node.value)
        return f"{base}.{node.attr}" if base else node.attr
    if isinstance(node, ast.Call):
        return _name(node.func)
    return None


@dataclass
class Hints:
    """An annotation's members, unwrapped as `get_type_hints` unwraps Optional and unions."""

    names: set[str]
    literals: list[Any]
    element: str | None = None  # a collection's element type


def hints(tree: Tree, annotation: ast.expr, seen: frozenset[str] = frozenset()) -> Hints:
    found = Hints(set(), [])
    for member in _members(annotation):
        if isinstance(member, ast.Constant):
            found.names.add("None" if member.value is None else type(member.value).__name__)
            continue
        head = (_name(member.value) if isinstance(member, ast.Subscript) else _name(member)) or ""
        head = head.split(".")[-1]
        if isinstance(member, ast.Subscript) and head == "Literal":
            values = member.slice.elts if isinstance(member.slice, ast.Tuple) else [member.slice]
            found.names.add("Literal")
            for value in values:  # a Literal may hold other Literal aliases: `Literal["eagle", MTPTypes]`
                if isinstance(value, ast.Constant):
                    found.literals.append(value.value)
                elif (alias := _name(value)) in tree.aliases and alias not in seen:
                    found.literals += hints(tree, tree.aliases[alias], seen | {alias}).literals
        elif isinstance(member, ast.Subscript) and head in COLLECTIONS:
            found.names.add(head)
            inner = member.slice.elts[0] if isinstance(member.slice, ast.Tuple) else member.slice
            element = hints(tree, inner, seen)
            found.element = next((t for t in ("int", "float") if element.names == {t}), "str")
        elif isinstance(member, ast.Subscript) and head in ("dict", "Mapping"):
            found.names.add("dict")
        elif head in tree.aliases and head not in seen:
            aliased = hints(tree, tree.aliases[head], seen | {head})
            found.names |= aliased.names
            found.literals += aliased.literals
        elif head in ("int", "float", "str", "bool", "dict"):
            found.names.add(head)
        elif tree.is_config(head):
            found.names.add("config")
        else:
            found.names.add("other")  # an enum or a class: argparse takes its text
    return found


def _members(annotation: ast.expr) -> Iterator[ast.expr]:
    """`A | B | None`, `Optional[A]`, `Annotated[A, ...]`: each member type."""
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        yield from _members(annotation.left)
        yield from _members(annotation.right)
    elif isinstance(annotation, ast.Subscript) and (_name(annotation.value) or "").split(".")[-1] in WRAPPERS:
        inner = annotation.slice
        head = (_name(annotation.value) or "").split(".")[-1]
        parts = inner.elts if isinstance(inner, ast.Tuple) else [inner]
        for part in parts[:1] if head == "Annotated" else parts:
            yield from _members(part)
        if head == "Optional":
            yield ast.Constant(None)
    elif isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        yield from _members(ast.parse(annotation.value, mode="eval").body)  # a string annotation
    else:
        yield annotation


def default_of(field: ast.AnnAssign) -> tuple[Any, float | None]:
    """A field's default where the source states it as a literal (None where it is computed), and the least
    value its pydantic Field allows."""
    value, low = field.value, None
    if isinstance(value, ast.Call) and (_name(value.func) or "").split(".")[-1] in ("Field", "field"):
        keywords = {k.arg: k.value for k in value.keywords if k.arg}
        for bound, step in (("ge", 0), ("gt", 1)):
            if bound in keywords:
                bound_value = _literal(keywords[bound])
                low = float(bound_value) + step if isinstance(bound_value, int | float) else None
        value = keywords.get("default")
    return _literal(value), low


def flag_from_field(tree: Tree, names: tuple[str, ...], field: ast.AnnAssign) -> ReleaseFlag:
    """The flag `_compute_kwargs` makes of a field, in its order of cases."""
    found = hints(tree, field.annotation)
    default, _ = default_of(field)
    dest = names[0].lstrip("-").replace("-", "_")
    members = found.names - {"None"}
    if "config" in members:
        return ReleaseFlag(dest, names, "value", "json", None, default)
    if members == {"bool", "str"}:
        return ReleaseFlag(dest, names, "optional", "str", None, default)
    if "bool" in members:
        return ReleaseFlag(dest, names, "toggle", "str", None, default)
    if "Literal" in members:
        literal = _converts(type(found.literals[0]).__name__) if found.literals else "str"
        choices = None if "str" in members else tuple(sorted(found.literals))
        return ReleaseFlag(dest, names, "value", literal, choices, default)
    if members & set(COLLECTIONS):
        return ReleaseFlag(dest, names, "list", _converts(found.element or "str"), None, default)
    for simple in ("int", "float"):
        if simple in members:
            return ReleaseFlag(dest, names, "value", simple, None, default)
    converts: Converts = "json" if "dict" in members and members <= {"dict"} else "str"
    return ReleaseFlag(dest, names, "value", converts, None, default)


def _converts(name: str) -> Converts:
    return name if name in ("int", "float") else "str"  # type: ignore[return-value]


# --- the flags, the speculative config, the metrics ---------------------------------------------------------


def read_release(root: Path) -> Release:
    tree = Tree(root)
    flags = _frontend_flags(tree) | _engine_flags(tree)
    methods = tuple(hints(tree, tree.aliases["SpeculativeMethod"]).literals)
    return Release(flags, _speculative_fields(tree), methods, _metric_names(root))


def _frontend_flags(tree: Tree) -> dict[str, ReleaseFlag]:
    """`make_arg_parser`'s own flags, then one per `FrontendArgs` field (`--field-name`)."""
    module = ast.parse((tree.root / FRONTEND).read_text(encoding="utf-8"))
    make = next(n for n in ast.walk(module) if isinstance(n, ast.FunctionDef) and n.name == "make_arg_parser")
    flags = {f.names[0].lstrip("-"): f for f in map(_explicit_flag, _add_argument_calls(make)) if f}
    for name, field in tree.fields("FrontendArgs").items():
        flag = flag_from_field(tree, (f"--{name.replace('_', '-')}",), field)
        flags[flag.names[0].lstrip("-")] = flag
    return flags


def _engine_flags(tree: Tree) -> dict[str, ReleaseFlag]:
    """`EngineArgs.add_cli_args` and `AsyncEngineArgs.add_cli_args`: each flag of a config's field, or stated."""
    module = ast.parse((tree.root / ARG_UTILS).read_text(encoding="utf-8"))
    flags: dict[str, ReleaseFlag] = {}
    for function in ast.walk(module):
        if not (isinstance(function, ast.FunctionDef) and function.name == "add_cli_args"):
            continue
        sources = _kwargs_sources(function)
        for call in _add_argument_calls(function):
            names = tuple(
                a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
            )
            spread, overrides = _unpack(next((k.value for k in call.keywords if k.arg is None), None))
            field = _spread_field(tree, sources, spread) if spread is not None else None
            flag = flag_from_field(tree, names, field) if field else _explicit_flag(call)
            if flag and "default" in overrides:  # `**{**x_kwargs["field"], "default": None}`
                flag = dataclasses.replace(flag, default=_literal(overrides["default"]))
            if flag:
                flags[flag.names[0].lstrip("-")] = flag
    return flags


def _unpack(spread: ast.expr | None) -> tuple[ast.expr | None, dict[str, ast.expr]]:
    """`**x_kwargs["field"]`, or `**{**x_kwargs["field"], "default": None}`: the field's kwargs and what the
    call writes over them."""
    if not isinstance(spread, ast.Dict):
        return spread, {}
    inner = next((v for k, v in zip(spread.keys, spread.values, strict=True) if k is None), None)
    overrides = {
        str(k.value): v
        for k, v in zip(spread.keys, spread.values, strict=True)
        if isinstance(k, ast.Constant)
    }
    return inner, overrides


def _literal(node: ast.expr | None) -> Any:
    """A value the source states as a literal; None where it is computed."""
    try:
        return None if node is None else ast.literal_eval(node)
    except ValueError:
        return None


def _add_argument_calls(function: ast.FunctionDef) -> Iterator[ast.Call]:
    for node in ast.walk(function):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"
        ):
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant) and str(first.value).startswith("--"):
                yield node


def _kwargs_sources(function: ast.FunctionDef) -> dict[str, str | tuple[str, str]]:
    """`x_kwargs = get_kwargs(Class)` (a class) and `x_kwargs = get_kwargs(Class)["field"]` (one field)."""
    found: dict[str, str | tuple[str, str]] = {}
    for node in ast.walk(function):
        if not (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)):
            continue
        value, field = node.value, None
        if isinstance(value, ast.Subscript) and isinstance(key := value.slice, ast.Constant):
            value, field = value.value, str(key.value)
        if isinstance(value, ast.Call) and _name(value.func) == "get_kwargs" and value.args:
            config = _name(value.args[0]) or ""
            found[node.targets[0].id] = (config, field) if field else config
    return found


def _spread_field(
    tree: Tree, sources: dict[str, str | tuple[str, str]], spread: ast.expr
) -> ast.AnnAssign | None:
    """The config field behind `**x_kwargs["field"]` (or `**x_kwargs` of one field)."""
    if isinstance(spread, ast.Subscript) and isinstance(spread.value, ast.Name):
        source = sources.get(spread.value.id)
        if isinstance(source, str) and isinstance(spread.slice, ast.Constant):
            return tree.fields(source).get(str(spread.slice.value))
    if isinstance(spread, ast.Name) and isinstance(source := sources.get(spread.id), tuple):
        return tree.fields(source[0]).get(source[1])
    return None


def _explicit_flag(call: ast.Call) -> ReleaseFlag | None:
    """A flag whose kwargs are written out: its action, type, choices and default."""
    names = tuple(a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str))
    if not names:
        return None
    keywords = {k.arg: k.value for k in call.keywords if k.arg}
    given = keywords.get("action")
    action = str(given.value) if isinstance(given, ast.Constant) else _name(given) if given else None
    default = _literal(keywords.get("default"))
    dest = names[0].lstrip("-").replace("-", "_")
    if action in ("store_true", "store_false"):
        return ReleaseFlag(dest, names, "switch", "str", None, default)
    if action and action.endswith("BooleanOptionalAction"):
        return ReleaseFlag(dest, names, "toggle", "str", None, default)
    converts = _converts(_name(keywords["type"]) or "str") if "type" in keywords else "str"
    choices = keywords.get("choices")
    listed = tuple(ast.literal_eval(choices)) if isinstance(choices, ast.List | ast.Tuple) else None
    nargs = keywords.get("nargs")
    kind: Kind = "list" if isinstance(nargs, ast.Constant) and nargs.value in ("+", "*") else "value"
    return ReleaseFlag(dest, names, kind, converts, listed, default)


def _speculative_fields(tree: Tree) -> dict[str, ConfigField]:
    found = {}
    for name, field in tree.fields("SpeculativeConfig").items():
        kind = hints(tree, field.annotation)
        default, low = default_of(field)
        members = kind.names - {"None"}
        literal = "Literal" in members
        simple = next((t for t in ("bool", "int", "float") if t in members), None)
        type_ = (
            "json"
            if members & {"config", "dict"}
            else "list"
            if members & set(COLLECTIONS)
            else simple or "str"
        )
        choices = tuple(kind.literals) if literal and not members & {"str", "other"} else None
        found[name] = ConfigField(type_, choices, default, low)
    return found


def _metric_names(root: Path) -> tuple[str, ...]:
    names = set()
    for path in (root / "vllm" / "v1").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
                if text.startswith("vllm:") and text[5:].replace("_", "").isalnum():
                    names.add(text)
    return tuple(sorted(names))


# --- the committed tables -------------------------------------------------------------------------------------


def table_json(release: Release) -> str:
    data = {
        "flags": flags_data(release.flags),
        "speculative_config": {k: asdict(release.speculative[k]) for k in sorted(release.speculative)},
        "methods": list(release.methods),
        "metrics": list(release.metrics),
    }
    return json.dumps(data, indent=1, sort_keys=True, default=str) + "\n"


def load_table(version: str = PINNED) -> Release:
    data = VLLM.table(version)

    def field(row: dict[str, Any]) -> ConfigField:
        choices = None if row["choices"] is None else tuple(row["choices"])
        return ConfigField(row["type"], choices, row["default"], row["low"])

    return Release(
        {k: flag_of(v) for k, v in data["flags"].items()},
        {k: field(v) for k, v in data["speculative_config"].items()},
        tuple(data["methods"]),
        tuple(data["metrics"]),
    )


CONVERTERS: dict[str, Callable[[str], Any]] = {"int": int, "float": float, "str": str, "json": json.loads}


def release_parser(
    version: str = PINNED, add_help: bool = True, description: str | None = None
) -> argparse.ArgumentParser:
    """`vllm serve`'s parser as the table has it (every flag, alias, type, choice and default; the model as the
    positional `model_tag`); `add_help=False` for a caller that spells `--help` as vLLM does (`--help=all`)."""
    parser = argparse.ArgumentParser(
        prog="vllm serve", allow_abbrev=False, add_help=add_help, description=description
    )
    parser.add_argument("model_tag", nargs="?")
    add_flags(parser, load_table(version).flags.values(), CONVERTERS, switch_default=bool)
    return parser


def main(argv: list[str]) -> int:
    """`python -m sweep.releases.vllm write`: regenerate the committed tables from the releases."""
    if argv != ["write"]:
        print("usage: python -m sweep.releases.vllm write", file=sys.stderr)
        return 2
    for version in VLLM.tabled:
        release = read_release(VLLM.source_root(version))
        VLLM.table_path(version).write_text(table_json(release), encoding="utf-8")
        counts = f"{len(release.flags)} flags, {len(release.speculative)} speculative-config fields, "
        counts += f"{len(release.methods)} methods"
        print(f"vLLM {version}: {counts}, {len(release.metrics)} metrics -> {VLLM.table_path(version)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

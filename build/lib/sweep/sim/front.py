"""Which engine a simulator command line speaks: `vllm serve MODEL ...` is vLLM's front end (`vllm.py`), anything
else SGLang's (`sglang_server.py`). Both serve the engine-neutral core (`core.py`) and the same performance model."""

from __future__ import annotations

from sweep.sim import sglang_server, vllm


def main(argv: list[str]) -> int:
    if argv[:1] == ["vllm"]:
        return vllm.main(argv[1:])
    return sglang_server.main(argv)

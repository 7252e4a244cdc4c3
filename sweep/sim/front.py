"""Which engine a simulator command line speaks: `vllm serve MODEL ...` is vLLM's front end (`vllm.py`), anything
else SGLang's (`server.py`). Both serve the same performance model."""

from __future__ import annotations

from sweep.sim import server, vllm


def main(argv: list[str]) -> int:
    if argv[:1] == ["vllm"]:
        return vllm.main(argv[1:])
    return server.main(argv)

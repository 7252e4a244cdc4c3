"""Can a vLLM wheel's compiled operators load over a given torch? Compares the torch symbols each of the vLLM
wheel's shared objects needs with those the torch wheel's libraries export (`nm -D`), no GPU needed.

    python3 maintainers/vllm_abi_check.py VLLM_WHEEL TORCH_WHEEL

Fetch the wheels with pip first, e.g. `pip download --no-deps vllm==0.34.0 -d wheels/vllm` and `pip download
--no-deps torch==2.11.0 --only-binary :all: --python-version 3.12 --platform manylinux_2_28_x86_64 -d
wheels/torch` (the torch your GPU host has). A vLLM built on torch's stable C ABI (`aoti_torch_*`, `torch_*`) needs only
those; one built on the C++ API (`c10::`, `at::`) needs the exact torch it was built with. Exit 0 where every
needed symbol is exported, 1 where some are missing (they are listed), 2 on bad input.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

TORCH_SYMBOL = re.compile(r"^(aoti_torch|torch_|_ZN3c10|_ZN2at|_ZN5torch|_ZNK3c10|_ZNK2at)")
TORCH_LIBS = ("libc10.so", "libc10_cuda.so", "libtorch.so", "libtorch_cpu.so", "libtorch_cuda.so")


def symbols(path: Path, defined: bool) -> set[str]:
    flag = "--defined-only" if defined else "--undefined-only"
    out = subprocess.run(["nm", "-D", flag, str(path)], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.split()}


def unpacked(wheel: Path, wanted: Callable[[str], bool], into: Path) -> list[Path]:
    with zipfile.ZipFile(wheel) as z:
        names = [n for n in z.namelist() if wanted(n)]
        for n in names:
            z.extract(n, into)
    return [into / n for n in names]


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not all(Path(a).is_file() for a in argv):
        print(
            "abi_check: give the vLLM wheel and the torch wheel (pip download --no-deps ...)", file=sys.stderr
        )
        return 2
    vllm, torch = map(Path, argv)
    with tempfile.TemporaryDirectory() as tmp:
        libs = unpacked(
            torch, lambda n: n.startswith("torch/lib/") and n.split("/")[-1] in TORCH_LIBS, Path(tmp)
        )
        exported = set().union(*(symbols(p, defined=True) for p in libs))
        missing_any = False
        for so in sorted(unpacked(vllm, lambda n: n.endswith(".so"), Path(tmp) / "v")):
            needed = {s for s in symbols(so, defined=False) if TORCH_SYMBOL.match(s)}
            missing = sorted(needed - exported)
            missing_any |= bool(missing)
            print(f"{so.relative_to(Path(tmp) / 'v')}: {len(needed)} torch symbols, {len(missing)} missing")
            for s in missing[:10]:
                print(f"    {s}")
    print(f"{torch.name}: {len(exported)} symbols exported by {', '.join(p.name for p in libs)}")
    return 1 if missing_any else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

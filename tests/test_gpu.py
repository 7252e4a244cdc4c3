"""The GPU code paths, from what an H200 recorded (4 Dec) (CI has no GPU): NVML's readings around one llama-server
launch with CUDA (`tests/gpu/nvml-h200.json`: before, at ready, after three requests, after exit, with the
server's process ids) and that server's log at -lv 4 (`tests/logs/llamacpp-cuda-h200.log`); and this machine's
own answer, which has no NVIDIA driver."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pynvml  # type: ignore[import-untyped]
import pytest

from sweep.analysis import study_verdicts
from sweep.cli import main
from sweep.engines import LlamaCppEngine, ServerSetup
from sweep.engines.llamacpp import facts_from_log
from sweep.engines.llamacpp_bundle import gemma_model
from sweep.launch.gpu import (
    BY_DEVICE,
    BY_PID,
    SAMPLE_S,
    GpuWatch,
    NvmlSource,
    ReadFailed,
    Reading,
    combine,
    open_source,
)
from sweep.model.doctor import diagnose, sizing
from sweep.outputs.compare import Column, rows
from sweep.outputs.console import gpu_lines
from sweep.outputs.dashboard.hardware import gpu_panel
from sweep.records import GpuUse, TrialRecord
from sweep.storage import Study, TrialView

HERE = Path(__file__).parent
RECORDED = json.loads((HERE / "gpu" / "nvml-h200.json").read_text())
CUDA_LOG = (HERE / "logs" / "llamacpp-cuda-h200.log").read_text()
DRAFT_LOG = (HERE / "logs" / "llamacpp-cuda-h200-draft.log").read_text()


class Recorded:
    """NVML's readings as the H200 gave them, in the order it gave them (the last one again after the end)."""

    def __init__(self, labels: list[str]) -> None:
        by_label = {row["label"]: row for row in RECORDED["rows"]}
        self.rows = [by_label[label] for label in labels]
        self.driver = RECORDED["driver"]
        self.pids = set(self.rows[-1]["pids"]) or {0}

    def read(self) -> Reading:
        row = self.rows.pop(0) if len(self.rows) > 1 else self.rows[0]
        return Reading.from_dict(row["reading"])


def watched(source: Recorded | str, pids: set[int]) -> GpuUse:
    watch = GpuWatch(source, lambda: pids)
    watch.before_launch()
    watch.at_ready()
    watch.sample()  # one reading while probed, as the thread takes them
    return watch.use()


def test_the_servers_memory_by_its_process_ids() -> None:
    """At ready llama-server's process (pid 5155 there) held 874 MiB, 876 MiB after its requests: what
    nvidia-smi showed by hand in the first GPU run."""
    source = Recorded(["before", "ready", "after request 1"])
    use = watched(source, {5155})
    assert use.devices == ("NVIDIA H200",) and use.driver == "580.159.04" and use.total_mib == 143771.0
    assert (use.ready_mib, use.peak_mib, use.how) == (874.0, 876.0, BY_PID)
    assert use.describe() == (
        "NVIDIA H200 (driver 580.159.04, 143771 MiB); the server held 874 MiB at ready, 876 MiB at its peak "
        "(by the server's process ids)"
    )


def test_where_nvml_lists_none_of_the_servers_processes_the_devices_growth_stands_in() -> None:
    """A container whose process ids NVML does not see: the devices' memory in use (1497.9 MiB at ready)
    less what was in use before the launch (615.1 MiB), said so."""
    use = watched(Recorded(["before", "ready", "after request 2"]), {4242})
    assert use.how == BY_DEVICE and round(use.ready_mib or 0, 1) == round(1497.875 - 615.0625, 1)


def test_without_a_gpu_the_record_says_why() -> None:
    source = open_source()
    assert isinstance(source, str) and source.startswith("no NVIDIA driver or GPU")
    use = watched(source, set())
    assert not use.present and use.reason == source and use.describe() == f"no GPU ({source})"
    assert GpuUse.from_dict(use.to_dict()) == use


class LostAfter(Recorded):
    """The recorded readings, then the GPU lost (NVML's own error) from the `lost_at`-th reading on."""

    def __init__(self, labels: list[str], lost_at: int) -> None:
        super().__init__(labels)
        self.left = lost_at

    def read(self) -> Reading:
        self.left -= 1
        if self.left < 0:
            raise ReadFailed(str(pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)))
        return super().read()


class LostNvml:
    """NVML's calls as the binding makes them, on a GPU that fell off the bus: the device is listed, reading
    its memory fails with NVML's own error."""

    NVMLError = pynvml.NVMLError

    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlSystemGetDriverVersion(self) -> str:
        return "580.159.04"

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> Any:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)


def test_a_gpu_lost_while_measured_is_a_missed_reading_not_a_failed_trial() -> None:
    """NVML's error at any reading (before the launch, at ready, in the sampling thread) becomes the record's
    reason; the readings taken before it are kept."""
    with pytest.raises(ReadFailed, match="GPU is lost"):
        NvmlSource(LostNvml()).read()
    late = watched(LostAfter(["before", "ready"], lost_at=2), {5155})
    assert late.present and late.ready_mib == 874.0 and late.peak_mib == 874.0
    assert late.reason == "NVML failed to read the GPUs (GPU is lost)" and late.describe().endswith(
        late.reason
    )
    early = watched(LostAfter(["before"], lost_at=0), {5155})
    assert not early.present and early.describe() == "no GPU (NVML failed to read the GPUs (GPU is lost))"
    source = LostAfter(["before", "ready"], lost_at=2)
    watch = GpuWatch(source, lambda: {5155})
    watch.before_launch()
    watch.at_ready()
    with watch:  # the sampling thread meets the lost GPU and keeps going until the probes end
        deadline = time.monotonic() + 60
        while source.left > -2 and time.monotonic() < deadline:  # two samples after the GPU was lost
            time.sleep(SAMPLE_S / 4)
        assert source.left <= -2, "the sampling thread stopped reading"
        assert watch._thread is not None and watch._thread.is_alive()
    assert watch.use().reason.startswith("NVML failed")
    assert combine(late, GpuUse(("NVIDIA H200",), "580", 1.0, 1.0, 2.0, BY_PID)).reason == late.reason


def test_several_servers_of_one_trial_keep_the_first_ready_and_the_highest_peak() -> None:
    first = GpuUse(("NVIDIA H200",), "580", 143771.0, 874.0, 880.0, BY_PID)
    later = GpuUse(("NVIDIA H200",), "580", 143771.0, 870.0, 944.0, BY_PID)
    assert combine(None, first) == first
    assert (combine(first, later).ready_mib, combine(first, later).peak_mib) == (874.0, 944.0)


def test_the_cuda_log_says_where_the_model_went() -> None:
    facts = facts_from_log(CUDA_LOG)
    assert facts.devices == [
        "CUDA0: NVIDIA H200 (143155 MiB)",
        "CPU: Intel(R) Xeon(R) Processor (128868 MiB)",
    ]
    assert (facts.offloaded_layers, facts.offloadable_layers) == (19, 19) and not facts.offload_problem
    assert facts.gpu_buffers == {"model": 235.2, "kv": 27.0, "compute": 22.02}
    assert facts.buffers["CPU_Mapped"] == {"model": 170.0}  # the token embeddings stay in host memory
    assert [(c["mib"], c["cells"], c["layers"]) for c in facts.kv_caches] == [
        (12.0, 4096, 3),
        (15.0, 1024, 15),
    ]


def test_the_doctor_holds_the_real_gguf_against_the_cuda_servers_caches() -> None:
    """Gemma 3 270M: one KV head of 256, K and V at f16, 1024 B a layer and token: 4096 cells of the 3 full
    layers are 12 MiB, 1024 cells of the 15 window layers 15 MiB, as logged."""
    engine = LlamaCppEngine(ServerSetup([], str(gemma_model())))
    found = diagnose(gemma_model(), "f16", facts_from_log(CUDA_LOG), engine.doctor_rules({}))
    caches = [f for f in found.findings if f.what.startswith("KV cache")]
    assert [(f.what, f.ok) for f in caches] == [
        ("KV cache 12.00 MiB for 4096 cells of 3 layers", True),
        ("KV cache 15.00 MiB for 1024 cells of 15 layers", True),
    ]
    wrong = diagnose(gemma_model(), "q8_0", facts_from_log(CUDA_LOG), engine.doctor_rules({}))
    assert any("x2.00" in f.detail for f in wrong.findings if f.what.startswith("KV cache") and not f.ok)


def test_a_draft_model_keeps_its_own_cache_beside_the_pool() -> None:
    """Gemma 3 270M drafting for itself on the H200 (`draft-simple`, `-md` the same GGUF): llama-server gives the
    draft its own context, whose caches (6 + 15 MiB) sit beside the target's, so the target's 2048 cells are
    what ctx-size asks and the pool is as the files predict. Held as one pool for both (SGLang's way), it would
    read "should be 1024": the false alarm the first GPU profile run raised."""
    facts = facts_from_log(DRAFT_LOG)
    assert facts.kv_pool_tokens == 2048 and facts.gpu_buffers["kv"] == 42.0
    assert [(c["mib"], c["cells"]) for c in facts.kv_caches] == [(6.0, 2048), (15.0, 1024)] * 2
    engine = LlamaCppEngine(ServerSetup([], str(gemma_model())))
    params = {"ctx-size": 2048, "spec-type": "draft-simple", "spec-draft-model": str(gemma_model())}
    plan = engine.plan(params)
    assert plan.speculative and not plan.draft_in_pool
    rules = engine.doctor_rules(plan.params)
    pool = [
        f
        for f in sizing(str(gemma_model()), "f16", facts, rules, plan.draft_in_pool) or []
        if "pool" in f.what
    ]
    assert [(f.what, f.ok) for f in pool] == [("KV pool 2048 tokens", True)]
    shared = sizing(str(gemma_model()), "f16", facts, rules, True) or []
    assert any(f.what == "KV pool 2048 tokens, should be 1024" and not f.ok for f in shared)


def test_the_doctor_reads_the_draft_servers_log_as_two_caches(capsys: pytest.CaptureFixture[str]) -> None:
    """`specsweep doctor --engine llamacpp --log` with the launch's draft flags: the draft's bytes are what it
    would add beside the pool, not a share of it."""
    gemma = str(gemma_model())
    log = str(HERE / "logs" / "llamacpp-cuda-h200-draft.log")
    flags = ["--", "--spec-type", "draft-simple", "--spec-draft-model", gemma]
    assert main(["doctor", gemma, "--engine", "llamacpp", "--log", log, *flags]) == 0
    out = capsys.readouterr().out
    assert "3072 B (the draft's 3072 B more when speculating)" in out
    assert "ok: KV pool 2048 tokens: as the files predict (2048)" in out and "PROBLEM" not in out


def record(number: int, params: dict[str, Any], use: GpuUse) -> TrialRecord:
    return TrialRecord(number, params, facts=facts_from_log(CUDA_LOG), gpu=use)


def test_report_compare_and_dashboard_show_the_gpu_memory() -> None:
    base = record(
        0, {"spec-type": "none"}, GpuUse(("NVIDIA H200",), "580.159.04", 143771.0, 874.0, 892.0, BY_PID)
    )
    spec = record(
        5, {"spec-type": "ngram-mod"}, GpuUse(("NVIDIA H200",), "580.159.04", 143771.0, 926.0, 944.0, BY_PID)
    )
    views = [TrialView(0, "COMPLETE", "baseline", base), TrialView(5, "COMPLETE", "search", spec)]
    lines = gpu_lines(Study(views, []), study_verdicts(Study(views, [])).recommendations)
    assert (
        lines[1]
        == "GPU: NVIDIA H200 (driver 580.159.04, 143771 MiB); the server's memory (by the server's process ids):"
    )
    assert lines[2].startswith(
        "  baseline (trial 0): 874 MiB at ready, 892 MiB at its peak; its buffers on the GPU:"
    )
    table = dict(rows([Column("baseline", base), Column("ngram-mod", spec)]))
    assert table["GPU memory at ready / peak (MiB)"] == ["874 / 892", "926 / 944"]
    assert table["buffers on the GPU: model + KV + compute (MiB)"] == ["235 + 27 + 22", "235 + 27 + 22"]
    panel = gpu_panel(views)
    assert panel.figure is not None and len(panel.figure.data) == 5  # ready, peak, model, KV, compute
    none = gpu_panel(
        [TrialView(0, "COMPLETE", "baseline", record(0, {}, GpuUse(reason="NVML lists no GPU")))]
    )
    assert none.figure is None and "No GPU was read: NVML lists no GPU." in none.html

"""The machine's GPUs while a server runs: what they are and what the server held on them, through NVML (the
library nvidia-smi reads, by its Python binding `nvidia-ml-py`).

A sweep opens NVML once (`open_source`: a reason instead where there is no driver or no GPU, so every record
says "no GPU" and why). Around each launch a `GpuWatch` reads the devices before the server starts, at ready,
and every `SAMPLE_S` while it is probed, keeping the peak. The server's memory is what NVML lists for the
processes of its process group, on every device; where NVML lists none of them while the devices' memory grew
(a container whose process ids NVML does not see), it is the devices' memory in use less what was in use before
the launch, and `how` says which of the two it is. A reading that fails once the sweep runs (a GPU fallen off the
bus, a driver reset) is no reading, said in the record's `reason`: never a failed trial, never a silent thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from sweep.records import GpuUse

SAMPLE_S = 0.25
MIB = 1024**2
BY_PID = "by the server's process ids"
BY_DEVICE = "the devices' memory in use less what was in use before the launch"


@dataclass(frozen=True)
class Reading:
    """One NVML reading of every device: names, total and used MiB, and the MiB each process id holds."""

    names: tuple[str, ...]
    total_mib: tuple[float, ...]
    used_mib: tuple[float, ...]
    processes: Mapping[int, float] = field(default_factory=dict)

    def held_by(self, pids: set[int]) -> float | None:
        """What these processes hold on every device (None: NVML lists none of them)."""
        held = [mib for pid, mib in self.processes.items() if pid in pids]
        return sum(held) if held else None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Reading:
        """A reading as recorded (JSON keys are strings)."""
        processes = {int(pid): float(mib) for pid, mib in dict(data.get("processes", {})).items()}
        return cls(tuple(data["names"]), tuple(data["total_mib"]), tuple(data["used_mib"]), processes)


class ReadFailed(Exception):
    """NVML could not read the devices (its own error, in its words)."""


class Source(Protocol):
    """Where readings come from: NVML on a GPU machine, recorded readings in tests. `read` raises
    `ReadFailed` where the devices cannot be read."""

    driver: str

    def read(self) -> Reading: ...


class NvmlSource:
    """The driver's own readings (`nvmlDeviceGetMemoryInfo`, the compute and graphics processes per device)."""

    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml
        self.handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
        self.driver = _text(nvml.nvmlSystemGetDriverVersion())

    def read(self) -> Reading:
        try:
            return self._read()
        except self.nvml.NVMLError as exc:
            raise ReadFailed(str(exc)) from exc

    def _read(self) -> Reading:
        names: list[str] = []
        totals: list[float] = []
        used: list[float] = []
        processes: dict[int, float] = {}
        for handle in self.handles:
            memory = self.nvml.nvmlDeviceGetMemoryInfo(handle)
            names.append(_text(self.nvml.nvmlDeviceGetName(handle)))
            totals.append(memory.total / MIB)
            used.append(memory.used / MIB)
            for reader in (
                self.nvml.nvmlDeviceGetComputeRunningProcesses,
                self.nvml.nvmlDeviceGetGraphicsRunningProcesses,
            ):
                for process in reader(handle):
                    mib = (process.usedGpuMemory or 0) / MIB
                    processes[process.pid] = processes.get(process.pid, 0.0) + mib
        return Reading(tuple(names), tuple(totals), tuple(used), processes)


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def open_source() -> Source | str:
    """NVML, opened; or why not, in a few words ("no NVIDIA driver (NVML Shared Library Not Found)")."""
    try:
        import pynvml  # type: ignore[import-untyped]
    except ImportError:
        return "nvidia-ml-py is not installed"
    try:
        pynvml.nvmlInit()
        source = NvmlSource(pynvml)
    except pynvml.NVMLError as exc:
        return f"no NVIDIA driver or GPU ({exc})"
    return source if source.handles else "NVML lists no GPU"


class GpuWatch:
    """One server's GPU memory: `before_launch`, `at_ready`, then `probing` (a context that samples the peak
    on a thread), and `use()` for the record."""

    def __init__(self, source: Source | str, pids: Callable[[], set[int]]) -> None:
        self.source = source
        self.pids = pids
        self.before: Reading | None = None
        self.ready: float | None = None
        self.peak: float | None = None
        self.how = ""
        self.failed = ""  # why a reading failed, the first time one did
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def before_launch(self) -> None:
        self.before = self._read()

    def _read(self) -> Reading | None:
        if isinstance(self.source, str):
            return None
        try:
            return self.source.read()
        except ReadFailed as exc:
            self.failed = self.failed or f"NVML failed to read the GPUs ({exc})"
            return None

    def at_ready(self) -> None:
        self.ready = self._held()
        self.peak = self.ready

    def __enter__(self) -> GpuWatch:
        if not isinstance(self.source, str):
            self._stop.clear()
            self._thread = threading.Thread(target=self._sample, name="gpu-watch", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._thread = None

    def _sample(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            self.sample()

    def sample(self) -> None:
        """One reading while probed: the peak so far."""
        held = self._held()
        if held is not None:
            self.peak = max(self.peak or 0.0, held)

    def _held(self) -> float | None:
        reading = self._read()
        if reading is None:
            return None
        by_pid = reading.held_by(self.pids())
        if by_pid is not None:
            self.how = BY_PID
            return by_pid
        if self.before is None:
            return None
        self.how = BY_DEVICE
        return max(0.0, sum(reading.used_mib) - sum(self.before.used_mib))

    def use(self) -> GpuUse:
        if isinstance(self.source, str):
            return GpuUse(reason=self.source)
        seen = self.before or self._read()
        if seen is None:
            return GpuUse(reason=self.failed)
        return GpuUse(
            devices=seen.names,
            driver=self.source.driver,
            total_mib=round(sum(seen.total_mib), 1),
            ready_mib=None if self.ready is None else round(self.ready, 1),
            peak_mib=None if self.peak is None else round(self.peak, 1),
            how=self.how,
            reason=self.failed,  # readings missed while it ran
        )


def combine(first: GpuUse | None, then: GpuUse) -> GpuUse:
    """A trial's servers (one per workload where state persists) as one: the first's reading at ready, the
    highest peak."""
    if first is None or not first.present:
        return then
    peaks = [p for p in (first.peak_mib, then.peak_mib) if p is not None]
    return GpuUse(
        first.devices,
        first.driver,
        first.total_mib,
        first.ready_mib,
        max(peaks) if peaks else None,
        first.how or then.how,
        first.reason or then.reason,
    )

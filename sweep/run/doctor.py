"""`specsweep doctor` as a function: the memory truth behind one launch of a model, from its own files and, given
server logs, what the pool should have held and what the flags capped. The engine reads its flags and its log;
`sweep.model.doctor` does the arithmetic."""

from __future__ import annotations

from pathlib import Path

from sweep.core.errors import UserError
from sweep.engines import ENGINES
from sweep.engines.flags import params_from_flags
from sweep.engines.values import ServerSetup
from sweep.model.doctor import Diagnosis, MemoryBudget, diagnose


def examine(
    model: Path,
    engine_name: str,
    flags: list[str],
    log: Path | None = None,
    against: Path | None = None,
    tp: int | None = None,
    kv_dtype: str | None = None,
    gpu_memory_gb: float | None = None,
) -> Diagnosis:
    """The model's geometry at these engine `flags`; with a GPU's memory, the most its pool can hold; with a
    launch's `log`, the pool and graph verdicts; with a second log (`against`), what the two hold differently."""
    engine = ENGINES[engine_name](ServerSetup([], str(model)))
    if against is not None and log is None:
        raise UserError(
            "--against needs --log", "pass the first launch's log with --log and the second's with --against"
        )
    params = params_from_flags(flags)
    tp = tp if tp is not None else engine.tensor_parallel(params)
    if tp < 1:
        raise UserError(f"a tensor parallel size of {tp} is not a GPU count", "pass --tp 1 or more")
    if gpu_memory_gb is not None and gpu_memory_gb <= 0:
        raise UserError(f"--gpu-memory {gpu_memory_gb} is not a memory size", "pass one GPU's memory in GB")
    facts, against_facts = (
        None if path is None else engine.facts_from_log(_read_log(path, option))
        for path, option in ((log, "--log"), (against, "--against"))
    )
    if not model.exists():
        raise UserError(f"model {model} does not exist", "pass the model's folder or .gguf file")
    share = engine.memory_share(gpu_memory_gb, params) if gpu_memory_gb else None
    return diagnose(
        model,
        kv_dtype or engine.kv_cache_dtype(params),
        facts,
        engine.doctor_rules(params, tp),
        # Unsaid, as the log shows; a draft with its own cache (llama-server's) never shares the pool.
        True if params and engine.wants_speculation(params) and engine.draft_shares_pool else None,
        against_facts,
        MemoryBudget(gpu_memory_gb, *share) if share and gpu_memory_gb else None,
    )


def _read_log(path: Path, option: str) -> str:
    if not path.is_file():
        raise UserError(f"log file {path} does not exist", f"pass the path of a server log with {option}")
    return path.read_text(encoding="utf-8", errors="replace")

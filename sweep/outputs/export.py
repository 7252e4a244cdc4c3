"""The recommended configuration as something to run: a command line, a docker-compose block, JSON or YAML."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any

import yaml

FORMATS = ("cli", "compose", "json", "yaml", "schedule")


@dataclass(frozen=True)
class WithheldRun:
    """The faster configuration a veto keeps from being what to run: its command, commented out, and why."""

    configuration: str
    reason: str
    argv: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"configuration": self.configuration, "reason": self.reason, "argv": self.argv}

    def comment(self) -> str:
        return f"# withheld: {self.reason}\n# {shlex.join(self.argv)}"


@dataclass(frozen=True)
class Export:
    engine: str
    study: str
    trial: int
    workload: str | None
    params: dict[str, Any]
    argv: list[str]
    # The verdict behind it and anything to know before running it (unconfirmed, output changed).
    notes: tuple[str, ...] = ()
    configuration: str = ""  # how the study names it ("trial N", "predicted K")
    withheld: WithheldRun | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "study": self.study,
            "trial": self.trial,
            "configuration": self.configuration or f"trial {self.trial}",
            "workload": self.workload,
            "params": self.params,
            "argv": self.argv,
            "notes": list(self.notes),
            "withheld": self.withheld.to_dict() if self.withheld else None,
        }


def with_port(argv: list[str], port: int) -> list[str]:
    """The trial's argv with the port it was measured on replaced (a sweep picks free ports)."""
    out = list(argv)
    if "--port" in out:
        out[out.index("--port") + 1] = str(port)
    return out


def served(argv: list[str], measuring: list[str]) -> list[str]:
    """The trial's argv without what the engine added only to read the server (`TrialRecord.measuring_argv`):
    its last run of those flags, as the engine puts them after the user's own (which stay)."""
    n = len(measuring)
    starts = [i for i in range(len(argv) - n + 1) if n and argv[i : i + n] == measuring]
    return argv[: starts[-1]] + argv[starts[-1] + n :] if starts else list(argv)


def render(export: Export, fmt: str) -> str:
    if fmt == "cli":
        return shlex.join(export.argv)
    if fmt == "compose":
        service = {"services": {export.engine: {"command": export.argv}}}
        head = f"# specsweep study {export.study}, {export.configuration or f'trial {export.trial}'}" + (
            f", for {export.workload}" if export.workload else ", for all workloads"
        )
        notes = "".join(f"\n# {note}" for note in export.notes)
        withheld = f"\n{export.withheld.comment()}" if export.withheld else ""
        return head + notes + withheld + "\n" + yaml.safe_dump(service, sort_keys=False, width=1000)
    if fmt == "json":
        return json.dumps(export.to_dict(), indent=2)
    return yaml.safe_dump(export.to_dict(), sort_keys=False, width=1000)

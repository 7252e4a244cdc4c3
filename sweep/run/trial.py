"""One trial's life: its parameters checked, the draft held against the model, one server per group of
workloads launched, its facts and sizing read, the workloads probed, the server stopped and the record saved
(on the Optuna trial and in the trial's folder), whatever happens. The study loop (`driver.py`), the
confirmation (`confirm.py`) and `ab` run every launch through it."""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import optuna

from sweep.answers.health import NOT_REPRESENTATIVE
from sweep.core.errors import (
    LaunchError,
    ProbeError,
    SpeculationInactive,
    SpeculationUnasked,
    UserError,
    interrupted_how,
    run_interruptible,
)
from sweep.core.files import write_atomic, write_error
from sweep.engines import Engine
from sweep.engines.values import LaunchPlan
from sweep.launch import gpu, host
from sweep.launch.server import ServerProcess, free_port
from sweep.model.doctor import EngineRules, draft_refusal, sizing
from sweep.probes.runner import probe
from sweep.probes.settings import Others, Progress, Served
from sweep.probes.workloads import Workload
from sweep.records import HostLoad, LaunchFacts, RequestMeasurement, Stage, TrialRecord
from sweep.space import Space
from sweep.storage import RECORD_ATTR, StudyPaths

RECORD_FILE = "record.json"  # a trial's record in its folder (`runs/<study>/trials/<n>/`)
EXIT_SETTLE_S = 0.3  # after the last measured answer, how long a server that is exiting has to show it


# A launch that asked for no speculation and got it anyway (a default that turned it on, a flag in extra_args):
# its numbers would be a speculating baseline, every gain against it understated.
UNASKED = (
    "asked for no speculation, but the server speculates (a default of its release, or a speculative flag in "
    "server.extra_args): "
)


@dataclass
class Measured:
    """What a trial's servers measured, gathered over its groups of workloads."""

    rows: list[RequestMeasurement] = field(default_factory=list)
    loads: list[HostLoad] = field(default_factory=list)


@dataclass(frozen=True)
class TrialServer:
    """One server of a trial: the process, where it answers, and the trial's plan and doctor's rules."""

    server: ServerProcess
    url: str
    health_path: str
    plan: LaunchPlan
    rules: EngineRules
    first: bool  # the trial's first server: its facts are the record's


class TrialRunner:
    """Runs trials of one study's space on one engine: one call per trial (`measure`), one engine call per
    phase. Holds what lasts across trials: the GPU source, the workloads already said to be degenerate, and a
    file that could not be written (the driver stops after the trial)."""

    def __init__(self, space: Space, engine: Engine, paths: StudyPaths) -> None:
        self.space, self.engine, self.paths = space, engine, paths
        self._deadline: float | None = None  # the running trial's end, whatever happens (monotonic)
        self.gpu_source = gpu.open_source()  # NVML once per run, or why there is no GPU to read
        self.write_error: UserError | None = None  # a file a trial wrote could not be written: stop after it
        self._told_degenerate: set[str] = set()  # workloads whose degenerate output was already announced

    def measure(
        self,
        trial: optuna.Trial,
        record: TrialRecord,
        say: Progress,
        trial_dir: Path,
        workloads: Sequence[Workload] | None = None,
        others: Others | None = None,
    ) -> TrialRecord:
        """Run the trial and save its record on the Optuna trial and in `trial_dir`, whatever happens. `others`:
        other configurations' answers, asked about where this server's part from them (`probe`)."""
        try:
            record = self.run(record, say, workloads, trial_dir, others)
        except KeyboardInterrupt as exc:
            record.failure, record.stage = f"interrupted {interrupted_how(exc)}", Stage.INTERRUPTED
            self.save(trial, record, trial_dir)
            raise
        except UserError:
            raise  # bad input: one line from the CLI, not a trial result
        except Exception as exc:
            # A server that answers something unexpected must not end the night: the trial fails, with its
            # reason here and the traceback in the trial's folder.
            record.failure, record.stage = f"unexpected {exc.__class__.__name__}: {exc}", Stage.ERROR
            self.write(trial_dir / "error.txt", traceback.format_exc())
        self.save(trial, record, trial_dir)
        return record

    def run(
        self,
        record: TrialRecord,
        say: Progress,
        workloads: Sequence[Workload] | None = None,
        trial_dir: Path | None = None,
        others: Others | None = None,
    ) -> TrialRecord:
        """Launch the server with the trial's parameters, probe the workloads, stop it. Where the engine keeps
        speculative state across requests (an n-gram pool), each workload gets a server of its own."""
        # Once a trial: what every phase below asks of the parameters (a cost profile's launch forces acceptance).
        plan = self.engine.plan(record.params, synthetic_length=record.synthetic_length)
        record.shape = plan.shape
        if plan.invalid:
            record.failure, record.stage = f"invalid parameters: {plan.invalid}", Stage.PARAMS
            return record
        rules = self.engine.doctor_rules(plan.params)  # once a trial: the draft check and the sizing
        if why := draft_refusal(self.engine.setup.model, rules):
            record.failure, record.stage = f"the draft does not fit the model: {why}", Stage.PARAMS
            return record
        workloads = list(workloads or self.space.workloads)
        trial_dir = trial_dir or self.paths.trial_dir(record.number)
        self._deadline = time.monotonic() + self.space.probe.trial_timeout_s
        separate = plan.server_per_workload and len(workloads) > 1
        groups = [[w] for w in workloads] if separate else [workloads]
        measured = Measured()
        for index, group in enumerate(groups):
            log = trial_dir / ("server.log" if index == 0 else f"server-{index}.log")
            if separate:
                say(f"server {index + 1}/{len(groups)} (speculative state persists across requests)")
            opening = index == 0
            if not self._launch_and_probe(record, plan, rules, group, log, say, measured, opening, others):
                break
        self.write(
            trial_dir / "requests.jsonl",
            "".join(json.dumps(r.to_dict(), ensure_ascii=False) + "\n" for r in measured.rows),
        )
        record.host = host.combine(measured.loads)
        if plan.synthetic is None:  # forced acceptance answers with what it was told to accept: never text
            self._tell_degenerate(record, say, plan.speculative)
        if not record.failed and not any(s.status == "ok" for s in record.workloads.values()):
            # No workload has a number: a trial at 0 t/s would teach the sampler a speed nobody measured.
            first = next(iter(record.workloads.values()), None)
            reason = f"{first.workload}: {first.reason}" if first else "nothing was measured"
            record.failure, record.stage = f"no workload was measured ({reason})", Stage.PROBE
        return record

    def _tell_degenerate(self, record: TrialRecord, say: Progress, speculative: bool) -> None:
        """Say at once, not in the morning, where a workload's answers are not text (first launch only)."""
        for key, summary in record.workloads.items():
            health = summary.output_health
            if health is None or health.healthy or key in self._told_degenerate:
                continue
            self._told_degenerate.add(key)
            who = "this launch" if speculative else "speculation off"
            say(
                f"WARNING {key} ({summary.form} form): {health.describe()} with {who}: {NOT_REPRESENTATIVE}; "
                "its verdict will be marked not representative (see requests.jsonl)"
            )

    def _launch_and_probe(
        self,
        record: TrialRecord,
        plan: LaunchPlan,
        rules: EngineRules,
        workloads: list[Workload],
        log: Path,
        say: Progress,
        measured: Measured,
        first: bool,
        others: Others | None = None,
    ) -> bool:
        """One server: launch, check, probe `workloads` into the record. False when the trial failed."""
        host_name = self.engine.setup.host
        port = self.space.server.port or free_port(host_name)
        command = self.engine.command(plan, port)
        if first:
            record.argv = command.argv  # known before the launch: an interrupted trial still says what it ran
            record.measuring_argv = command.measuring_argv
        server = ServerProcess(
            command.argv,
            log,
            command.env,
            self.engine.exit_reason,
            self.paths.registry,
            self.space.server.stop_timeout,
        )
        launch = TrialServer(server, f"http://{host_name}:{port}", command.health_path, plan, rules, first)
        watch = gpu.GpuWatch(self.gpu_source, server.pids)
        watch.before_launch()
        with server:
            facts = self._start(launch, record)
            served = facts is not None and self._probe(
                launch, facts, record, workloads, say, measured, watch, others
            )
        record.gpu = gpu.combine(record.gpu, watch.use())
        if server.log_error:
            record.facts.log_lost = server.log_error
            self.write_error = self.write_error or write_error(log, server.log_error)
        if server.exited_early is not None and not record.failed:
            # Whatever the probe saw, numbers from a server that died before the trial ended are not kept.
            record.failure = f"the server exited (code {server.exited_early}) before the trial ended: {server.exit_reason()}"
            record.stage = Stage.PROBE
        return served and not record.failed

    def _start(self, launch: TrialServer, record: TrialRecord) -> LaunchFacts | None:
        """Wait for the server to serve, read its facts and size its pool; None (the trial failed) otherwise."""
        server = launch.server
        try:
            startup = server.wait_ready(launch.url + launch.health_path, self.space.server.startup_timeout)
            server.await_line(self.engine.ready_marker)
            facts = self.engine.launch_facts(server.log_text())
            facts.startup_s = round(startup, 2)
            found = sizing(
                self.engine.setup.model, launch.plan.kv_dtype, facts, launch.rules, launch.plan.draft_in_pool
            )
            if found is not None:
                facts.sizing = found
            if launch.first:
                record.facts = facts  # filled in further by inspect_running, kept when it raises
            with httpx.Client(base_url=launch.url, timeout=30.0) as client:
                self.engine.inspect_running(client, facts, launch.plan.params, server.log_text())
            if facts.speculation_active and not facts.speculation_requested:
                raise SpeculationUnasked(UNASKED + "the server says it speculates")
        except (SpeculationInactive, SpeculationUnasked) as exc:
            record.failure, record.stage = str(exc), Stage.SPECULATION
            return None
        except LaunchError as exc:
            record.facts = self.engine.launch_facts(server.log_text())
            record.failure, record.stage = str(exc), Stage.LAUNCH
            return None
        except httpx.HTTPError as exc:
            record.failure, record.stage = self._lost_server(server, exc), Stage.LAUNCH
            return None
        return facts

    def _probe(
        self,
        launch: TrialServer,
        facts: LaunchFacts,
        record: TrialRecord,
        workloads: list[Workload],
        say: Progress,
        measured: Measured,
        watch: gpu.GpuWatch,
        others: Others | None = None,
    ) -> bool:
        """Probe the workloads on a server that serves; False (the trial failed) where it stops answering."""
        say(f"ready in {facts.startup_s:.1f} s; probing")
        watch.at_ready()
        try:
            with watch:
                result = run_interruptible(
                    probe(
                        launch.url,
                        self.engine,
                        workloads,
                        self.space.probe,
                        say,
                        watch=host.watcher(launch.server.pid),
                        deadline=self._deadline,
                        served=Served(
                            facts.chat_template,
                            facts.chat_template_source,
                            drafts_counted=facts.drafts_counted,
                        ),
                        others=others,
                    )
                )
        except httpx.HTTPError as exc:
            record.failure, record.stage = self._lost_server(launch.server, exc), Stage.PROBE
            return False
        except ProbeError as exc:
            record.failure, record.stage = str(exc), Stage.PROBE
            return False
        measured.loads += [s.host for s in result.summaries.values() if s.host is not None]
        record.workloads.update(result.summaries)
        measured.rows += result.requests
        drafted = sum(s.draft_tokens or 0 for s in result.summaries.values())
        if drafted and not facts.speculation_requested:  # a baseline that speculates is no baseline
            record.failure = UNASKED + f"the server drafted {drafted} tokens by its own counters"
            record.stage = Stage.SPECULATION
            return False
        # A server that dies on its last answer has not survived the trial: give an exit already under way its
        # moment to show (stop() records it), rather than racing it.
        launch.server.exited_within(EXIT_SETTLE_S)
        return True

    @staticmethod
    def _lost_server(server: ServerProcess, exc: Exception) -> str:
        time.sleep(0.5)  # a dying server closes its socket a moment before it exits
        if server.returncode is not None:
            return f"server died while probing: {server.exit_reason()}"
        return f"server stopped answering while probing ({exc.__class__.__name__}: {exc})"

    def save(self, trial: optuna.Trial, record: TrialRecord, trial_dir: Path | None = None) -> None:
        """The record goes into the study first: a file that cannot be written (a full disk) does not turn a
        measured trial into a failure; the sweep stops after the trial with one line saying why."""
        trial.set_user_attr(RECORD_ATTR, record.to_dict())
        self.write_record(record, trial_dir or self.paths.trial_dir(record.number))

    def write_record(self, record: TrialRecord, trial_dir: Path) -> None:
        """The trial's record beside its server log and requests (`RECORD_FILE`), as every reader expects it."""
        self.write(trial_dir / RECORD_FILE, json.dumps(record.to_dict(), indent=2, ensure_ascii=False))

    def write(self, path: Path, text: str) -> None:
        try:
            write_atomic(path, text)
        except UserError as exc:
            self.write_error = self.write_error or exc

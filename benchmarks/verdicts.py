"""How often a verdict is right: A/A called "within noise", a true +3/+5/+10% called "faster", and the winner's
curse, before (one launch each, a fixed 5% threshold) and after (interleaved confirmation launches, noise
measured in the study, Student's t on round-paired launch means with a 3% practical minimum, one more round
at a time while the verdict is open, up to `confirm.max_launches` (40), each look's interval Pocock's so that
equal configurations are told apart in 2% of confirmations over every look, `stats.Looks`).

Launches are simulated in-process with the simulator's own code (`sweep.sim`: its performance model, per-launch
drift, per-request pace and per-step noise, seeded anew per launch as a real server drifts), on the probe's real
prompts; `--e2e N` also runs N `specsweep ab` A/B tests per effect against simulator servers, through HTTP.

    .venv/bin/python benchmarks/verdicts.py [--replicates 400] [--drift 0.012] [--e2e 0 [--busy 2]]

`--recommend N` runs instead N `specsweep run` studies per held-out profile (`search_vs_grid.py`'s PERTURBED)
and workload class (code, tool, prose): the baseline against one configuration the simulator makes `--effect`
faster, confirmed; it prints how often the report calls the gain faster and how often it recommends it (a
withheld gain with its veto).

    .venv/bin/python benchmarks/verdicts.py --recommend 2 [--effect 0.05]

`--studies N` runs instead N studies of the three classes on the default profile, A/A (the baseline against
itself) and a true +5%: verdicts, recommendations and each gain (`--busy K`: beside K busy processes).

    .venv/bin/python benchmarks/verdicts.py --studies 3 [--busy 2]

Measured 6 Dec (2-core VM, quiet; commands as above): `--studies 3`: A/A {'within noise': 9}, nothing
recommended; +5% {'faster': 8, 'within noise': 1} (the one at +3.0%), recommended 8/9; with `--busy 2`: A/A
{'within noise': 9}, +5% {'faster': 7, 'within noise': 2} (+2.7%, +2.6%: one study measured all three classes
low), recommended 7/9. `--recommend 2
--effect 0.05`: knee4, notree, costly 2/2 faster and recommended on every class; noisy (launch drift 5%)
code 0/2, tool 2/2, prose 0/2 (open at 10 launches a side: the verdict says how many would settle it).

With every look counted (`stats.Looks`) and 40 rounds at most, 6 Dec: `--recommend 1` (13 min): 11 of 12
held-out verdicts faster and recommended (knee4, notree, costly 9/9 in 6-19 rounds a side; noisy code open at
40, tool and prose in 30 and 14). The in-process rates at `--drift 0.05` (80 a cell): +5% faster 77.5% alone,
85% with 2 more configurations; A/A faster 1.3% and 0%. `--studies 3` (9 min): A/A {'within noise': 9}, +5%
{'faster': 9}, recommended 9/9 (+3.9% to +5.5%); with `--busy 2` (12 min): A/A {'within noise': 9}, +5%
{'faster': 9}, recommended 9/9 (+3.3% to +5.7%).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import random
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import busy_suite
from search_vs_grid import perturbed_profiles, report_json, sweep_on_sim

from sweep.core import stats
from sweep.core.stats import Launch, Verdict
from sweep.engines.values import PromptForm
from sweep.probes.client import prompt_nonce, unique_content
from sweep.probes.workloads import BUILTIN
from sweep.sim.profile import DEFAULT_PROFILE, Profile
from sweep.sim.sglang_server import in_process
from sweep.space.spec import ConfirmSettings

REPEATS = 3
MAX_TOKENS = 128
OLD_NOISE = 0.05


def launch(profile: Profile, flags: list[str], prompts: list[str], seed: int) -> Launch:
    """One simulated server launch measured on `prompts`: the server's decode t/s per prompt."""
    sim = in_process(profile, ["--sim-seed", str(seed), *flags])
    values = []
    for prompt in prompts:
        meta = [final for _, final in sim.generate(prompt, MAX_TOKENS) if final][-1]
        values.append(float(meta["decode_throughput"]))
    return Launch(tuple(values))


def old_verdict(a: Launch, b: Launch) -> str:
    """The verdict before: one launch each, per-prompt pairing, a fixed 5% threshold (sweep/analysis.py, stop 5)."""
    gain = statistics.median(b.values) / statistics.median(a.values) - 1
    gains = [y / x - 1 for x, y in zip(a.values, b.values, strict=True)]
    if abs(gain) < OLD_NOISE or (min(gains) <= 0 <= max(gains) and gain < 2 * OLD_NOISE):
        return "within noise"
    return "faster" if min(gains) > 0 else "slower" if max(gains) < 0 else "mixed"


def confirmed(
    profile: Profile,
    flags_a: list[str],
    flags_b: list[str],
    prompts: list[str],
    rounds: int,
    max_rounds: int,
    extra: int,
    rng: random.Random,
) -> tuple[stats.Comparison, Launch, Launch]:
    """What the confirmation concludes on B against A: `rounds` interleaved launches each, then one more round
    at a time while the verdict is open (as `sweep.run.confirm` does). `extra` configurations launched alongside
    add to the pooled noise. Also returns the first launch of each (what the search alone saw)."""

    def one(flags: list[str], round_: int) -> Launch:
        return dataclasses.replace(launch(profile, flags, prompts, rng.getrandbits(31)), round=round_)

    a = [one(flags_a, r) for r in range(rounds)]
    b = [one(flags_b, r) for r in range(rounds)]
    others = [[one(flags_a, r) for r in range(rounds)] for _ in range(extra)]
    while True:
        noise = stats.measure_noise([a, b, *others], a)
        found = stats.compare(b, a, noise, looks=stats.Looks(rounds, max_rounds))
        assert found is not None
        if found.settled() or len(a) >= max_rounds:
            return found, a[0], b[0]
        a.append(one(flags_a, len(a)))
        b.append(one(flags_b, len(b)))


def rates(
    profile: Profile,
    effect: float,
    replicates: int,
    rounds: int,
    max_rounds: int,
    extra: int,
    rng: random.Random,
) -> dict[str, float]:
    """Shares of verdicts over `replicates` experiments with B truly `effect` faster than A."""
    prompts = [
        unique_content(prompt_nonce("code", i, 0), p)
        for i, p in enumerate(BUILTIN["code"].prompts(PromptForm.CHAT)[:REPEATS])
    ]
    speed = ["--sim-speed-factor", str(1 + effect)]
    counts = {"before: faster": 0, "before: within noise": 0, **{f"after: {v}": 0 for v in Verdict}}
    launches_used = 0
    for _ in range(replicates):
        found, first_a, first_b = confirmed(profile, [], speed, prompts, rounds, max_rounds, extra, rng)
        old = old_verdict(first_a, first_b)
        counts["before: faster"] += old == "faster"
        counts["before: within noise"] += old == "within noise"
        counts[f"after: {found.verdict}"] += 1
        launches_used += found.launches[0]
    return {**{k: v / replicates for k, v in counts.items()}, "launches": launches_used / replicates}


def winners_curse(
    profile: Profile, configs: int, rounds: int, rng: random.Random
) -> tuple[float, float, float]:
    """`configs` identical NEXTN configurations searched once each: the best's search gain, its confirmed gain,
    and the truth (all against the baseline)."""
    prompts = [
        unique_content(prompt_nonce("code", i, 0), p)
        for i, p in enumerate(BUILTIN["code"].prompts(PromptForm.CHAT)[:REPEATS])
    ]
    nextn = [
        "--speculative-algorithm",
        "NEXTN",
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "1",
    ]
    base = launch(profile, [], prompts, rng.getrandbits(31))
    search = [launch(profile, nextn, prompts, rng.getrandbits(31)) for _ in range(configs)]
    best = max(search, key=lambda x: x.log_mean(REPEATS))
    searched = math.exp(best.log_mean(REPEATS) - base.log_mean(REPEATS)) - 1
    found, _, _ = confirmed(profile, [], nextn, prompts, rounds, rounds, 0, rng)
    quiet = dataclasses.replace(profile, noise=0.0, request_noise=0.0, launch_drift=0.0)
    truth = (
        math.exp(
            launch(quiet, nextn, prompts, 1).log_mean(REPEATS)
            - launch(quiet, [], prompts, 1).log_mean(REPEATS)
        )
        - 1
    )
    return searched, found.gain, truth


def e2e(effect: float, runs: int, drift: float) -> tuple[dict[str, int], list[float]]:
    """`specsweep ab` against simulator servers (B is the simulator told to run `effect` faster): the verdicts'
    counts over `runs` A/B tests, and each test's measured gain."""
    counts: dict[str, int] = {}
    gains: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        profile = Path(tmp) / "profile.yaml"
        text = DEFAULT_PROFILE.read_text()
        profile.write_text(
            "\n".join(line for line in text.splitlines() if not line.startswith("launch_drift:"))
            + f"\nlaunch_drift: {drift}\n"
        )
        space = Path(tmp) / "ab.yaml"
        space.write_text(
            "engine: sglang\n"
            f'server: {{launcher: ["{{python}}", -m, sweep.sim, --sim-time-scale, "0.002", --sim-profile, "{profile}"], '
            "model: /m}\n"
            f"workloads: [{{class: code}}]\nprobe: {{repeats: {REPEATS}, max_tokens: {MAX_TOKENS}}}\n"
        )
        for i in range(runs):
            out = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "sweep",
                    "ab",
                    "--space",
                    str(space),
                    "--a",
                    "baseline",
                    "--b",
                    f"sim-speed-factor={1 + effect}",
                    "--rounds",
                    "3",
                    "--study",
                    f"e2e-{i}",
                    "--runs",
                    f"{tmp}/runs",
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            line = next(line for line in out.stdout.splitlines() if line.startswith("code: decode t/s"))
            verdict = line.split("  ")[-1].strip()
            counts[verdict] = counts.get(verdict, 0) + 1
            if found := re.search(r"([+-]\d+(?:\.\d+)?)% \[", line):
                gains.append(float(found.group(1)) / 100)
    return counts, gains


CLASSES = ("code", "tool", "prose")


def recommendations(
    folder: Path, profile: Path | str, classes: tuple[str, ...], effect: float, seed: int
) -> list[dict[str, Any]]:
    """A `specsweep run` study on the simulator: the baseline and one configuration the simulator runs `effect`
    faster (0: the same configuration, an A/A test), confirmed; the report's recommendation per workload
    (`report --json`), in `classes`' order."""
    factor = 1 + effect
    workloads = ", ".join(f"{{class: {c}}}" for c in classes)
    text = (
        "engine: sglang\n"
        f'server: {{launcher: ["{sys.executable}", -m, sweep.sim, --sim-time-scale, "0.002", '
        f'--sim-profile, "{profile}"], model: /m}}\n'
        f"params: {{sim-speed-factor: {{choices: [{factor}]}}}}\n"
        f"enqueue: [{{sim-speed-factor: {factor}}}]\n"
        f"workloads: [{workloads}]\n"
        f"probe: {{repeats: {REPEATS}, max_tokens: {MAX_TOKENS}}}\n"
        f"trials: 2\nseed: {seed}\n"
    )
    runs, _ = sweep_on_sim(text, folder)
    found = {r["workload"]: r for r in report_json(runs)["recommendations"]}
    return [found[c] for c in classes]


def score_recommendations(studies: int, effect: float, only: list[str]) -> None:
    """Per held-out profile (those named in `only`, else all) and workload class: how often a true `effect` is
    called faster, and recommended, and the confirmation rounds each verdict took."""
    print(
        f"true effect {effect:+.0%}, {studies} studies per cell: called faster / recommended; vetoes that fired"
    )
    print("| profile | workload | faster | recommended | rounds a side | vetoes |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for profile in perturbed_profiles(Path(tmp)):
            if only and Path(profile).stem not in only:
                continue
            for workload in CLASSES:
                faster = run = 0
                vetoes: list[str] = []
                rounds: list[int] = []
                for seed in range(studies):
                    with tempfile.TemporaryDirectory() as folder:
                        (rec,) = recommendations(Path(folder), profile, (workload,), effect, seed)
                    faster += rec["verdict"] == "faster"
                    rounds.append(rec["launches"][0] if rec.get("launches") else 0)
                    run += rec["recommended_trial"] == 1
                    if rec.get("withheld"):
                        vetoes.append(f"{rec['withheld']['veto']}: {rec['withheld']['evidence'][:80]}")
                    elif rec["verdict"] == "faster" and rec["recommended_trial"] != 1:
                        vetoes.append(rec["why"][:100])
                print(
                    f"| {Path(profile).stem} | {workload} | {faster}/{studies} | {run}/{studies} "
                    f"| {' '.join(map(str, rounds))} | {'; '.join(vetoes) or '-'} |"
                )


def score_studies(studies: int, busy: int) -> None:
    """A/A and a true +5% in `studies` studies of the three classes each on the default profile, beside `busy`
    busy processes: how many of the verdicts say faster, how many recommend the candidate, the gains."""
    load = busy_suite.burners(busy)
    try:
        for effect in (0.0, 0.05):
            recs = []
            for seed in range(studies):
                with tempfile.TemporaryDirectory() as folder:
                    recs += recommendations(Path(folder), DEFAULT_PROFILE, CLASSES, effect, seed)
            gains = [r["gain"] for r in recs if r["gain"] is not None]
            counts: dict[str, int] = {}
            for r in recs:
                counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
            recommended = sum(r["recommended_trial"] == 1 for r in recs)
            spread = statistics.stdev(gains) / math.sqrt(len(gains)) if len(gains) > 1 else math.nan
            print(
                f"true effect {effect:+.0%}, {studies} studies x {len(CLASSES)} classes, {busy} busy processes: "
                f"{counts}; candidate recommended {recommended}/{len(recs)}; mean gain "
                f"{statistics.fmean(gains) if gains else math.nan:+.2%} (+/- {spread:.2%} standard error), "
                f"gains {' '.join(f'{g:+.1%}' for g in gains)}"
            )
    finally:
        busy_suite.stop(load)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicates", type=int, default=400)
    parser.add_argument("--drift", type=float, help="launch drift (default: the profile's)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-rounds", type=int, default=ConfirmSettings.max_launches)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--e2e", type=int, default=0, help="also run this many `specsweep ab` tests per effect"
    )
    parser.add_argument("--busy", type=int, default=0, help="busy processes beside the --e2e A/B tests")
    parser.add_argument(
        "--recommend", type=int, default=0, help="instead: this many studies per held-out profile and class"
    )
    parser.add_argument("--effect", type=float, default=0.05, help="--recommend's true effect")
    parser.add_argument(
        "--profiles", nargs="*", default=[], help="--recommend's held-out profiles (default: all)"
    )
    parser.add_argument(
        "--studies",
        type=int,
        default=0,
        help="instead: this many studies of the three classes, A/A and a true +5%% (with --busy K beside them)",
    )
    args = parser.parse_args()
    if args.recommend:
        score_recommendations(args.recommend, args.effect, args.profiles)
        return
    if args.studies:
        score_studies(args.studies, args.busy)
        return
    profile = Profile.load(DEFAULT_PROFILE)
    if args.drift is not None:
        profile = dataclasses.replace(profile, launch_drift=args.drift)
    rng = random.Random(args.seed)
    print(
        f"profile {profile.name}: launch drift {profile.launch_drift:.1%}, request noise "
        f"{profile.request_noise:.1%}, step noise {profile.noise:.1%}; {args.replicates} experiments per cell"
    )
    for extra, what in ((0, "A/B alone (specsweep ab)"), (2, "confirmation with 2 more configurations")):
        print(f"\n{what}: {args.rounds} launches each, up to {args.max_rounds} while the verdict is open")
        print(
            f"{'true effect':>12}  {'before: faster':>14}  {'before: w/in noise':>18}  {'after: faster':>13}  "
            f"{'after: w/in noise':>17}  {'after: unreliable':>17}  {'launches (mean)':>15}"
        )
        for effect in (0.0, 0.03, 0.05, 0.10):
            r = rates(profile, effect, args.replicates, args.rounds, args.max_rounds, extra, rng)
            print(
                f"{effect:>+12.0%}  {r['before: faster']:>14.1%}  {r['before: within noise']:>18.1%}  "
                f"{r['after: faster']:>13.1%}  {r['after: within noise']:>17.1%}  {r['after: unreliable']:>17.1%}  "
                f"{r['launches']:>15.1f}"
            )
    # Beside the A/B tests only: the in-process rates are not timed.
    load = busy_suite.burners(args.busy if args.e2e else 0)
    try:
        for effect in (0.0, 0.05, 0.10) if args.e2e else ():
            counts, gains = e2e(effect, args.e2e, profile.launch_drift)
            spread = statistics.stdev(gains) / math.sqrt(len(gains)) if len(gains) > 1 else math.nan
            print(
                f"specsweep ab through simulator servers, true effect {effect:+.0%}, {args.busy} busy processes: "
                f"{counts}; mean gain {statistics.fmean(gains):+.2%} (+/- {spread:.2%} standard error)"
            )
    finally:
        busy_suite.stop(load)
    searched, confirmed, truth = zip(
        *(winners_curse(profile, 12, args.rounds, rng) for _ in range(40)), strict=True
    )
    print(
        f"\nwinner's curse, best of 12 identical NEXTN configurations (40 studies): search said "
        f"{statistics.fmean(searched):+.1%}, confirmation {statistics.fmean(confirmed):+.1%}, truth {truth[0]:+.1%}"
    )


if __name__ == "__main__":
    main()

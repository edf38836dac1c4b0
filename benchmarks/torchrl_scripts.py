"""The reference library's own example scripts, run on both libraries: does "change one word" hold?

Takes a checkout of the reference's ``sota-implementations/`` folder (pytorch/rl; this script
fetches nothing), copies each script's folder into a temporary folder twice, and runs it:

* as it is, with the reference's python (torchrl 0.14.1 in its own venv, see
  ``../shared/tools/reference-venv.sh``);
* with ``torchrl`` replaced by ``cadence`` in every ``.py`` file (the private
  ``torchrl._utils`` helpers become ``cadence.utils``, the one other import a user changes),
  with this python.

Both get the same hydra overrides: the same small budget, the same seed, the CSV logger.
The table says whether each run finished, its wall-clock, and the last evaluation and
training returns the CSV logger recorded. The scripts import hydra: both pythons need
``pip install hydra-core``.

Usage::

    python benchmarks/torchrl_scripts.py --sota /path/to/rl/sota-implementations
    python benchmarks/torchrl_scripts.py --sota ... --scripts dqn,ppo --budget learning
    python benchmarks/torchrl_scripts.py --sota ... --skip-reference --keep /tmp/runs
    python benchmarks/torchrl_scripts.py --sota ... --set compile.compile=True --set compile.cudagraphs=True

Budgets: ``smoke`` (a few thousand frames, to see that every script finishes) and
``learning`` (50k frames of DDPG/TD3/SAC on HalfCheetah-v5, 100k of PPO; DQN on
CartPole-v1 100k).
"""

from __future__ import annotations

import argparse
import csv
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench_rollout import find_reference_python

# script -> (folder, file, hydra overrides by budget)
_OFF_POLICY_SMOKE = [
    "env.name=HalfCheetah-v5", "collector.total_frames=4000", "collector.init_random_frames=1000",
    "collector.frames_per_batch=500", "logger.eval_iter=2000", "replay_buffer.size=10000",
    "optim.batch_size=64", "logger.mode=offline",
]
_OFF_POLICY_LEARNING = [
    "env.name=HalfCheetah-v5", "collector.total_frames=50000", "collector.init_random_frames=5000",
    "collector.frames_per_batch=1000", "logger.eval_iter=10000", "replay_buffer.size=100000",
    "logger.mode=offline",
]
SCRIPTS: dict[str, tuple[str, str, dict[str, list[str]]]] = {
    "ddpg": ("ddpg", "ddpg.py", {"smoke": _OFF_POLICY_SMOKE, "learning": _OFF_POLICY_LEARNING}),
    "td3": ("td3", "td3.py", {"smoke": _OFF_POLICY_SMOKE, "learning": _OFF_POLICY_LEARNING}),
    # SAC's config steps 8 envs whose 1000-step episodes end together, and the script logs the
    # 8 returns as one metric: a list, which the CSV logger of either library refuses (the
    # reference's default, wandb, keeps lists). Past 8k frames it runs one env, as DDPG's config.
    "sac": ("sac", "sac.py", {"smoke": _OFF_POLICY_SMOKE,
                              "learning": [*_OFF_POLICY_LEARNING, "collector.env_per_collector=1"]}),
    "ppo": ("ppo", "ppo_mujoco.py", {
        "smoke": ["env.env_name=HalfCheetah-v5", "collector.total_frames=4096", "collector.frames_per_batch=2048",
                  "logger.test_interval=4096", "logger.num_test_episodes=1", "loss.ppo_epochs=2"],
        "learning": ["env.env_name=HalfCheetah-v5", "collector.total_frames=100000", "logger.test_interval=50000",
                     "logger.num_test_episodes=2"],
    }),
    "dqn": ("dqn", "dqn_cartpole.py", {
        "smoke": ["collector.total_frames=4000", "collector.init_random_frames=1000", "collector.frames_per_batch=500",
                  "collector.annealing_frames=2000", "logger.test_interval=2000", "logger.num_test_episodes=2",
                  "loss.num_updates=10"],
        "learning": ["collector.total_frames=100000", "collector.annealing_frames=50000",
                     "logger.test_interval=25000"],
    }),
}
COMMON = ["logger.backend=csv", "logger.video=False"]


def rewrite_for_cadence(folder: Path) -> None:
    """The one word a user changes: ``torchrl`` becomes ``cadence`` (and the reference's
    private ``torchrl._utils`` becomes the public ``cadence.utils``)."""
    for path in folder.rglob("*.py"):
        text = path.read_text()
        text = text.replace("torchrl._utils", "cadence.utils")
        text = re.sub(r"\btorchrl\b", "cadence", text)
        path.write_text(text)


@dataclass
class Outcome:
    finished: bool
    wall_s: float
    eval_return: float | None
    train_return: float | None
    error: str = ""


def _last_value(run_dir: Path, name: str) -> float | None:
    """The last value of a scalar the CSV logger wrote (``<exp>/scalars/<name>.csv``)."""
    files = sorted(run_dir.rglob(f"scalars/{name}.csv"))
    if not files:
        return None
    rows = [row for row in csv.reader(files[-1].open()) if row]
    try:
        return float(rows[-1][-1])
    except (IndexError, ValueError):
        return None


def run_script(python: str, source: Path, name: str, budget: str, extra: list[str], work: Path,
               cadence: bool, timeout_s: float) -> Outcome:
    folder_name, file_name, budgets = SCRIPTS[name]
    folder = work / ("cadence" if cadence else "torchrl") / name
    shutil.copytree(source / folder_name, folder)
    if cadence:
        rewrite_for_cadence(folder)
    out = folder / "out"
    command = [python, file_name, *budgets[budget], *COMMON, *extra, f"hydra.run.dir={out}"]
    start = time.perf_counter()
    try:
        result = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return Outcome(False, time.perf_counter() - start, None, None, f"timed out after {timeout_s:.0f} s")
    wall = time.perf_counter() - start
    (folder / "stdout.txt").write_text(result.stdout)  # kept with --keep: warnings, timings
    (folder / "stderr.txt").write_text(result.stderr)
    error = ""
    if result.returncode != 0:
        lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
        error = " | ".join(lines[-3:])[-600:]
    return Outcome(result.returncode == 0, wall, _last_value(out, "eval/reward"), _last_value(out, "train/reward"),
                   error)


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sota", required=True, type=Path, help="a checkout of the reference's sota-implementations/")
    parser.add_argument("--scripts", default=",".join(SCRIPTS), help=f"comma-separated, of {', '.join(SCRIPTS)}")
    parser.add_argument("--budget", choices=("smoke", "learning"), default="smoke")
    parser.add_argument("--reference-python", default=None, help="python of a venv holding torchrl 0.14.1")
    parser.add_argument("--skip-reference", action="store_true")
    parser.add_argument("--skip-cadence", action="store_true")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per run")
    parser.add_argument("--keep", type=Path, default=None, help="run in this folder and keep it (else a temporary one)")
    parser.add_argument("--set", dest="extra", action="append", default=[], metavar="KEY=VALUE",
                        help="one more hydra override for both libraries (repeatable), e.g. compile.compile=True")
    args = parser.parse_args(argv)

    names = [name.strip() for name in args.scripts.split(",") if name.strip()]
    unknown = [name for name in names if name not in SCRIPTS]
    if unknown:
        parser.error(f"unknown scripts {unknown}; valid: {', '.join(SCRIPTS)}")
    if not all((args.sota / SCRIPTS[name][0] / SCRIPTS[name][1]).is_file() for name in names):
        parser.error(f"{args.sota} is not a sota-implementations checkout holding {names}")
    reference = None
    if not args.skip_reference:
        reference, why = find_reference_python(args.reference_python)
        print(f"reference: {why}" if reference else f"reference: skipped ({why})", flush=True)
    work = args.keep if args.keep is not None else Path(tempfile.mkdtemp(prefix="torchrl-scripts-"))
    work.mkdir(parents=True, exist_ok=True)

    rows = []
    for name in names:
        outcomes: dict[str, Outcome] = {}
        contenders = [] if args.skip_cadence else [("cadence", sys.executable)]
        if reference:
            contenders.append(("torchrl", reference))
        for library, python in contenders:
            outcome = run_script(python, args.sota, name, args.budget, args.extra, work, library == "cadence",
                                 args.timeout)
            outcomes[library] = outcome
            state = "finished" if outcome.finished else f"FAILED: {outcome.error}"
            print(f"{name:5s} {library:8s} {outcome.wall_s:8.1f} s  eval {_number(outcome.eval_return):>9s}  "
                  f"train {_number(outcome.train_return):>9s}  {state}", flush=True)
        rows.append((name, outcomes))

    print()
    print(f"budget: {args.budget}" + (f", with {' '.join(args.extra)}" if args.extra else ""))
    print("| script | library | finished | wall-clock (s) | eval return | train return | cadence/torchrl wall |")
    print("|---|---|---|---|---|---|---|")
    for name, outcomes in rows:
        ratio = "-"
        if "cadence" in outcomes and "torchrl" in outcomes and all(o.finished for o in outcomes.values()):
            ratio = f"{outcomes['cadence'].wall_s / outcomes['torchrl'].wall_s:.2f}"
        for library, outcome in outcomes.items():
            print(f"| {name} | {library} | {'yes' if outcome.finished else 'no'} | {outcome.wall_s:.1f} | "
                  f"{_number(outcome.eval_return)} | {_number(outcome.train_return)} | "
                  f"{ratio if library == 'cadence' else ''} |")
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if all(o.finished for _, outcomes in rows for o in outcomes.values()) else 1


if __name__ == "__main__":
    sys.exit(main())

"""Learning results: DDPG on Pendulum-v1, Cadence's trainer against torchrl's, seed by seed.

What it measures (the learning-results issue): DDPG on Pendulum-v1 for ``--total-frames``
environment steps (15k), with a deterministic evaluation (exploration off; the mean return
of ``TrainConfig.eval_episodes`` episodes) every 1000 frames, for each of ``--seeds`` (0, 1, 2):

* ``cadence``: ``cadence train ddpg``, that is ``TrainingRun.create(TrainConfig(seed=s,
  ...)).run()`` with ``TrainConfig``'s defaults (no progress bar, video, plot or
  TensorBoard), its curve read back from the run folder's ``metrics.csv``;
* ``torchrl``: the same algorithm built from torchrl 0.14.1's own classes the way its
  sota-implementations do (``benchmarks/_reference_ddpg.py``, run with the reference
  venv's python), with the same hyperparameters, taken from the same ``TrainConfig``.

Every run is a subprocess of its own, in the order cadence s0, torchrl s0, cadence s1, ...,
so that the machine's load hits both libraries alike. Both clocks start after the imports,
before the envs and networks are built: Cadence's ``wall_s`` as its trainer logs it
(construction, collection, updates, evaluations and checkpoints), torchrl's ``wall_s`` plus
its ``construction_s``. An evaluation is stamped with the time at which it starts (so the
time to a return leaves out the evaluation that measured it), in both libraries; the total
time includes every evaluation. A threshold counts as reached at the first evaluation whose
return is at or above it.

On a shared 2-core machine, torch's default of 2 threads per process slows the updates
down many times over whenever another process takes a core (the threads wait on each
other): both libraries run with ``TrainConfig.threads`` (1) unless ``--threads`` says otherwise.

Printed: a table per library and seed (evaluation return at a third, two thirds and all of
the budget, i.e. 5k/10k/15k frames by default; the best and final returns; frames and
seconds to first reach -250 and -200; total seconds), a summary line per library, the
issue's checks with PASS/FAIL (for Cadence; torchrl's for comparison) and the wall-clock
ratios. The curves go to a PNG (return against frames, and against seconds).

The issue's checks:

* every seed reaches -200 or better by 15k frames: some evaluation at or before the budget
  returns >= -200 ("reached"; the table also shows "final", the evaluation at the budget);
* wall-clock time to -250 under 60 s on the 2-core development machine, for every seed.

Usage (from the repository root; a full run takes 10+ minutes on 2 cores)::

    python benchmarks/bench_learning.py                         # 3 seeds x 15k frames, both libraries
    python benchmarks/bench_learning.py --skip-reference        # Cadence only
    python benchmarks/bench_learning.py --seeds 0 --total-frames 3000 --plot /tmp/curve.png
    python benchmarks/bench_learning.py --threads 1 --json learning.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_rollout import REPO_ROOT, find_reference_python  # noqa: E402  (the reference venv, found once)

REFERENCE_DDPG = Path(__file__).resolve().parent / "_reference_ddpg.py"
DEFAULT_PLOT = Path(__file__).resolve().parent / "learning_pendulum.png"
SOLVED = -200.0  # the target return
CLOSE = -250.0  # the return whose wall-clock time the issue bounds
TIME_LIMIT_S = 60.0

# Runs in Cadence's python: one training run; prints its summary (JSON) as the last line.
CADENCE_SCRIPT = """
import json, os, sys
from cadence.trainers.config import TrainConfig
from cadence.trainers.training import TrainingRun
with open(os.devnull, "w") as out:
    summary = TrainingRun.create(TrainConfig(**json.loads(sys.argv[1])), overwrite=True, out=out).run()
print(json.dumps(summary))
"""


@dataclasses.dataclass
class Run:
    """One training run's evaluation curve and clocks."""

    library: str
    seed: int
    frames: list[int]  # at each evaluation
    wall_s: list[float]  # seconds since the start of construction, at each evaluation
    eval_return: list[float]
    train_return: list[float | None]
    total_s: float  # construction + training (the clock of ``wall_s`` at the end)
    process_s: float  # the subprocess, start to exit (python start-up and imports included)
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    def first_reach(self, threshold: float) -> tuple[int, float] | None:
        """(frames, seconds) of the first evaluation at or above ``threshold``, or None."""
        for frames, wall, value in zip(self.frames, self.wall_s, self.eval_return):
            if value >= threshold:
                return frames, wall
        return None

    def eval_at(self, frames: int) -> float | None:
        """The return of the last evaluation at or before ``frames``."""
        values = [value for f, value in zip(self.frames, self.eval_return) if f <= frames]
        return values[-1] if values else None

    def best(self, budget: int) -> float | None:
        values = [value for f, value in zip(self.frames, self.eval_return) if f <= budget]
        return max(values) if values else None

    def final(self, budget: int) -> float | None:
        """The evaluation at the budget (None if the run stopped short of it)."""
        return self.eval_return[-1] if self.frames and self.frames[-1] >= budget else None

    def seconds_to(self, threshold: float) -> float:
        hit = self.first_reach(threshold)
        return hit[1] if hit else math.inf


# ---------------------------------------------------------------------------- the two libraries
def base_config(total_frames: int) -> Any:
    """Cadence's ``TrainConfig`` defaults (DDPG on Pendulum-v1), quiet, for ``total_frames``."""
    from cadence.trainers.config import TrainConfig

    config = TrainConfig(total_frames=total_frames, progress=False, video=False, plot=False, tensorboard=False)
    if config.algorithm != "ddpg" or config.num_envs != 1 or config.max_episode_steps != 0:
        raise SystemExit(f"bench_learning: expected TrainConfig to default to DDPG on one env, got {config}")
    return config.validate()


def run_cadence(config: Any, runs_dir: Path) -> Run:
    """One ``cadence train ddpg`` run in a subprocess; its curve from ``metrics.csv``."""
    from cadence.trainers.reporting import read_csv

    fields = dataclasses.replace(config, name=f"ddpg-pendulum-seed{config.seed}", runs_dir=str(runs_dir)).to_dict()
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-c", CADENCE_SCRIPT, json.dumps(fields)],
        capture_output=True, text=True, cwd=REPO_ROOT,
    )
    process_s = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(f"the Cadence run (seed {config.seed}) failed (exit {result.returncode}):\n"
                           f"{result.stderr[-3000:]}")
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    rows = [row for row in read_csv(Path(summary["run"]) / "metrics.csv") if row.get("eval_return") is not None]
    return Run(
        library="cadence",
        seed=config.seed,
        frames=[int(row["frames"]) for row in rows],
        wall_s=[float(row["wall_s"]) for row in rows],
        eval_return=[float(row["eval_return"]) for row in rows],
        train_return=[row.get("train_return") for row in rows],
        total_s=float(summary["wall_s"]),
        process_s=process_s,
        extra={"updates": summary["updates"], "threads": config.threads, "run_folder": summary["run"]},
    )


def reference_arguments(config: Any) -> list[str]:
    """``_reference_ddpg.py``'s options for the hyperparameters of ``config``."""
    from cadence.trainers.environments import episode_step_limit

    return [
        "--env", config.env,
        "--seed", str(config.seed),
        "--total-frames", str(config.total_frames),
        "--frames-per-batch", str(config.frames_per_batch),
        "--init-random-frames", str(config.init_random_frames),
        "--buffer-size", str(config.buffer_size),
        "--batch-size", str(config.batch_size),
        "--updates-per-frame", str(config.updates_per_frame),
        "--hidden-sizes", ",".join(str(size) for size in config.hidden_sizes),
        "--actor-lr", str(config.actor_lr),
        "--critic-lr", str(config.critic_lr),
        "--gamma", str(config.gamma),
        "--tau", str(config.tau),
        "--exploration-noise", str(config.exploration_noise),
        "--eval-interval", str(config.eval_interval),
        "--eval-episodes", str(config.eval_episodes),
        "--eval-max-steps", str(episode_step_limit(config)),
    ]


def run_torchrl(python: str, config: Any) -> Run:
    """One ``_reference_ddpg.py`` run with torchrl's python; its curve from its JSON lines."""
    command = [python, str(REFERENCE_DDPG), *reference_arguments(config)]
    if config.threads:
        command += ["--threads", str(config.threads)]
    start = time.perf_counter()
    # cwd "/": keep this repository (and its ``cadence``) off the reference's path
    result = subprocess.run(command, capture_output=True, text=True, cwd="/")
    process_s = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(f"the torchrl run (seed {config.seed}) failed (exit {result.returncode}):\n"
                           f"{result.stderr[-3000:]}")
    records = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    done = records[-1]
    if not done.get("done"):
        raise RuntimeError(
            f"the torchrl run (seed {config.seed}) ended without its final line:\n{result.stdout[-2000:]}"
        )
    construction_s = float(done["construction_s"])
    evaluations = [record for record in records if "eval_return" in record]
    return Run(
        library="torchrl",
        seed=config.seed,
        frames=[int(record["frames"]) for record in evaluations],
        wall_s=[round(construction_s + float(record["wall_s"]), 4) for record in evaluations],
        eval_return=[float(record["eval_return"]) for record in evaluations],
        train_return=[record.get("train_return") for record in evaluations],
        total_s=round(construction_s + float(done["wall_s"]), 4),
        process_s=process_s,
        extra={"construction_s": construction_s, "eval_s": sum(record["eval_s"] for record in evaluations)},
    )


# ---------------------------------------------------------------------------- report
def number(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def reach_cell(run: Run, threshold: float) -> str:
    hit = run.first_reach(threshold)
    return "never" if hit is None else f"{hit[0]:,} / {hit[1]:.1f} s"


def times(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def seconds(value: float) -> str:
    return "never" if math.isinf(value) else f"{value:.1f} s"


def kilo(frames: int) -> str:
    return f"{frames / 1000:.1f}".removesuffix(".0") + "k"


def print_table(runs: list[Run], budget: int) -> None:
    marks = [budget // 3, 2 * budget // 3, budget]
    header = [
        "library", "seed", *(f"eval @{kilo(mark)}" for mark in marks), "best", "final",
        f"to {CLOSE:.0f} (frames / s)", f"to {SOLVED:.0f} (frames / s)", "total s", "process s",
    ]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for run in runs:
        cells = [
            run.library, str(run.seed), *(number(run.eval_at(mark)) for mark in marks),
            number(run.best(budget)), number(run.final(budget)),
            reach_cell(run, CLOSE), reach_cell(run, SOLVED), f"{run.total_s:.1f}", f"{run.process_s:.1f}",
        ]
        print("| " + " | ".join(cells) + " |")


def summarize(runs: list[Run], budget: int) -> dict[str, Any]:
    """Per-library figures: seeds reaching -200, median seconds to -250 and in all."""
    reached = [run.best(budget) is not None and run.best(budget) >= SOLVED for run in runs]
    final = [run.final(budget) is not None and run.final(budget) >= SOLVED for run in runs]
    return {
        "seeds": len(runs),
        "reached_solved": sum(reached),
        "final_solved": sum(final),
        "median_s_to_close": statistics.median(run.seconds_to(CLOSE) for run in runs),
        "median_s_to_solved": statistics.median(run.seconds_to(SOLVED) for run in runs),
        "median_total_s": statistics.median(run.total_s for run in runs),
        "every_seed_reached_solved": all(reached),
        "every_seed_close_under_limit": all(run.seconds_to(CLOSE) < TIME_LIMIT_S for run in runs),
    }


def ratio(torchrl_s: float, cadence_s: float) -> float | None:
    if math.isinf(torchrl_s) or math.isinf(cadence_s) or cadence_s <= 0:
        return None
    return torchrl_s / cadence_s


def plot(runs: list[Run], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    from matplotlib import pyplot as plt

    seeds = sorted({run.seed for run in runs})
    colors = {seed: plt.get_cmap("tab10")(index % 10) for index, seed in enumerate(seeds)}
    figure, (by_frames, by_time) = plt.subplots(1, 2, figsize=(13, 4.8), sharey=True)
    for run in runs:
        style = "-" if run.library == "cadence" else "--"
        label = f"{run.library} seed {run.seed}"
        for axes, x in ((by_frames, run.frames), (by_time, run.wall_s)):
            axes.plot(x, run.eval_return, style, marker="o", markersize=3, color=colors[run.seed], label=label)
    for axes, xlabel in ((by_frames, "environment frames"), (by_time, "wall-clock seconds (from construction)")):
        axes.axhline(SOLVED, color="black", linewidth=1, label=f"{SOLVED:.0f}")
        axes.axhline(CLOSE, color="gray", linewidth=1, linestyle=":", label=f"{CLOSE:.0f}")
        axes.set_xlabel(xlabel)
        axes.grid(alpha=0.3)
    by_time.axvline(TIME_LIMIT_S, color="gray", linewidth=1, linestyle="-.", label=f"{TIME_LIMIT_S:.0f} s")
    by_frames.set_ylabel("evaluation return (deterministic)")
    by_frames.legend(loc="lower right", fontsize=8)
    by_time.legend(loc="lower right", fontsize=8)
    figure.suptitle(title)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)


# ---------------------------------------------------------------------------- main
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (default: %(default)s)")
    parser.add_argument("--total-frames", type=int, default=15_000, help="frames per run (default: %(default)s)")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads in every run (default: TrainConfig's, 1; 0: torch's default)")
    parser.add_argument("--skip-reference", action="store_true", help="do not run torchrl")
    parser.add_argument("--reference-python", default=None, help="python of a venv holding torchrl 0.14.1")
    parser.add_argument("--runs-dir", default=None,
                        help="where Cadence's run folders go (default: a temporary folder, removed at the end)")
    parser.add_argument("--plot", default=str(DEFAULT_PLOT), help="the curves' PNG (default: %(default)s)")
    parser.add_argument("--json", default=None, help="also write every number to this JSON file")
    args = parser.parse_args(argv)
    try:
        args.seeds = [int(seed) for seed in args.seeds.split(",") if seed.strip()]
    except ValueError:
        parser.error(f"--seeds takes comma-separated integers, got {args.seeds!r}")
    if not args.seeds or args.total_frames < 1 or (args.threads is not None and args.threads < 0):
        parser.error("need at least one seed, --total-frames >= 1 and --threads >= 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import gymnasium
    import torch

    import cadence

    config = base_config(args.total_frames)
    if args.threads is not None:
        config = dataclasses.replace(config, threads=args.threads)
    budget = config.total_frames
    if args.skip_reference:
        reference, why = None, "--skip-reference"
    else:
        reference, why = find_reference_python(args.reference_python)
    print(f"python {sys.version.split()[0]}, torch {torch.__version__}, gymnasium {gymnasium.__version__}, "
          f"cadence {cadence.__version__}; {os.cpu_count()} cores, {platform.platform()}")
    print(f"reference: {why}" if reference else f"reference: skipped ({why})")
    print(f"DDPG on {config.env}, seeds {args.seeds}, {budget:,} frames, evaluation every {config.eval_interval} "
          f"frames ({config.eval_episodes} episode{'s' if config.eval_episodes != 1 else ''}), torch threads: "
          f"{config.threads or f'default ({torch.get_num_threads()})'}")
    print(f"hyperparameters (TrainConfig's defaults): frames_per_batch={config.frames_per_batch}, "
          f"init_random_frames={config.init_random_frames}, batch_size={config.batch_size}, "
          f"updates_per_frame={config.updates_per_frame}, hidden={config.hidden_sizes}, "
          f"lr={config.actor_lr}/{config.critic_lr}, gamma={config.gamma}, tau={config.tau}, "
          f"noise={config.exploration_noise}")
    print()

    runs_dir = Path(args.runs_dir) if args.runs_dir else Path(tempfile.mkdtemp(prefix="bench-learning-"))
    runs: list[Run] = []
    try:
        for seed in args.seeds:
            seeded = dataclasses.replace(config, seed=seed)
            contenders = [("cadence", lambda: run_cadence(seeded, runs_dir))]
            if reference:
                contenders.append(("torchrl", lambda: run_torchrl(reference, seeded)))
            for name, launch in contenders:
                print(f"{name:<8} seed {seed}: training ...", end=" ", flush=True)
                run = launch()
                runs.append(run)
                print(f"{run.frames[-1] if run.frames else 0:,} frames in {run.total_s:.1f} s, "
                      f"final {number(run.final(budget))}, best {number(run.best(budget))}, "
                      f"to {CLOSE:.0f}: {seconds(run.seconds_to(CLOSE))}", flush=True)
    finally:
        if not args.runs_dir:
            shutil.rmtree(runs_dir, ignore_errors=True)
    print()
    print_table(runs, budget)
    print()

    libraries = [name for name in ("cadence", "torchrl") if any(run.library == name for run in runs)]
    summaries = {name: summarize([run for run in runs if run.library == name], budget) for name in libraries}
    for name, figures in summaries.items():
        print(f"{name}: {figures['reached_solved']} of {figures['seeds']} seeds reach {SOLVED:.0f} by "
              f"{kilo(budget)} frames (final evaluation >= {SOLVED:.0f}: {figures['final_solved']} of "
              f"{figures['seeds']}); median time to {CLOSE:.0f}: {seconds(figures['median_s_to_close'])}, "
              f"to {SOLVED:.0f}: {seconds(figures['median_s_to_solved'])}; median total "
              f"{figures['median_total_s']:.1f} s")
    print()
    checks = {}
    for name in libraries:
        label = "the issue" if name == "cadence" else "for comparison"
        figures = summaries[name]
        checks[name] = {
            f"every seed >= {SOLVED:.0f} by {kilo(budget)} frames": figures["every_seed_reached_solved"],
            f"every seed to {CLOSE:.0f} in < {TIME_LIMIT_S:.0f} s": figures["every_seed_close_under_limit"],
        }
        for check, passed in checks[name].items():
            print(f"{'PASS' if passed else 'FAIL'}  {name} ({label}): {check}")

    ratios: dict[str, Any] = {}
    if "torchrl" in summaries:
        print()
        print("wall-clock, torchrl seconds / cadence seconds (above 1: Cadence is faster):")
        by_seed = {(run.library, run.seed): run for run in runs}
        for seed in args.seeds:
            ours, theirs = by_seed[("cadence", seed)], by_seed[("torchrl", seed)]
            total = ratio(theirs.total_s, ours.total_s)
            close = ratio(theirs.seconds_to(CLOSE), ours.seconds_to(CLOSE))
            ratios[str(seed)] = {"total": total, "to_close": close}
            print(f"  seed {seed}: {budget:,} frames {times(total)}, to {CLOSE:.0f} {times(close)}")
        total = ratio(summaries["torchrl"]["median_total_s"], summaries["cadence"]["median_total_s"])
        close = ratio(summaries["torchrl"]["median_s_to_close"], summaries["cadence"]["median_s_to_close"])
        ratios["median"] = {"total": total, "to_close": close}
        print(f"  medians: {budget:,} frames {times(total)}, to {CLOSE:.0f} {times(close)}")

    plot(runs, Path(args.plot), f"DDPG on {config.env}: deterministic evaluation every {config.eval_interval} frames "
                                f"(Cadence solid, torchrl 0.14.1 dashed)")
    print()
    print(f"curves: {args.plot}")
    if args.json:
        def finite(value: Any) -> Any:  # JSON has no infinity: "never" is null
            return None if isinstance(value, float) and math.isinf(value) else value

        document = {
            "environment": {"python": sys.version.split()[0], "torch": torch.__version__,
                            "gymnasium": gymnasium.__version__, "cadence": cadence.__version__,
                            "cores": os.cpu_count(), "platform": platform.platform(), "reference": why},
            "config": config.to_dict(),
            "threads": config.threads,
            "runs": [
                {**dataclasses.asdict(run),
                 "first_close": run.first_reach(CLOSE), "first_solved": run.first_reach(SOLVED),
                 "best": run.best(budget), "final": run.final(budget)}
                for run in runs
            ],
            "summary": {name: {key: finite(value) for key, value in figures.items()}
                        for name, figures in summaries.items()},
            "checks": checks,
            "ratios_torchrl_over_cadence_seconds": ratios,
        }
        Path(args.json).write_text(json.dumps(document, indent=2) + "\n")
        print(f"numbers: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

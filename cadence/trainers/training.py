"""One training run of ``cadence train``: the loop, its run folder and its checkpoints.

The loop is the seed tutorial's: a collector fills a replay buffer, and after each
batch (once ``init_random_frames`` are collected) the agent takes
``updates_per_frame`` gradient steps per collected frame on samples of the buffer;
every ``eval_interval`` frames the deterministic policy plays ``eval_episodes``
episodes on an env of its own.

A run folder (``runs/<name>/``) holds:

* ``cadence-run.json``: the marker that makes it a run folder (see ``run_folder``);
* ``config.toml``: the config (``cadence train --config runs/<name>/config.toml`` repeats it);
* ``episodes.csv``, ``metrics.csv``, ``tensorboard/``: the logs (see ``reporting``);
* ``checkpoints/``: the latest two checkpoints, written every ``checkpoint_interval``
  frames and at the end, crash-safely (a new one is complete before it replaces the
  old one): networks, optimiser, replay buffer (memory-mapped files), collector,
  simulators, every random generator, the logs' lengths (files: see
  ``checkpoint_files``). Resuming reads the newest; if one of its files is damaged,
  it says so and falls back to the one before it;
* ``buffer/``: the replay buffer's working files;
* at the end: ``policy.pt`` (what ``cadence eval`` plays), ``returns.png``,
  ``video.mp4`` and ``summary.json``.

A run stopped at any point (even by SIGKILL) resumes from its latest checkpoint with
``TrainingRun.resume`` (``cadence train --resume runs/<name>``): it loses the frames
since that checkpoint, and goes on to produce the same numbers as an unbroken run of
the same config (the simulators are restored where they stood; see ``simulators``).
A run stopped before its first checkpoint starts over, its logs emptied.

Examples:
    >>> import tempfile
    >>> from cadence.trainers.config import TrainConfig
    >>> config = TrainConfig(total_frames=300, init_random_frames=100, eval_interval=150, hidden_sizes=[16],
    ...                      batch_size=16, progress=False, video=False, plot=False, tensorboard=False)
    >>> run = TrainingRun.create(config, runs_dir=tempfile.mkdtemp(), out=open(os.devnull, "w"))
    >>> summary = run.run()
    >>> summary["frames"], summary["evaluations"], summary["updates"]
    (300, 2, 250)
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule

from cadence.collectors import SyncDataCollector
from cadence.data import LazyMemmapStorage, RandomSampler, TensorDictReplayBuffer
from cadence.data.replay_buffers.checkpoint import CheckpointError, checkpoint_history, write_checkpoint
from cadence.trainers.agents import Agent, build_agent, continuous_action_spec
from cadence.trainers.checkpoint_files import (
    KEPT_CHECKPOINTS,
    numpy_rng_from_state,
    numpy_rng_state,
    read_policy_file,
    read_training_state,
    write_training_state,
)
from cadence.trainers.config import ConfigError, TrainConfig, config_from_mapping, load_config_file
from cadence.trainers.environments import check_env_name, episode_step_limit, make_env
from cadence.trainers.evaluation import evaluate_policy, record_video
from cadence.trainers.reporting import MetricsLog, ProgressDisplay, plot_returns
from cadence.trainers.resources import check_footprint
from cadence.trainers.run_folder import (
    MARKER,
    create_run_folder,
    is_run_folder,
    remove_run_folder,
    run_key,
    unsafe_entries,
)
from cadence.trainers.simulators import load_simulator_state, simulator_state

__all__ = ["EpisodeTracker", "TrainingRun", "is_run_folder", "load_policy"]

# fields a resumed run may change: how long it runs and what it shows, not what it learns
RESUMABLE_FIELDS = ("total_frames", "progress", "video", "plot", "tensorboard", "checkpoint_interval", "threads")
# what a checkpoint's state.pt must hold
STATE_ENTRIES = (
    "frames", "updates", "evaluations", "elapsed_s", "update_credit", "losses", "recent_returns", "last_eval",
    "best_eval", "agent", "generator", "collector", "env_rng", "episodes", "log_sizes", "torch_rng", "numpy_rng",
)


def _run_config(folder: Path) -> TrainConfig:
    """The config a run folder holds, validated; ``ConfigError`` if ``folder`` is not a
    run folder, holds links that writing would follow out of it, or its config is not
    valid or names an env module inside it. Nothing is written before this passes."""
    if not is_run_folder(folder):
        raise ConfigError(f"{folder} is not a run folder of cadence train (no {MARKER} in it)")
    unsafe = unsafe_entries(folder)
    if unsafe:
        shown = ", ".join(str(path.relative_to(folder)) for path in unsafe[:5])
        more = f" and {len(unsafe) - 5} more" if len(unsafe) > 5 else ""
        raise ConfigError(
            f"{folder} holds symbolic links, hard links or special files ({shown}{more}); writing through them "
            "would change files outside the run, so the folder is refused: remove them, or copy the run without them"
        )
    config = config_from_mapping(load_config_file(folder / "config.toml"), str(folder / "config.toml")).validate()
    check_env_name(config.env, run_folder=folder)
    return config


def _check_fits(config: TrainConfig, runs_dir: Path) -> None:
    """Refuses, before anything is written, a config whose env the algorithm cannot act in
    or whose run would need more memory or disk than there is."""
    env = make_env(config, seed=config.seed)
    try:
        continuous_action_spec(config, env)
        check_footprint(config, env, runs_dir)
    finally:
        env.close()


def load_policy(folder: str | os.PathLike[str]) -> tuple[TrainConfig, TensorDictModule, str]:
    """The deterministic policy of a run: from ``policy.pt`` (a finished run) or else its
    latest checkpoint (a run still going, or stopped).

    Returns:
        The run's config, the policy, and the file its weights came from.

    Raises:
        ConfigError: if ``folder`` is not a run folder or holds no weights yet.
        CheckpointError: if the file of the weights is damaged or does not fit the
            run's networks (naming the file).

    Examples:
        >>> import tempfile
        >>> from cadence.trainers.config import TrainConfig
        >>> run = TrainingRun.create(TrainConfig(name="fresh"), runs_dir=tempfile.mkdtemp())
        >>> load_policy(run.folder)
        Traceback (most recent call last):
        ...
        cadence.trainers.config.ConfigError: ...fresh holds no policy yet: neither policy.pt nor a checkpoint
    """
    folder = Path(folder)
    config = _run_config(folder)
    if (folder / "policy.pt").is_file():
        source = folder / "policy.pt"
        weights = read_policy_file(source)
    else:
        history = checkpoint_history(folder / "checkpoints")
        if not history:
            raise ConfigError(f"{folder} holds no policy yet: neither policy.pt nor a checkpoint")
        source, weights = _checkpointed_policy(history)
    env = make_env(config, seed=config.seed)
    try:
        check_footprint(config, env, None)  # a handed-over config may ask for networks no machine holds
        policy = build_agent(config, env).policy
    finally:
        env.close()
    _load_into(policy, weights, source)
    return config, policy, str(source)


def _checkpointed_policy(history: list[Path]) -> tuple[Path, Any]:
    """The policy weights of the newest readable checkpoint in ``history``, and their file."""
    problems = []
    for directory in history:
        try:
            state, _, _ = read_training_state(directory, key=None, required=("agent",))
        except CheckpointError as err:
            problems.append(str(err))
            continue
        agent = state["agent"]
        if isinstance(agent, dict) and isinstance(agent.get("policy"), dict):
            return directory / "state.pt", agent["policy"]
        problems.append(f"{directory / 'state.pt'}: its 'agent' entry holds no 'policy' weights")
    raise CheckpointError("no readable policy in the checkpoints: " + "; ".join(problems))


def _load_into(module: Any, state: Any, source: Path) -> None:
    """``module.load_state_dict(state)``, its failures a ``CheckpointError`` naming ``source``."""
    try:
        module.load_state_dict(state)
    except Exception as err:  # wrong keys, shapes or types: a file of another run or algorithm
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise CheckpointError(f"{source}: does not fit this run's {type(module).__name__}: {first}") from None


class EpisodeTracker:
    """Sums rewards and counts steps per env across batches, and reports the episodes
    that finish.

    Args:
        num_envs: how many envs the batches hold.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> tracker = EpisodeTracker(1)
        >>> batch = TensorDict({"next": {"reward": torch.ones(4, 1), "done": torch.tensor([[0], [1], [0], [0]]).bool()}}, [4])
        >>> tracker.update(batch, frames_before=0)
        [(2, 2.0, 2)]
        >>> tracker.state_dict()["returns"].tolist()
        [2.0]
    """

    def __init__(self, num_envs: int) -> None:
        self.returns = torch.zeros(num_envs, dtype=torch.float64)
        self.lengths = torch.zeros(num_envs, dtype=torch.int64)

    def update(self, batch: TensorDictBase, frames_before: int) -> list[tuple[int, float, int]]:
        """Adds a batch ``[*envs, T]``; returns ``(frames at its end, return, length)`` of
        each episode that ended in it (frames count every env's steps)."""
        reward = batch.get(("next", "reward")).reshape(-1, batch.batch_size[-1]).double()
        done = batch.get(("next", "done")).reshape(-1, batch.batch_size[-1])
        num_envs, steps = done.shape
        finished = []
        for t in range(steps):
            self.returns += reward[:, t]
            self.lengths += 1
            for env in torch.nonzero(done[:, t]).flatten().tolist():
                frames = frames_before + (t + 1) * num_envs
                finished.append((frames, float(self.returns[env]), int(self.lengths[env])))
                self.returns[env] = 0.0
                self.lengths[env] = 0
        return finished

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The running sums (a checkpoint holds them)."""
        return {"returns": self.returns.clone(), "lengths": self.lengths.clone()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Restores :meth:`state_dict`."""
        self.returns = state["returns"].clone()
        self.lengths = state["lengths"].clone()


class TrainingRun:
    """A run of ``cadence train``: built by :meth:`create` (a new run folder) or
    :meth:`resume` (an interrupted or finished one), run by :meth:`run`.

    Args:
        config: the validated config.
        folder: the run folder.
        out: where the run prints (the summary, and a line per evaluation without a
            progress bar).

    Examples:
        >>> import tempfile
        >>> from cadence.trainers.config import TrainConfig
        >>> run = TrainingRun.create(TrainConfig(name="demo"), runs_dir=tempfile.mkdtemp())
        >>> run.folder.name, sorted(p.name for p in run.folder.iterdir())
        ('demo', ['cadence-run.json', 'checkpoints', 'config.toml'])
    """

    def __init__(self, config: TrainConfig, folder: Path, out: TextIO | None = None) -> None:
        self.config = config
        self.folder = folder
        self.out = out if out is not None else sys.stdout
        self.frames = 0
        self.updates = 0
        self.evaluations = 0
        self.elapsed_s = 0.0  # training time before this process (on resume)
        self._update_credit = 0.0  # updates owed to frames collected (updates_per_frame need not be whole)
        self._losses: dict[str, list[float]] = {}
        self._recent_returns: list[float] = []
        self._last_eval: float | None = None
        self._best_eval: float | None = None
        self._log_sizes: dict[str, int] | None = None
        self._built = False

    # ------------------------------------------------------------------ folders
    @classmethod
    def create(
        cls,
        config: TrainConfig,
        runs_dir: str | os.PathLike[str] | None = None,
        overwrite: bool = False,
        out: TextIO | None = None,
    ) -> TrainingRun:
        """A new run in ``runs_dir / config.run_name()`` (``runs_dir`` defaults to
        ``config.runs_dir``).

        Raises:
            ConfigError: for a bad value, an unknown env, an env the algorithm cannot act
                in, or a run that would not fit in memory or on disk (all checked before
                anything is written), if the folder exists and ``overwrite`` is False, or
                if it exists and is not a run folder (``overwrite`` removes only run
                folders).
        """
        config.validate()
        check_env_name(config.env)
        folder = Path(runs_dir if runs_dir is not None else config.runs_dir) / config.run_name()
        exists = folder.exists() or folder.is_symlink()
        if exists and not is_run_folder(folder):
            raise ConfigError(
                f"{folder} exists and is not a run folder of cadence train (no {MARKER} in it); "
                "it is left as it is: choose another --name"
            )
        if exists and not overwrite:
            raise ConfigError(
                f"{folder} already exists; pass --overwrite to replace it, or use cadence train --resume {folder}"
            )
        _check_fits(config, folder.parent)
        if exists:
            remove_run_folder(folder)
        create_run_folder(folder)
        (folder / "config.toml").write_text(config.to_toml())
        return cls(config, folder, out)

    @classmethod
    def resume(
        cls, folder: str | os.PathLike[str], overrides: dict[str, Any] | None = None, out: TextIO | None = None
    ) -> TrainingRun:
        """The run in ``folder``, to continue from its latest checkpoint (or from the start
        if it was stopped before its first one). ``overrides`` may change the fields of
        ``RESUMABLE_FIELDS`` (``total_frames`` to train longer, say).

        Raises:
            ConfigError: if ``folder`` is not a run folder, or ``overrides`` changes what
                the run learns.
        """
        folder = Path(folder)
        config = _run_config(folder)
        changed = config_from_mapping(overrides or {}, "command line", config)
        fixed = [
            name for name in config.to_dict()
            if name not in RESUMABLE_FIELDS and getattr(changed, name) != getattr(config, name)
        ]
        if fixed:
            raise ConfigError(
                f"--resume cannot change {', '.join(fixed)} of {folder}; a resumed run may change only "
                f"{', '.join(RESUMABLE_FIELDS)}"
            )
        changed.validate()
        _check_fits(changed, folder.parent)
        if changed != config:
            (folder / "config.toml").write_text(changed.to_toml())
        return cls(changed, folder, out)

    # ------------------------------------------------------------------ pieces
    def _build(self) -> None:
        config = self.config
        self.env = make_env(config, seed=config.seed, num_envs=config.num_envs)
        self.eval_env = make_env(config, seed=config.seed)
        self.generator = torch.Generator().manual_seed(config.seed)
        self.agent: Agent = build_agent(config, self.env, self.generator)
        self.buffer = TensorDictReplayBuffer(
            storage=LazyMemmapStorage(config.buffer_size, scratch_dir=self.folder / "buffer"),
            sampler=RandomSampler(generator=torch.Generator().manual_seed(config.seed + 1)),
            batch_size=config.batch_size,
        )
        self.collector = SyncDataCollector(
            self.env,
            self.agent.explore,
            frames_per_batch=config.frames_per_batch,
            total_frames=config.total_frames,
            init_random_frames=config.init_random_frames,
        )
        self.episodes = EpisodeTracker(config.num_envs)
        self._built = True

    # ------------------------------------------------------------------ checkpoints
    def _state(self) -> dict[str, Any]:
        return {
            "frames": self.frames,
            "updates": self.updates,
            "evaluations": self.evaluations,
            "elapsed_s": self.elapsed_s + (time.perf_counter() - self._started),
            "update_credit": self._update_credit,
            "losses": self._losses,
            "recent_returns": self._recent_returns,
            "last_eval": self._last_eval,
            "best_eval": self._best_eval,
            "agent": self.agent.state_dict(),
            "generator": self.generator.get_state(),
            "collector": self.collector.state_dict(),
            "env_rng": self.env.rng.get_state(),
            "episodes": self.episodes.state_dict(),
            "log_sizes": self.log.sizes(),
            "torch_rng": torch.get_rng_state(),
            "numpy_rng": numpy_rng_state(),
        }

    def _checkpoint(self) -> None:
        state = self._state()
        simulators = simulator_state(self.env)
        key = run_key(self.folder)

        def write(directory: Path) -> None:
            self.buffer.dumps(directory / "buffer")
            write_training_state(directory, state, simulators, key)

        write_checkpoint(self.folder / "checkpoints", write, keep=KEPT_CHECKPOINTS)

    def _restore(self) -> bool:
        """Loads the newest usable checkpoint, if there is one; True if there was.

        A checkpoint whose files are damaged is named on ``out`` and the one before it is
        tried; if none is usable, ``CheckpointError`` names each one's problem.
        """
        checkpoints = self.folder / "checkpoints"
        history = checkpoint_history(checkpoints)
        if not history:
            if (checkpoints / "LATEST").exists():
                raise CheckpointError(f"{checkpoints / 'LATEST'}: names no checkpoint folder that exists")
            return False
        problems = []
        for directory in history:
            try:
                self._restore_from(directory)
                return True
            except CheckpointError as err:
                problems.append(str(err))
                if directory != history[-1]:
                    print(f"cannot resume from {directory.name}: {err}; falling back to the checkpoint before it",
                          file=self.out, flush=True)
        raise CheckpointError(f"no usable checkpoint in {checkpoints}: " + "; ".join(problems))

    def _restore_from(self, directory: Path) -> None:
        state, simulators, note = read_training_state(directory, run_key(self.folder), STATE_ENTRIES)
        self.buffer.loads(directory / "buffer")
        source = directory / "state.pt"
        _load_into(self.agent, state["agent"], source)
        try:  # the simulators are put back below: the collector steps on where they stood
            self.collector.load_state_dict(state["collector"], continue_episodes=True)
        except Exception as err:
            raise CheckpointError(f"{source}: the collector's state does not fit: {err}") from None
        try:
            self.generator.set_state(state["generator"])
            self.env.rng.set_state(state["env_rng"])
            self.episodes.load_state_dict(state["episodes"])
            torch.set_rng_state(state["torch_rng"])
            numpy_rng_from_state(state["numpy_rng"])
        except Exception as err:  # an entry of the wrong type or size
            raise CheckpointError(f"{source}: a generator's or counter's state does not fit: {err}") from None
        if simulators is not None:
            load_simulator_state(self.env, simulators)
        else:  # a simulator whose state cannot be saved, or a snapshot refused: its episode starts over
            if note is not None:
                print(note, file=self.out, flush=True)
            self.env.set_seed(self.config.seed + state["frames"])
            self.collector.reset()
        for name in ("frames", "updates", "evaluations", "elapsed_s", "losses", "recent_returns"):
            setattr(self, name, state[name])
        self._update_credit = state["update_credit"]
        self._last_eval, self._best_eval = state["last_eval"], state["best_eval"]
        self._log_sizes = state["log_sizes"]
        return True

    # ------------------------------------------------------------------ the loop
    def _train_on(self, batch: TensorDictBase) -> None:
        self.buffer.extend(batch.reshape(-1))
        if self.frames < self.config.init_random_frames:
            return
        self._update_credit += batch.numel() * self.config.updates_per_frame
        steps = int(self._update_credit)
        self._update_credit -= steps
        for _ in range(steps):
            for name, value in self.agent.update(self.buffer.sample()).items():
                self._losses.setdefault(name, []).append(value)
        self.updates += steps

    def _evaluate(self) -> tuple[float, float]:
        config = self.config
        # each (training seed, evaluation) pair gets its own episodes: no two runs' curves share starts
        seed = int(np.random.SeedSequence([config.seed, self.evaluations]).generate_state(1)[0])
        result = evaluate_policy(
            self.agent.policy, self.eval_env, config.eval_episodes, seed=seed, max_steps=episode_step_limit(config)
        )
        self.evaluations += 1
        return result.mean_return, float(np.std(result.returns))

    def _log_row(self, eval_return: float, eval_std: float, wall_s: float, fps: float) -> None:
        recent = self._recent_returns
        row: dict[str, Any] = {
            "frames": self.frames,
            "updates": self.updates,
            "wall_s": round(wall_s, 3),
            "fps": round(fps, 1),
            "train_return": float(np.mean(recent)) if recent else None,
            "train_episodes": len(recent),
            "eval_return": eval_return,
            "eval_return_std": eval_std,
        }
        for name, values in self._losses.items():
            column = "loss_value" if name == "loss_qvalue" else name  # SAC's critic loss
            if column in ("loss_actor", "loss_value", "loss_alpha"):
                row[column] = float(np.mean(values))
        alpha = getattr(self.agent.loss, "alpha", None)
        if alpha is not None:
            row["alpha"] = float(alpha)
        self.log.row(row)
        self._losses, self._recent_returns = {}, []

    def run(self) -> dict[str, Any]:
        """Trains (from the latest checkpoint, if any) until ``total_frames``, then saves
        the policy, plots, records the video and prints the summary.

        Returns:
            The summary (also written to ``summary.json``).
        """
        threads = torch.get_num_threads()
        if self.config.threads > 0:
            torch.set_num_threads(self.config.threads)
        try:
            return self._run()
        finally:
            torch.set_num_threads(threads)

    def _run(self) -> dict[str, Any]:
        config = self.config
        self._started = time.perf_counter()
        if not self._built:
            self._build()
        resumed = self._restore()
        # without a checkpoint the run starts over: logs of a run killed before its first one are emptied
        self.log = MetricsLog(
            self.folder, tensorboard=config.tensorboard, purge_after=self.frames if resumed else None,
            start_over=not resumed,
        )
        if self._log_sizes is not None:
            self.log.truncate(self._log_sizes)
        if resumed:
            print(f"resuming {self.folder} at frame {self.frames} of {config.total_frames}", file=self.out, flush=True)
        display = ProgressDisplay(config.total_frames, self.frames, enabled=config.progress, out=self.out)
        session_start, session_frames = time.perf_counter(), self.frames
        try:
            for batch in self.collector if self.frames < config.total_frames else ():
                before = self.frames
                self.frames += batch.numel()
                for frames, episode_return, length in self.episodes.update(batch, before):
                    self.log.episode(frames, episode_return, length)
                    self._recent_returns.append(episode_return)
                self._train_on(batch)
                now = time.perf_counter()
                fps = (self.frames - session_frames) / max(now - session_start, 1e-9)
                evaluate = self.frames // config.eval_interval > before // config.eval_interval
                if evaluate or self.frames >= config.total_frames:
                    self._last_eval, eval_std = self._evaluate()
                    self._best_eval = max(self._last_eval, self._best_eval or -float("inf"))
                    self._log_row(self._last_eval, eval_std, self.elapsed_s + now - self._started, fps)
                    display.evaluated(self.frames, self._last_eval)
                display.update(self.frames, fps, self._recent_returns[-1] if self._recent_returns else None, None)
                checkpoint = self.frames // config.checkpoint_interval > before // config.checkpoint_interval
                if checkpoint or self.frames >= config.total_frames:
                    self._checkpoint()
        finally:
            display.close()
            self.collector.shutdown()
            self.log.close()
        wall_s = self.elapsed_s + time.perf_counter() - self._started
        return self._finish(wall_s)

    # ------------------------------------------------------------------ the end
    def _finish(self, wall_s: float) -> dict[str, Any]:
        config = self.config
        partial = self.folder / "policy.pt.partial"  # a policy.pt is whole or absent
        torch.save({"config": config.to_dict(), "policy": self.agent.policy.state_dict()}, partial)
        os.replace(partial, self.folder / "policy.pt")
        outputs = {"policy": str(self.folder / "policy.pt")}
        notes = []
        if config.plot:
            try:
                plot_returns(self.folder, self.folder / "returns.png", f"{config.algorithm} on {config.env}")
                outputs["plot"] = str(self.folder / "returns.png")
            except ImportError as err:
                notes.append(f"plot skipped: {err}")
        if config.video:
            try:
                video_env = make_env(config, seed=config.seed, render=True)
                record_video(self.agent.policy, video_env, self.folder / "video.mp4", seed=config.seed + 1,
                             max_steps=episode_step_limit(config))
                video_env.close()
                outputs["video"] = str(self.folder / "video.mp4")
            except Exception as err:  # noqa: BLE001 - no renderer here (no display, no GL): say so, keep the run
                notes.append(f"video skipped: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")
        summary = {
            "run": str(self.folder),
            "algorithm": config.algorithm,
            "env": config.env,
            "seed": config.seed,
            "frames": self.frames,
            "updates": self.updates,
            "evaluations": self.evaluations,
            "wall_s": round(wall_s, 2),
            "frames_per_s": round(self.frames / max(wall_s, 1e-9), 1),
            "final_eval_return": self._last_eval,
            "best_eval_return": self._best_eval,
            "outputs": outputs,
            "notes": notes,
        }
        (self.folder / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        self._print_summary(summary)
        return summary

    def _print_summary(self, summary: dict[str, Any]) -> None:
        def number(value: float | None) -> str:
            return "-" if value is None else f"{value:.1f}"

        lines = [
            f"{summary['algorithm']} on {summary['env']} (seed {summary['seed']}): {summary['frames']} frames, "
            f"{summary['updates']} updates in {summary['wall_s']:.1f} s ({summary['frames_per_s']:.0f} frames/s)",
            f"evaluation return: final {number(summary['final_eval_return'])}, "
            f"best {number(summary['best_eval_return'])}",
        ]
        lines += [f"{name:>7}: {path}" for name, path in summary["outputs"].items()]
        lines += summary["notes"]
        lines.append(f"   logs: {self.folder / 'metrics.csv'}, {self.folder / 'episodes.csv'}"
                     + (f", {self.folder / 'tensorboard'}" if self.config.tensorboard else ""))
        print("\n".join(lines), file=self.out, flush=True)

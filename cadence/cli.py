"""The ``cadence`` command line (also ``python -m cadence``).

``cadence train`` trains DDPG, TD3 or SAC on a gymnasium or dm_control env (Pendulum-v1
by default) into a run folder ``runs/<name>/``; ``cadence eval`` replays a run's policy
and records a video of it; ``cadence demo`` checks two environments and times a rollout
against a bare gymnasium loop::

    cadence train ddpg                                  # Pendulum-v1, 15k frames
    cadence train td3 --env HalfCheetah-v5 --total-frames 200000 --name cheetah
    cadence train sac --config my_run.toml --seed 3
    cadence train --resume runs/ddpg-Pendulum-v1-seed0  # after a crash, or to train longer
    cadence eval runs/ddpg-Pendulum-v1-seed0 --episodes 5
    cadence demo --steps 20000

Bad input (an unknown algorithm, env, config field, a bad value or run name, a folder that
is not a run, a damaged checkpoint or policy file) ends the command with one line on
standard error that names what is valid or what is wrong, and exit status 2.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

__all__ = ["build_parser", "main", "run_demo", "run_eval", "run_train"]


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (``cadence train: error: ...``), cut
    to a few hundred characters (argparse quotes a bad value whole)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        from cadence._utils import MAX_QUOTED

        if len(message) > 2 * MAX_QUOTED:
            message = f"{message[: 2 * MAX_QUOTED]}... ({len(message)} characters)"
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """Builds the argument parser of the ``cadence`` command.

    Returns:
        The parser, with one sub-command per action (``train``, ``eval``, ``demo``).

    Examples:
        >>> args = build_parser().parse_args(["demo", "--steps", "500"])
        >>> args.command, args.steps, args.rollout_steps, args.seed
        ('demo', 500, 200, 0)
        >>> args = build_parser().parse_args(["train", "td3", "--total-frames", "5000"])
        >>> args.algorithm, args.total_frames, args.resume
        ('td3', '5000', None)
    """
    from cadence.trainers.config import ALGORITHMS, add_config_arguments

    parser = _Parser(
        prog="cadence",
        description="Cadence: reinforcement learning on PyTorch and TensorDict.",
        allow_abbrev=False,
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=_Parser)
    train = commands.add_parser(
        "train",
        help="train DDPG, TD3 or SAC (Pendulum-v1 unless --env says otherwise)",
        description=(
            "Trains an agent into runs/<name>/: logs (CSV, TensorBoard), checkpoints, and at the end the "
            "policy, a plot of the returns and a video. Every config field below can also be set in a "
            "TOML or YAML file given with --config; the command line wins."
        ),
        allow_abbrev=False,
    )
    train.add_argument(
        "algorithm", nargs="?", metavar="ALGORITHM", help=f"one of {', '.join(ALGORITHMS)} (optional with --resume)"
    )
    train.add_argument("--config", metavar="FILE", help="a TOML (.toml) or YAML (.yaml, .yml) file of config fields")
    train.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR from its latest checkpoint")
    train.add_argument("--overwrite", action="store_true", help="replace an existing run folder of the same name")
    add_config_arguments(train)
    evaluate = commands.add_parser(
        "eval",
        help="replay a trained policy and record a video of it",
        description="Plays a run's saved policy deterministically, prints the returns and writes a video.",
        allow_abbrev=False,
    )
    evaluate.add_argument("run_dir", metavar="RUN_DIR", help="a run folder of cadence train")
    evaluate.add_argument("--episodes", type=_positive_int, default=3, help="episodes to play (default: %(default)s)")
    evaluate.add_argument("--seed", type=_seed, default=12345, help="seed of the episodes (default: %(default)s)")
    evaluate.add_argument(
        "--video", metavar="FILE", default=None, help="the video file (.mp4 or .gif; default: RUN_DIR/eval.mp4)"
    )
    evaluate.add_argument("--no-video", action="store_true", help="do not record a video")
    demo = commands.add_parser(
        "demo",
        help="check two environments, summarise their rollouts and time CartPole",
        description=(
            'Builds GymEnv("Pendulum-v1") and PendulumEnv(), runs check_env_specs on both, '
            "summarises a rollout of each, then times GymEnv(\"CartPole-v1\").rollout against "
            "a bare gymnasium loop."
        ),
    )
    demo.add_argument(
        "--steps",
        type=_positive_int,
        default=10_000,
        help="steps of the CartPole speed measurement (default: %(default)s)",
    )
    demo.add_argument(
        "--rollout-steps",
        type=_positive_int,
        default=200,
        help="steps of each summarised rollout (default: %(default)s)",
    )
    demo.add_argument("--seed", type=_seed, default=0, help="seed of every env (default: %(default)s)")
    return parser


# episodes and steps the commands take at most (a bound on how long a typo can run)
_MAX_STEPS = 10**9


def _positive_int(text: str) -> int:
    value = int(text)
    if not 0 < value <= _MAX_STEPS:
        raise argparse.ArgumentTypeError(f"expected an integer in [1, {_MAX_STEPS}], got {text}")
    return value


def _seed(text: str) -> int:
    from cadence.trainers.config import MAX_SEED

    value = int(text)
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"expected a seed in [0, {MAX_SEED}], got {text}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the ``cadence`` command line.

    Args:
        argv: the arguments after the program name; ``None`` reads ``sys.argv[1:]``.

    Returns:
        The exit status: 0 on success, 1 if an environment failed its spec check (``demo``),
        2 for bad input (an unknown algorithm, env, config field or run folder, a bad value,
        a damaged checkpoint).

    Examples:
        >>> import contextlib, io
        >>> with contextlib.redirect_stdout(io.StringIO()) as printed:
        ...     status = main(["demo", "--steps", "100", "--rollout-steps", "5"])
        >>> status, printed.getvalue().count("check_env_specs: ok")
        (0, 2)
    """
    from cadence.data.replay_buffers.checkpoint import CheckpointError
    from cadence.trainers.config import ConfigError

    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        if args.command != "train":
            from cadence._utils import quoted

            parser.error(f"unrecognized arguments: {quoted(' '.join(unknown))}")
        from cadence.trainers.config import config_options

        options = sorted(config_options().values())
        from cadence._utils import quoted

        print(
            f"cadence train: error: unknown argument {quoted(unknown[0])}; valid options: --config, --resume, "
            f"--overwrite, {', '.join(options)}",
            file=sys.stderr,
        )
        return 2
    try:
        if args.command == "train":
            run_train(args)
            return 0
        if args.command == "eval":
            run_eval(args.run_dir, episodes=args.episodes, seed=args.seed, video=None if args.no_video else (
                args.video or ""))
            return 0
    except (ConfigError, CheckpointError) as err:
        print(f"cadence {args.command}: error: {err}", file=sys.stderr)
        return 2
    if args.command == "demo":
        return run_demo(steps=args.steps, rollout_steps=args.rollout_steps, seed=args.seed)
    raise AssertionError(f"unhandled command {args.command!r}")  # argparse rejects others


def run_train(args: argparse.Namespace, out: TextIO | None = None) -> dict[str, Any]:
    """Runs ``cadence train`` with parsed arguments: a new run, or ``--resume`` of one.

    Args:
        args: from :func:`build_parser` (``algorithm``, ``config``, ``resume``,
            ``overwrite`` and the config fields).
        out: where the run prints; ``None`` means standard output.

    Returns:
        The run's summary.

    Raises:
        ConfigError: for an unknown algorithm, env or field, a bad value, an existing run
            folder without ``--overwrite``, or a ``--resume`` folder that is not a run.

    Examples:
        >>> run_train(build_parser().parse_args(["train", "ppo"]))
        Traceback (most recent call last):
        ...
        cadence.trainers.config.ConfigError: unknown algorithm 'ppo'; valid algorithms: ddpg, td3, sac
    """
    from cadence._utils import quoted
    from cadence.trainers.config import ALGORITHMS, ConfigError, build_config, check_path, overrides_from_args
    from cadence.trainers.training import TrainingRun

    overrides = overrides_from_args(args)
    overrides.pop("algorithm", None)  # the positional argument, handled here
    if args.algorithm is not None and args.algorithm not in ALGORITHMS:
        raise ConfigError(f"unknown algorithm {quoted(args.algorithm)}; valid algorithms: {', '.join(ALGORITHMS)}")
    if args.resume:
        check_path(args.resume, "--resume")
        if args.config or args.overwrite:
            raise ConfigError("--resume continues a run with its own config; it takes neither --config nor --overwrite")
        run = TrainingRun.resume(args.resume, overrides, out=out)
        if args.algorithm is not None and args.algorithm != run.config.algorithm:
            raise ConfigError(f"{args.resume} trains {run.config.algorithm}, not {args.algorithm}")
    else:
        if args.algorithm is None:
            raise ConfigError(f"name an algorithm ({', '.join(ALGORITHMS)}) or a run to --resume")
        config = build_config(args.algorithm, args.config, overrides)
        run = TrainingRun.create(config, overwrite=args.overwrite, out=out)
    return run.run()


def run_eval(
    run_dir: str, episodes: int = 3, seed: int = 12345, video: str | None = "", out: TextIO | None = None
) -> list[float]:
    """Runs ``cadence eval``: plays the policy of ``run_dir`` for ``episodes`` episodes
    (exploration off) and records one more as a video.

    Args:
        run_dir: a run folder of ``cadence train``.
        episodes: episodes to play.
        seed: their seed.
        video: the video file; ``""`` for ``RUN_DIR/eval.mp4``, ``None`` for no video.
        out: where to print; ``None`` means standard output.

    Returns:
        The episodes' returns.

    Raises:
        ConfigError: if ``run_dir`` is not a run folder, or holds no policy yet.
        CheckpointError: if its policy file is damaged or not of this run.

    Examples:
        >>> import tempfile
        >>> run_eval(tempfile.mkdtemp())
        Traceback (most recent call last):
        ...
        cadence.trainers.config.ConfigError: ... is not a run folder of cadence train (no cadence-run.json in it)
    """
    from pathlib import Path

    from cadence.trainers.config import check_path
    from cadence.trainers.environments import episode_step_limit, make_env
    from cadence.trainers.evaluation import evaluate_policy, record_video
    from cadence.trainers.training import load_policy

    out = sys.stdout if out is None else out
    check_path(run_dir, "RUN_DIR")
    if video:
        check_path(video, "--video")
    config, policy, source = load_policy(run_dir)
    limit = episode_step_limit(config)
    result = evaluate_policy(policy, make_env(config, seed=seed), episodes, seed=seed, max_steps=limit)
    print(f"{config.algorithm} on {config.env}, policy from {source}", file=out)
    for k, (episode_return, length) in enumerate(zip(result.returns, result.lengths)):
        print(f"episode {k}: return {episode_return:9.2f}  length {length}", file=out)
    print(f"mean return {result.mean_return:.2f} over {episodes} episodes", file=out)
    if video is not None:
        path = Path(video) if video else Path(run_dir) / "eval.mp4"
        try:
            shown = record_video(policy, make_env(config, seed=seed, render=True), path, seed=seed, max_steps=limit)
            print(f"video: {path} (return {shown.returns[0]:.2f}, {shown.lengths[0]} steps)", file=out)
        except Exception as err:  # noqa: BLE001 - no renderer (no display, no GL): say so
            print(f"video skipped: {type(err).__name__}: {err}", file=out)
    return result.returns


def run_demo(
    steps: int = 10_000,
    rollout_steps: int = 200,
    seed: int = 0,
    out: TextIO | None = None,
) -> int:
    """Runs the demo: spec checks, rollout summaries and the CartPole speed comparison.

    Args:
        steps: steps of the CartPole speed measurement.
        rollout_steps: steps of each summarised rollout.
        seed: the seed of every environment.
        out: where to print; ``None`` means standard output.

    Returns:
        0 if both environments passed ``check_env_specs``, else 1.

    Examples:
        >>> import io
        >>> buffer = io.StringIO()
        >>> run_demo(steps=50, rollout_steps=5, out=buffer)
        0
        >>> print(buffer.getvalue().splitlines()[-1])  # doctest: +ELLIPSIS
        ratio cadence/bare ...
    """
    import gymnasium
    import tensordict
    import torch

    import cadence
    from cadence.envs.custom import PendulumEnv
    from cadence.envs.libs.gym import GymEnv

    out = sys.stdout if out is None else out

    def say(line: str = "") -> None:
        print(line, file=out, flush=True)

    say(
        f"Cadence {cadence.__version__} demo (torch {torch.__version__}, "
        f"tensordict {tensordict.__version__}, gymnasium {gymnasium.__version__})"
    )
    status = 0
    for title, make in (('GymEnv("Pendulum-v1")', lambda: GymEnv("Pendulum-v1")), ("PendulumEnv()", PendulumEnv)):
        say()
        say(f"== {title} ==")
        env = make()
        try:
            if not _summarise(env, rollout_steps, seed, say):
                status = 1
        finally:
            env.close()

    say()
    say(f"== rollout speed: CartPole-v1, {steps} steps, random actions ==")
    bare = _bare_gymnasium_steps_per_s(gymnasium, steps, seed)
    fast = _cadence_steps_per_s(GymEnv, steps, seed)
    say(f"bare gymnasium loop        {bare:12,.0f} steps/s")
    say(f"cadence GymEnv.rollout     {fast:12,.0f} steps/s")
    say(f"ratio cadence/bare         {fast / bare:12.2f}")
    return status


def _summarise(env: Any, rollout_steps: int, seed: int, say: Any) -> bool:
    """Checks the specs of ``env`` and prints a summary of one rollout; False if the check failed."""
    from cadence.envs.utils import check_env_specs

    try:
        check_env_specs(env, seed=seed)
    except Exception as err:  # noqa: BLE001 - reported, and the exit status says it
        say(f"check_env_specs: FAILED: {type(err).__name__}: {err}")
        return False
    say("check_env_specs: ok")
    env.set_seed(seed)
    rollout = env.rollout(rollout_steps, break_when_any_done=False)
    say(f"rollout of {rollout_steps} steps, batch size {list(rollout.batch_size)}:")
    keys = sorted(rollout.keys(include_nested=True, leaves_only=True), key=_key_name)
    width = max(len(_key_name(key)) for key in keys)
    for key in keys:
        value = rollout.get(key)
        say(f"  {_key_name(key):<{width}}  {str(tuple(value.shape)):<14} {str(value.dtype).removeprefix('torch.')}")
    reward = rollout.get(("next", "reward")).float().mean().item()
    say(f"mean reward over {rollout_steps} steps: {reward:.4f}")
    return True


def _key_name(key: str | tuple[str, ...]) -> str:
    return key if isinstance(key, str) else ".".join(key)


def _bare_gymnasium_steps_per_s(gymnasium: Any, steps: int, seed: int) -> float:
    """Steps per second of a plain gymnasium CartPole loop with random actions."""
    env = gymnasium.make("CartPole-v1")
    env.reset(seed=seed)
    env.action_space.seed(seed)
    sample, step, reset = env.action_space.sample, env.step, env.reset
    try:
        start = time.perf_counter()
        for _ in range(steps):
            _, _, terminated, truncated, _ = step(sample())
            if terminated or truncated:
                reset()
        return steps / (time.perf_counter() - start)
    finally:
        env.close()


def _cadence_steps_per_s(gym_env_cls: Any, steps: int, seed: int) -> float:
    """Steps per second of ``GymEnv("CartPole-v1").rollout`` with random actions."""
    env = gym_env_cls("CartPole-v1")
    try:
        env.set_seed(seed)
        env.rollout(min(steps, 100), break_when_any_done=False)  # warm-up
        start = time.perf_counter()
        env.rollout(steps, break_when_any_done=False)
        return steps / (time.perf_counter() - start)
    finally:
        env.close()


if __name__ == "__main__":  # pragma: no cover - ``python -m cadence.cli``
    sys.exit(main())

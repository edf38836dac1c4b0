"""The ``cadence`` command line.

``cadence demo`` builds a gymnasium environment and a native one, checks their specs,
summarises a rollout of each and measures how fast Cadence steps CartPole compared with a
bare gymnasium loop::

    cadence demo --steps 20000
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

__all__ = ["build_parser", "main", "run_demo"]


def build_parser() -> argparse.ArgumentParser:
    """Builds the argument parser of the ``cadence`` command.

    Returns:
        The parser, with one sub-command per action (``demo``).

    Examples:
        >>> args = build_parser().parse_args(["demo", "--steps", "500"])
        >>> args.command, args.steps, args.rollout_steps, args.seed
        ('demo', 500, 200, 0)
    """
    parser = argparse.ArgumentParser(
        prog="cadence",
        description="Cadence: reinforcement learning on PyTorch and TensorDict.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
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
    demo.add_argument("--seed", type=int, default=0, help="seed of every env (default: %(default)s)")
    return parser


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the ``cadence`` command line.

    Args:
        argv: the arguments after the program name; ``None`` reads ``sys.argv[1:]``.

    Returns:
        The exit status: 0 on success, 1 if an environment failed its spec check.

    Examples:
        >>> import contextlib, io
        >>> with contextlib.redirect_stdout(io.StringIO()) as printed:
        ...     status = main(["demo", "--steps", "100", "--rollout-steps", "5"])
        >>> status, printed.getvalue().count("check_env_specs: ok")
        (0, 2)
    """
    args = build_parser().parse_args(argv)
    if args.command == "demo":
        return run_demo(steps=args.steps, rollout_steps=args.rollout_steps, seed=args.seed)
    raise AssertionError(f"unhandled command {args.command!r}")  # argparse rejects others


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

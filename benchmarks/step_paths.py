"""Where a step happens: the call chains from Cadence's public stepping APIs to the simulator.

Runs 20 everyday configurations (rollouts with and without a policy, ``step``,
``step_and_maybe_reset``, ``SerialEnv``, ``TransformedEnv``, ``SyncDataCollector`` in
several set-ups, a torch-written env) under ``sys.setprofile`` and records, each time a
simulator's step is entered, the chain of Cadence functions that led there.

A simulator's step is the first function named ``step`` or ``_step`` outside Cadence's
machinery that a Cadence function calls: a gymnasium env's (or vector env's) ``step``, or
the ``_step`` of an env written in torch (this script's ``CountingEnv``, or Cadence's own
``cadence.envs.custom`` envs, which stand for a user's). The chain is every Cadence
frame on the stack at that moment, outermost first, as ``file:function``.

Prints, per configuration, the distinct chains it took; then the totals the issue tracks:
distinct chains, the files they pass through, the distinct functions that call a
simulator's step, and the lines of the modules that serve the stepping paths
(``MACHINERY``, the list kept up to date as modules come and go).

Usage::

    python benchmarks/step_paths.py [--verbose]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModule, TensorDictSequential

import cadence
from cadence.collectors import SyncDataCollector
from cadence.data import Bounded, Composite, OneHot, Unbounded
from cadence.envs import EnvBase, SerialEnv, TransformedEnv
from cadence.envs.libs.gym import GymEnv
from cadence.envs.transforms import Compose, DoubleToFloat, InitTracker, ObservationNorm, RewardSum, StepCounter
from cadence.envs.utils import step_mdp
from cadence.modules import MLP, QValueModule

CADENCE_ROOT = Path(cadence.__file__).resolve().parent
# Cadence's own envs are simulators here: they stand for a user's env written in torch
SIMULATOR_FOLDERS = (CADENCE_ROOT / "envs" / "custom",)
STEPS = 50
# the modules whose only concern is taking steps: the loops, the shortcuts and their data
MACHINERY = (
    "envs/rollouts.py",
    "envs/array_simulator.py",
    "envs/values_loop.py",
    "envs/step_values.py",
    "envs/simulator_values_step.py",
    "envs/gym_like_simulator.py",
    "envs/libs/gym_simulator.py",
    "collectors/_runners.py",
    "collectors/_values_runner.py",
    "modules/tensor_view.py",
)


class CountingEnv(EnvBase):
    """An env written in torch, as a user writes one: a counter that ends at 10.

    Examples:
        >>> CountingEnv().rollout(3)["next", "observation"].flatten().tolist()
        [1.0, 2.0, 3.0]
    """

    def __init__(self) -> None:
        super().__init__()
        self.observation_spec = Composite(observation=Unbounded((1,)))
        self.action_spec = Bounded(-1.0, 1.0, (1,))
        self.reward_spec = Unbounded((1,))

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        return TensorDict({"observation": torch.zeros(1)}, [])

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        observation = tensordict["observation"] + 1
        done = observation >= 10
        return TensorDict(
            {"observation": observation, "reward": torch.ones(1), "done": done, "terminated": done}, []
        )


def _q_policy() -> TensorDictSequential:
    """CartPole's Q-value policy: 4 observations to 2 action values, the greedy one-hot action."""
    torch.manual_seed(0)
    net = MLP(in_features=4, out_features=2, num_cells=[32])
    return TensorDictSequential(
        TensorDictModule(net, ["observation"], ["action_value"]), QValueModule(spec=OneHot(2))
    )


def _actor() -> TensorDictModule:
    """Pendulum's actor: 3 observations to 1 action."""
    torch.manual_seed(0)
    return TensorDictModule(MLP(in_features=3, out_features=1, num_cells=[32]), ["observation"], ["action"])


def _transformed_pendulum() -> TransformedEnv:
    return TransformedEnv(
        GymEnv("Pendulum-v1"),
        Compose(
            StepCounter(200),
            RewardSum(),
            InitTracker(),
            DoubleToFloat(),
            ObservationNorm(loc=torch.zeros(3), scale=torch.ones(3), in_keys=["observation"]),
        ),
    )


def _step_loop(env: EnvBase, policy: Callable[[TensorDictBase], TensorDictBase] | None = None) -> None:
    td = env.reset()
    for _ in range(STEPS):
        td = policy(td) if policy is not None else env.rand_action(td)
        td = env.step(td)
        td = step_mdp(td)
        if td["done"].any():
            td = env.reset()


def _step_and_maybe_reset_loop(env: EnvBase, policy: Callable[[TensorDictBase], TensorDictBase] | None = None) -> None:
    td = env.reset()
    for _ in range(STEPS):
        td = policy(td) if policy is not None else env.rand_action(td)
        _, td = env.step_and_maybe_reset(td)


def _collect(env: EnvBase, policy: Any = None) -> None:
    collector = SyncDataCollector(env, policy, frames_per_batch=STEPS, total_frames=2 * STEPS)
    for _ in collector:
        pass
    collector.shutdown()


def configurations() -> dict[str, Callable[[], None]]:
    """The 20 configurations traced, by name."""

    return {
        "rollout CartPole random": lambda: GymEnv("CartPole-v1").rollout(STEPS, break_when_any_done=False),
        "rollout CartPole random, stop when done": lambda: GymEnv("CartPole-v1").rollout(STEPS),
        "rollout CartPole MLP+QValueModule": lambda: GymEnv("CartPole-v1").rollout(
            STEPS, _q_policy(), break_when_any_done=False
        ),
        "rollout Pendulum MLP actor": lambda: GymEnv("Pendulum-v1").rollout(STEPS, _actor()),
        "rollout CartPole num_envs=4 random": lambda: GymEnv("CartPole-v1", num_envs=4).rollout(STEPS),
        "rollout SerialEnv(2) random": lambda: SerialEnv(2, lambda: GymEnv("Pendulum-v1")).rollout(STEPS),
        "rollout SerialEnv(2) MLP actor": lambda: SerialEnv(2, lambda: GymEnv("Pendulum-v1")).rollout(STEPS, _actor()),
        "rollout TransformedEnv random": lambda: _transformed_pendulum().rollout(STEPS),
        "rollout TransformedEnv MLP actor": lambda: _transformed_pendulum().rollout(STEPS, _actor()),
        "rollout torch env": lambda: CountingEnv().rollout(STEPS, break_when_any_done=False),
        "step loop Pendulum random": lambda: _step_loop(GymEnv("Pendulum-v1")),
        "step loop Pendulum MLP actor": lambda: _step_loop(GymEnv("Pendulum-v1"), _actor()),
        "step loop torch env": lambda: _step_loop(CountingEnv()),
        "step_and_maybe_reset CartPole random": lambda: _step_and_maybe_reset_loop(GymEnv("CartPole-v1")),
        "step_and_maybe_reset CartPole MLP+QValueModule": lambda: _step_and_maybe_reset_loop(
            GymEnv("CartPole-v1"), _q_policy()
        ),
        "collector CartPole random": lambda: _collect(GymEnv("CartPole-v1")),
        "collector Pendulum MLP actor": lambda: _collect(GymEnv("Pendulum-v1"), _actor()),
        "collector TransformedEnv MLP actor": lambda: _collect(_transformed_pendulum(), _actor()),
        "collector SerialEnv(2) random": lambda: _collect(SerialEnv(2, lambda: GymEnv("Pendulum-v1"))),
        "collector torch env": lambda: _collect(CountingEnv()),
    }


def _is_machinery(filename: str) -> bool:
    path = Path(filename).resolve()
    return path.is_relative_to(CADENCE_ROOT) and not any(path.is_relative_to(f) for f in SIMULATOR_FOLDERS)


def _where(frame: FrameType) -> str:
    relative = Path(frame.f_code.co_filename).resolve().relative_to(CADENCE_ROOT.parent)
    return f"{relative}:{frame.f_code.co_qualname}"


def trace(run: Callable[[], None]) -> set[tuple[str, ...]]:
    """The distinct chains of Cadence functions that reached a simulator's step in ``run``."""
    chains: set[tuple[str, ...]] = set()
    machinery: dict[str, bool] = {}

    def is_machinery(filename: str) -> bool:
        if filename not in machinery:
            machinery[filename] = _is_machinery(filename)
        return machinery[filename]

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call" or frame.f_code.co_name not in ("step", "_step"):
            return
        caller = frame.f_back
        if caller is None or not is_machinery(caller.f_code.co_filename) or is_machinery(frame.f_code.co_filename):
            return
        chain = []
        current: FrameType | None = caller
        while current is not None:
            if is_machinery(current.f_code.co_filename):
                chain.append(_where(current))
            current = current.f_back
        chains.add(tuple(reversed(chain)))

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return chains


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verbose", action="store_true", help="print every chain")
    args = parser.parse_args()
    every_chain: set[tuple[str, ...]] = set()
    for name, run in configurations().items():
        chains = trace(run)
        every_chain |= chains
        print(f"{name}: {len(chains)} chain(s)")
        if args.verbose:
            for chain in sorted(chains):
                print("    " + " -> ".join(chain))
    files = {where.split(":")[0] for chain in every_chain for where in chain}
    callers = {chain[-1] for chain in every_chain}
    print()
    print(f"distinct call chains to a simulator's step: {len(every_chain)}")
    print(f"files they pass through: {len(files)}")
    print(f"distinct functions calling a simulator's step: {len(callers)}")
    for caller in sorted(callers):
        print(f"    {caller}")
    lines = {name: len((CADENCE_ROOT / name).read_text().splitlines()) for name in MACHINERY}
    print(f"lines of the stepping machinery: {sum(lines.values())} in {len(lines)} modules")
    if args.verbose:
        for name, count in lines.items():
            print(f"    {count:5d} cadence/{name}")


if __name__ == "__main__":
    main()

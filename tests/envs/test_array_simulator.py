"""The array protocol: a user's own env implements it and gets every path that steps
arrays (rollouts, serial batches, the collector's array runner), each equal to the
generic path entry for entry; the arrays and the errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from tensordict.nn import TensorDictModule
from tensordict import TensorDict, TensorDictBase

from cadence.collectors import SyncDataCollector
from cadence.data import Bounded, Categorical, Composite, Unbounded
from cadence.envs import EnvBase, GymEnv, SerialEnv, StepCounter, TransformedEnv
from cadence.envs.array_simulator import ArraySimulator, SerialSimulators, StepArrays
from cadence.envs.utils import SpecMismatchError
from tests.fakes import assert_same_rollout


class WalkEnv(EnvBase):
    """A user's env written on numpy: walkers that move by half their action and are done
    (terminated) once farther than ``limit`` from the start; its simulator is its own
    array simulator."""

    def __init__(self, walkers: int = 3, limit: float = 1.5, broken: bool = False) -> None:
        super().__init__(batch_size=(walkers,))
        self.limit = limit
        self.broken = broken  # its simulator writes a position of the wrong shape
        self.observation_spec = Composite(position=Unbounded(shape=(walkers, 2)), shape=(walkers,))
        self.action_spec = Bounded(-1.0, 1.0, shape=(walkers, 2))
        self.reward_spec = Unbounded(shape=(walkers, 1))
        flag = Categorical(2, shape=(walkers, 1), dtype=torch.bool)
        self.full_done_spec = Composite(done=flag, terminated=flag.clone(), truncated=flag.clone(), shape=(walkers,))
        self.position = np.zeros((walkers, 2), dtype=np.float32)

    def move(self, action: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        self.position = self.position + 0.5 * action
        distance = np.linalg.norm(self.position, axis=-1)
        return self.position.copy(), -distance.astype(np.float32), distance > self.limit, np.zeros_like(distance, bool)

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        mask = None if tensordict is None else tensordict.get("_reset", None)
        done = np.ones(self.batch_size, bool) if mask is None else mask.reshape(self.batch_size).numpy()
        self.position = np.where(done[:, None], 0.0, self.position).astype(np.float32)
        return TensorDict({"position": torch.from_numpy(self.position.copy())}, self.batch_size)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        position, reward, terminated, truncated = self.move(tensordict.get("action").numpy())
        flags = {name: torch.from_numpy(value).unsqueeze(-1) for name, value in
                 (("terminated", terminated), ("truncated", truncated), ("done", terminated | truncated))}
        return TensorDict({"position": torch.from_numpy(position), "reward": torch.from_numpy(reward).unsqueeze(-1),
                           **flags}, self.batch_size)

    def _array_simulator(self) -> ArraySimulator | None:
        return WalkSimulator(self)


class WalkSimulator(ArraySimulator):
    """The five methods of the protocol, on ``WalkEnv``'s numpy state."""

    env: WalkEnv

    def __init__(self, env: WalkEnv) -> None:
        super().__init__(env, ["position"])

    def to_backend(self, action: torch.Tensor) -> Any:
        return action.numpy()

    def reset_all(self) -> Any:
        self.env.position = np.zeros_like(self.env.position)
        return self.env.position.copy()

    def step(self, action: Any) -> tuple[Any, Any, Any, Any]:
        position, reward, terminated, truncated = self.env.move(action)
        return (position[:, :1] if self.env.broken else position), reward, terminated, truncated

    def reset_done(self, done: np.ndarray, obs: Any) -> Any:
        self.env.position = np.where(done[:, None], 0.0, self.env.position).astype(np.float32)
        return self.env.position.copy()

    def write_observation(self, targets: dict[str, np.ndarray], index: tuple[Any, ...], obs: Any) -> None:
        targets["position"][index] = obs


def _pair(make: Any) -> tuple[EnvBase, EnvBase]:
    fast, slow = make(), make()
    fast.set_seed(1)
    slow.set_seed(1)
    return fast, slow


@pytest.mark.parametrize("rollout", [{}, {"break_when_any_done": False}, {"break_when_any_done": False,
                                                                           "set_truncated": True}])
@pytest.mark.parametrize("with_policy", [False, True], ids=["random", "policy"])
def test_a_users_env_rolls_out_on_its_simulator_as_on_the_generic_loop(rollout: dict, with_policy: bool) -> None:
    fast_env, slow_env = _pair(WalkEnv)
    policy = None
    if with_policy:
        policy = TensorDictModule(lambda position: torch.full_like(position, 0.9), ["position"], ["action"])
    asked = []
    fast_env._array_simulator = lambda: asked.append(True) or WalkSimulator(fast_env)
    fast = fast_env.rollout(30, policy, **rollout)
    assert asked, "the rollout did not ask for the simulator"
    slow = slow_env.rollout(30, policy, callback=lambda env, data: None, **rollout)  # a callback keeps the loop
    assert_same_rollout(fast, slow)
    assert fast["next", "done"].any()


def test_a_serial_batch_of_a_users_envs_steps_their_simulators() -> None:
    fast_env, slow_env = _pair(lambda: SerialEnv(2, lambda: WalkEnv(walkers=2)))
    assert isinstance(fast_env._array_simulator(), SerialSimulators)
    fast = fast_env.rollout(20, break_when_any_done=False)
    slow = slow_env.rollout(20, break_when_any_done=False, callback=lambda env, data: None)
    assert_same_rollout(fast, slow)
    assert fast.batch_size == (2, 2, 20)


@pytest.mark.parametrize("counter", [None, 4], ids=["bare", "step-counter"])
def test_the_collector_steps_a_users_simulator_in_arrays(counter: int | None) -> None:
    batches = {}
    for fast_path in (True, False):
        env = WalkEnv() if counter is None else TransformedEnv(WalkEnv(), StepCounter(counter))
        env.set_seed(3)
        collector = SyncDataCollector(env, None, frames_per_batch=30, total_frames=90, fast_path=fast_path)
        assert collector.uses_fast_path == fast_path
        batches[fast_path] = torch.cat(list(collector), -1)
        collector.shutdown()
    assert_same_rollout(batches[True], batches[False])
    assert batches[True]["next", "done"].any()


def test_a_simulator_off_its_declared_space_is_named() -> None:
    with pytest.raises(SpecMismatchError, match=r"observation of shape \(3, 1\).*'position'.*has shape \(3, 2\)"):
        WalkEnv(broken=True).rollout(5)
    with pytest.raises(SpecMismatchError, match=r"SerialEnv sub-env 0: .*'position'"):
        SerialEnv(2, lambda: WalkEnv(broken=True)).rollout(5)


def test_step_arrays_rows_are_views() -> None:
    env = SerialEnv(2, lambda: GymEnv("Pendulum-v1"))
    arrays = StepArrays.allocate(env, ("observation",), 4)
    assert arrays.next_obs["observation"].shape == (4, 2, 3) and arrays.root_obs["observation"].shape == (5, 2, 3)
    row = arrays.row(1)
    row.reward[2] = 7.0
    row.terminated[3] = True
    assert arrays.reward[2, 1] == 7.0 and arrays.terminated[3].tolist() == [False, True]


def test_envs_without_a_simulator_keep_the_generic_paths() -> None:
    from tests.fakes import CountingEnv

    class OwnStep(CountingEnv):
        def step(self, tensordict):  # its own step(): the generic path keeps it
            return super().step(tensordict)

    assert OwnStep()._array_simulator() is None
    env = GymEnv("Pendulum-v1")
    env.run_type_checks = True
    assert env._array_simulator() is None
    assert SerialEnv(2, OwnStep)._array_simulator() is None


def test_the_values_loop_steps_through_the_simulator_where_there_is_one() -> None:
    from cadence.envs import Compose, RewardSum
    from cadence.envs.simulator_values_step import SimulatorValuesStep
    from tests.fakes import GenericPathGymEnv

    assert isinstance(GymEnv("Pendulum-v1")._values_stepper(), SimulatorValuesStep)
    chain = TransformedEnv(GymEnv("CartPole-v1", num_envs=2), Compose(StepCounter(30), RewardSum()))
    assert isinstance(chain._values_stepper(), SimulatorValuesStep)
    serial = TransformedEnv(SerialEnv(2, lambda: GymEnv("Pendulum-v1")), RewardSum())
    assert isinstance(serial._values_stepper(), SimulatorValuesStep)  # the SerialEnv hears of each step
    generic = GenericPathGymEnv("Pendulum-v1")  # a reader of its own: no simulator
    assert generic._values_stepper() == generic._step_as_values


def test_the_simulator_step_gives_step_as_values_across_chunks() -> None:
    from cadence.envs import Compose, RewardSum
    from cadence.envs.step_values import StepValues

    def make() -> EnvBase:
        env = TransformedEnv(GymEnv("CartPole-v1", num_envs=2), Compose(StepCounter(30), RewardSum()))
        env.set_seed(4)
        return env

    fast_env, slow_env = make(), make()
    fast_step, slow_step = fast_env._values_stepper(), slow_env._step_as_values
    fast_root, slow_root = fast_env.reset(), slow_env.reset()
    for t in range(150):  # past two chunks of 64 rows
        action = fast_env.rand_action(fast_root)["action"]
        fast = fast_step(StepValues({**dict(fast_root.items()), "action": action}, fast_env.batch_size), checked=True)
        slow = slow_step(StepValues({**dict(slow_root.items()), "action": action}, slow_env.batch_size), checked=True)
        assert sorted(fast.keys()) == sorted(slow.keys())
        for key in slow.keys():
            assert torch.equal(fast.get(key), slow.get(key)), (t, key)
        fast_root = fast_env._step_mdp(fast_root.clone().set("action", action).set("next", fast.to_tensordict()))
        slow_root = slow_env._step_mdp(slow_root.clone().set("action", action).set("next", slow.to_tensordict()))
        fast_root, _ = fast_env._reset_done(fast_root)
        slow_root, _ = slow_env._reset_done(slow_root)


def test_a_simulator_missing_a_protocol_method_is_refused_when_defined() -> None:
    with pytest.raises(TypeError, match=r"Half .*does not define \['reset_done', 'write_observation'\]"):
        class Half(ArraySimulator):
            def to_backend(self, action: torch.Tensor) -> Any:
                return action.numpy()

            def reset_all(self) -> Any:
                return None

            def step(self, action: Any) -> tuple[Any, Any, Any, Any]:
                return None, 0.0, False, False

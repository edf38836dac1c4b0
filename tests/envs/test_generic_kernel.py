"""The generic kernel: an env written in torch steps on values through its own ``_step``
(EnvBase's ``_step_values``), entry for entry the generic path's (rollouts, serial batches,
collectors, workers), and where it stands aside."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModule

from cadence.collectors import SyncDataCollector
from cadence.data import Bounded, Composite, Unbounded
from cadence.envs import EnvBase, ParallelEnv, PendulumEnv, SerialEnv, TransformedEnv
from cadence.envs.array_simulator import arrays_fit
from cadence.envs.values_loop import values_loop_applies
from cadence.envs.transforms import Compose, DoubleToFloat, RewardSum, StepCounter
from tests.fakes import CountingEnv, assert_same_rollout


class StaggeredEnv(EnvBase):
    """A batch of three counters whose episodes end after 2, 3 and 5 steps (partial
    resets); stateless: the count travels in the data, and the reset draws from ``rng``."""

    def __init__(self) -> None:
        super().__init__(batch_size=(3,))
        self.limits = torch.tensor([[2.0], [3.0], [5.0]])
        self.observation_spec = Composite(count=Unbounded(shape=(3, 1)), noise=Unbounded(shape=(3, 1)), shape=(3,))
        self.state_spec = Composite(count=Unbounded(shape=(3, 1)), noise=Unbounded(shape=(3, 1)), shape=(3,))
        self.action_spec = Bounded(-1.0, 1.0, shape=(3, 1))

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        noise = torch.rand(3, 1, generator=self.rng)
        count = torch.zeros(3, 1)
        mask = None if tensordict is None else tensordict.get("_reset", None)
        if mask is not None:  # the others keep where they stand
            count = torch.where(mask, count, tensordict.get("count"))
            noise = torch.where(mask, noise, tensordict.get("noise"))
        return TensorDict({"count": count, "noise": noise}, self.batch_size)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        count = tensordict.get("count") + 1
        reward = tensordict.get("action") + tensordict.get("noise")
        done = count >= self.limits
        return TensorDict({"count": count, "noise": tensordict.get("noise"), "reward": reward, "done": done},
                          self.batch_size)


class TruncatingCounter(CountingEnv):
    """A CountingEnv (its state in the object) that declares all three done flags."""

    def __init__(self, max_count: int = 3) -> None:
        super().__init__(max_count=max_count)
        flag = self.full_done_spec["done"]
        self.done_spec = Composite(done=flag.clone(), terminated=flag.clone(), truncated=flag.clone())

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        out = super()._step(tensordict)
        return out.set("truncated", torch.zeros_like(out.get("done")))


class GenericStaggeredEnv(StaggeredEnv):
    def step(self, tensordict: TensorDictBase) -> TensorDictBase:  # its own step(): the generic path
        return super().step(tensordict)


class GenericPendulumEnv(PendulumEnv):
    def step(self, tensordict: TensorDictBase) -> TensorDictBase:
        return super().step(tensordict)


def _pendulum_policy() -> TensorDictModule:
    torch.manual_seed(0)  # the test's own weights
    net = torch.nn.Sequential(torch.nn.Linear(2, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    return TensorDictModule(lambda th, thdot: 2 * torch.tanh(net(torch.stack([th, thdot], -1))),
                            in_keys=["th", "thdot"], out_keys=["action"])


def _rollouts(make_fast, make_slow, steps, policy=None, **kwargs) -> list[TensorDictBase]:
    out = []
    for make in (make_fast, make_slow):
        env = make()
        env.set_seed(4)
        with torch.no_grad():
            out.append(env.rollout(steps, policy, **kwargs))
    return out


def test_which_envs_it_serves() -> None:
    assert PendulumEnv().kernel == "values: PendulumEnv._step" and StaggeredEnv().kernel == "values: StaggeredEnv._step"
    assert PendulumEnv()._array_simulator() is None  # no arrays: the env's own _step on the entries
    assert values_loop_applies(PendulumEnv()) and values_loop_applies(CountingEnv())
    assert GenericPendulumEnv().kernel == "generic: GenericPendulumEnv.step, PendulumEnv._step"  # a step() of its own
    assert not values_loop_applies(GenericPendulumEnv())
    checked = PendulumEnv()
    checked.run_type_checks = True
    assert checked.kernel == "generic: PendulumEnv._step" and not values_loop_applies(checked)


@pytest.mark.parametrize("break_when_any_done", [False, True])
@pytest.mark.parametrize("with_policy", [False, True])
def test_pendulum_rollout_equals_the_generic_path(break_when_any_done: bool, with_policy: bool) -> None:
    policy = _pendulum_policy() if with_policy else None
    fast, slow = _rollouts(PendulumEnv, GenericPendulumEnv, 60, policy, break_when_any_done=break_when_any_done)
    assert_same_rollout(fast, slow)
    assert ("next", "params", "g") in fast.keys(True, True) and "truncated" not in fast["next"].keys()


@pytest.mark.parametrize("break_when_any_done", [False, True])
def test_partial_resets_of_a_stateless_batch_equal_the_generic_path(break_when_any_done: bool) -> None:
    fast, slow = _rollouts(StaggeredEnv, GenericStaggeredEnv, 12, break_when_any_done=break_when_any_done)
    assert_same_rollout(fast, slow)
    if not break_when_any_done:
        assert fast["count"][:, :6].squeeze(-1).tolist() == [[0, 1, 0, 1, 0, 1], [0, 1, 2, 0, 1, 2],
                                                               [0, 1, 2, 3, 4, 0]]


def test_serial_batches_and_transformed_rollouts_equal_the_generic_path() -> None:
    fast, slow = _rollouts(lambda: SerialEnv(2, PendulumEnv), lambda: SerialEnv(2, GenericPendulumEnv), 30)
    assert_same_rollout(fast, slow)
    chain = lambda base: TransformedEnv(base(), Compose(DoubleToFloat(), StepCounter(7), RewardSum()))  # noqa: E731
    fast, slow = _rollouts(lambda: chain(StaggeredEnv), lambda: chain(GenericStaggeredEnv), 20,
                           break_when_any_done=False)
    assert_same_rollout(fast, slow)


def test_a_rollout_with_gradients_keeps_the_generic_path_and_its_graph() -> None:
    env = PendulumEnv()
    env.set_seed(0)
    data = env.rollout(10, _pendulum_policy())
    assert data["next", "reward"].requires_grad  # the seed tutorial's training through the rollout
    data["next", "reward"].mean().backward()


def test_collectors_take_it_and_give_the_generic_batches() -> None:
    batches = []
    for fast_path in (True, False):
        env = StaggeredEnv()
        env.set_seed(1)
        collector = SyncDataCollector(env, frames_per_batch=24, total_frames=72, fast_path=fast_path)
        assert collector.uses_fast_path is fast_path
        batches.append([batch.clone() for batch in collector])
    for fast, slow in zip(*batches):
        assert_same_rollout(fast, slow)


def test_a_collector_continues_its_episodes_from_a_state_dict() -> None:
    def collector(env: EnvBase, fast_path: bool) -> SyncDataCollector:
        return SyncDataCollector(env, frames_per_batch=12, total_frames=-1, fast_path=fast_path)

    outputs = []
    for fast_path in (True, False):
        env = StaggeredEnv()
        env.set_seed(2)
        first = collector(env, fast_path)
        next(iter(first))
        state = first.state_dict()
        second = collector(env, fast_path)
        second.load_state_dict(state, continue_episodes=True)
        outputs.append(next(iter(second)))
    assert_same_rollout(*outputs)
    assert outputs[0]["count"][:, 0].squeeze(-1).tolist() != [0, 0, 0]  # it went on where the first stopped


def test_parallel_workers_step_a_stateful_env_and_a_stateless_one() -> None:
    with ParallelEnv(2, TruncatingCounter) as env:
        data = env.rollout(7, break_when_any_done=False)
        assert data["next", "count"].squeeze(-1)[0].tolist() == [1, 2, 3, 1, 2, 3, 1]
    with ParallelEnv(2, PendulumEnv) as env:
        td = env.reset()
        td["th"] = torch.zeros(2)
        td["thdot"] = torch.zeros(2)
        out = env.step(td.set("action", torch.zeros(2, 1)))
        assert torch.equal(out["next", "th"], torch.zeros(2))  # the given state, not the reset's


def test_an_output_off_its_specs_is_named() -> None:
    class Extra(StaggeredEnv):
        def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
            return super()._step(tensordict).set("debug", torch.zeros(3))

    # the loop keeps them, as the generic loop does, and names one that is not in every step
    collector = SyncDataCollector(Extra(), frames_per_batch=6, total_frames=6)
    with torch.no_grad(), pytest.raises(ValueError, match=r"\['debug'\] are not in every step"):
        next(iter(collector))
    with pytest.raises(ValueError, match=r"\['debug'\] are not in every step"):
        Extra().rollout(3)


def test_set_truncated_without_a_truncated_entry_is_the_generic_error() -> None:
    with torch.no_grad(), pytest.raises(RuntimeError, match="needs a 'truncated' entry"):
        PendulumEnv().rollout(3, set_truncated=True)


@pytest.mark.parametrize("make", [PendulumEnv, StaggeredEnv, lambda: SerialEnv(2, PendulumEnv)])
def test_a_step_counter_over_an_env_without_truncation_keeps_the_generic_batches(make) -> None:
    # the counter adds "truncated" and ends episodes the env's own flags go on with
    batches = []
    for fast_path in (True, False):
        env = TransformedEnv(make(), StepCounter(4))
        env.set_seed(5)
        collector = SyncDataCollector(env, frames_per_batch=12 * env.batch_size.numel(), total_frames=-1,
                                      fast_path=fast_path)
        assert collector.uses_fast_path is fast_path
        iterator = iter(collector)
        batches.append([next(iterator).clone() for _ in range(2)])
    for fast, slow in zip(*batches):
        assert_same_rollout(fast, slow)
    assert batches[0][0]["next", "truncated"].any()


def test_per_agent_done_signals_step_on_values_as_on_tensordicts() -> None:
    from tests.fakes import MultiLevelZerosEnv

    env = MultiLevelZerosEnv()  # done flags for two agents besides the root's: not the arrays' layout
    assert not arrays_fit(env) and env._array_simulator() is None and env.kernel == "values: MultiLevelZerosEnv._step"
    with torch.no_grad():
        fast = env.rollout(5, break_when_any_done=False)
        slow = MultiLevelZerosEnv().rollout(5, break_when_any_done=False, callback=lambda env, td: None)
    assert_same_rollout(fast, slow)
    assert fast["next", "agent1", "val"][-1].tolist() == [5, 5]
    batches = []
    for fast_path in (True, False):
        collector = SyncDataCollector(MultiLevelZerosEnv(), frames_per_batch=4, total_frames=8, fast_path=fast_path)
        assert collector.uses_fast_path is fast_path
        batches.append([batch.clone() for batch in collector])
    for fast_batch, slow_batch in zip(*batches):
        assert_same_rollout(fast_batch, slow_batch)

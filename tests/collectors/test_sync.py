"""SyncDataCollector: batches equal env.rollout, frames per batch, trajectory ids,
random frames, resets, splitting, state, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule, TensorDictSequential

from cadence.collectors import Collector, SyncDataCollector
from cadence.envs import GymEnv, PendulumEnv, SerialEnv, StepCounter, TransformedEnv
from cadence.envs.libs.gym import GymWrapper
from cadence.envs.utils import ExplorationType, SpecMismatchError
from cadence.modules import OrnsteinUhlenbeckProcessModule
from tests.fakes import OffSpaceEnv


def pendulum_batch(n: int = 3) -> SerialEnv:
    return SerialEnv(n, lambda: GymEnv("Pendulum-v1"))


def make_policy(env: object, seed: int = 0, ou: bool = True) -> TensorDictModule | TensorDictSequential:
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(3, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    actor = TensorDictModule(net, ["observation"], ["action"])
    if not ou:
        return actor
    spec = env.action_spec.clone()  # type: ignore[attr-defined]
    return TensorDictSequential(
        actor,
        OrnsteinUhlenbeckProcessModule(spec, annealing_num_steps=100, generator=torch.Generator().manual_seed(seed)),
    )


def collect(env: object, policy: object, frames_per_batch: int, total: int, **kwargs: object) -> TensorDictBase:
    collector = SyncDataCollector(
        env, policy, frames_per_batch=frames_per_batch, total_frames=total, **kwargs  # type: ignore[arg-type]
    )
    batches = list(collector)
    collector.shutdown()
    return torch.cat(batches, -1)


def assert_same(got: TensorDictBase, expected: TensorDictBase) -> None:
    got_keys = {k for k in got.keys(True, True) if k != ("collector", "traj_ids")}
    assert got_keys == set(expected.keys(True, True))
    for key in expected.keys(True, True):
        assert torch.equal(got.get(key), expected.get(key)), key


@pytest.mark.parametrize("fast_path", [True, False])
@pytest.mark.parametrize("with_policy", [True, False])
def test_equals_rollout_serial_gym(fast_path: bool, with_policy: bool) -> None:
    env = pendulum_batch()
    env.set_seed(0)
    policy = make_policy(env) if with_policy else None
    collector = SyncDataCollector(env, policy, frames_per_batch=150, total_frames=900, fast_path=fast_path)
    assert collector.uses_fast_path == fast_path
    got = torch.cat(list(collector), -1)  # 300 steps: Pendulum truncates at 200
    reference = pendulum_batch()
    reference.set_seed(0)
    with torch.no_grad():
        expected = reference.rollout(300, make_policy(reference) if with_policy else None, break_when_any_done=False)
    assert got.batch_size == torch.Size([3, 300]) and got.names == [None, "time"]
    assert_same(got, expected)


@pytest.mark.parametrize("make_env", [lambda: GymEnv("Pendulum-v1"), lambda: GymEnv("CartPole-v1", num_envs=3)])
def test_equals_rollout_single_and_vector_gym(make_env: object) -> None:
    env = make_env()  # type: ignore[operator]
    env.set_seed(1)
    got = collect(env, None, frames_per_batch=env.batch_size.numel() * 40, total=env.batch_size.numel() * 120)
    reference = make_env()  # type: ignore[operator]
    reference.set_seed(1)
    assert_same(got, reference.rollout(120, break_when_any_done=False))


def test_equals_rollout_generic_env() -> None:
    env = PendulumEnv(batch_size=[2])
    env.set_seed(0)
    got = collect(env, None, frames_per_batch=20, total=60)
    reference = PendulumEnv(batch_size=[2])
    reference.set_seed(0)
    assert_same(got, reference.rollout(30, break_when_any_done=False))


@pytest.mark.parametrize("fast_path", [True, False])
def test_frames_per_batch_does_not_change_trajectories(fast_path: bool) -> None:
    runs = []
    for steps_per_batch in (1, 10):
        env = pendulum_batch(2)
        env.set_seed(3)
        runs.append(collect(env, make_policy(env), 2 * steps_per_batch, 2 * 230, fast_path=fast_path))
    assert torch.equal(runs[0]["collector", "traj_ids"], runs[1]["collector", "traj_ids"])
    assert_same(runs[0].exclude("collector"), runs[1].exclude("collector"))


@pytest.mark.parametrize("fast_path", [True, False])
def test_traj_ids_never_repeat(fast_path: bool) -> None:
    env = GymEnv("CartPole-v1", num_envs=4)
    env.set_seed(0)
    data = collect(env, None, frames_per_batch=40, total=2000, fast_path=fast_path)
    ids = data["collector", "traj_ids"]
    done = data["next", "done"].squeeze(-1)
    # an id changes exactly after a done, and never comes back
    changed = ids[:, 1:] != ids[:, :-1]
    assert torch.equal(changed, done[:, :-1])
    seen: set[int] = set()
    for row in ids:
        row_ids = row.unique_consecutive().tolist()
        assert not seen & set(row_ids)
        seen |= set(row_ids)
    assert len(seen) == int(done[:, :-1].sum()) + 4


def test_step_count_restarts_after_done() -> None:
    env = pendulum_batch(2)
    data = collect(env, None, frames_per_batch=20, total=100, max_frames_per_traj=7)
    count = data["next", "step_count"].squeeze(-1)
    truncated = data["next", "truncated"].squeeze(-1)
    assert count.max() == 7 and torch.equal(truncated, count == 7)
    after = count[:, 1:][truncated[:, :-1]]
    assert after.eq(1).all() and after.numel() > 0


def test_init_random_frames_then_policy_same_entries() -> None:
    env = pendulum_batch(2)
    policy = make_policy(env, ou=False)
    collector = SyncDataCollector(env, policy, frames_per_batch=20, total_frames=60, init_random_frames=20)
    first, second, _ = list(collector)
    assert set(first.keys(True, True)) == set(second.keys(True, True))
    with torch.no_grad():
        expected = policy.module(first["observation"])
    assert not torch.allclose(first["action"], expected)
    with torch.no_grad():  # step by step in the collector, the whole batch at once here: float rounding differs
        assert torch.allclose(second["action"], policy.module(second["observation"]), atol=1e-6)


def test_exploration_type_deterministic_leaves_actions() -> None:
    env = pendulum_batch(2)
    policy = make_policy(env)
    data = collect(env, policy, 20, 20, exploration_type=ExplorationType.DETERMINISTIC)
    with torch.no_grad():
        assert torch.allclose(data["action"], policy[0].module(data["observation"]), atol=1e-6)


def test_reset_at_each_iter_starts_new_trajectories() -> None:
    env = pendulum_batch(2)
    collector = SyncDataCollector(env, frames_per_batch=10, total_frames=30, reset_at_each_iter=True)
    firsts = [batch["collector", "traj_ids"][:, 0].tolist() for batch in collector]
    assert firsts == [[0, 1], [2, 3], [4, 5]]


def test_split_trajs_and_postproc() -> None:
    env = GymEnv("CartPole-v1")
    env.set_seed(0)
    seen: list[torch.Size] = []

    def postproc(batch: TensorDictBase) -> TensorDictBase:
        seen.append(batch.batch_size)
        return batch

    collector = SyncDataCollector(env, frames_per_batch=100, total_frames=100, split_trajs=True, postproc=postproc)
    (batch,) = list(collector)
    mask = batch["collector", "mask"]
    assert batch.batch_dims == 2 and int(mask.sum()) == 100 and seen == [batch.batch_size]
    assert torch.equal(batch["next", "done"][..., 0] & mask, batch["next", "done"][..., 0])


def test_total_frames_len_and_uneven_frames_per_batch() -> None:
    with pytest.warns(UserWarning, match="not a multiple"):
        collector = Collector(pendulum_batch(3), frames_per_batch=10, total_frames=40)
    assert collector.frames_per_batch == 12 and len(collector) == 4
    sizes = [batch.numel() for batch in collector]
    assert sizes == [12, 12, 12, 12]
    with pytest.raises(TypeError, match="never stops"):
        len(SyncDataCollector(GymEnv("Pendulum-v1"), frames_per_batch=4))


def test_return_same_td_is_the_same_object() -> None:
    collector = SyncDataCollector(GymEnv("Pendulum-v1"), frames_per_batch=5, total_frames=15, return_same_td=True)
    batches = list(collector)
    assert batches[0] is batches[1] is batches[2]


def test_set_seed_reproduces() -> None:
    outs = []
    for _ in range(2):
        collector = SyncDataCollector(pendulum_batch(2), frames_per_batch=10, total_frames=20)
        collector.set_seed(7)
        outs.append(torch.cat(list(collector), -1))
    assert_same(outs[0].exclude("collector"), outs[1].exclude("collector"))


@pytest.mark.parametrize("fast_path", [True, False])
def test_state_dict_resumes_the_same_trajectories(fast_path: bool) -> None:
    env = TransformedEnv(pendulum_batch(2), StepCounter()) if not fast_path else pendulum_batch(2)
    policy = make_policy(env)
    collector = SyncDataCollector(env, policy, frames_per_batch=20, fast_path=fast_path)
    collector.next()
    state = collector.state_dict()
    resumed = SyncDataCollector(env, policy, frames_per_batch=20, fast_path=fast_path)
    resumed.load_state_dict(state, continue_episodes=True)
    batch = resumed.next()
    assert resumed.state_dict()["frames"] == 40
    assert batch["collector", "traj_ids"][:, 0].tolist() == state["traj_ids"]["current"].tolist()
    assert torch.equal(batch["observation"][:, 0], state["shuttle"]["observation"])
    assert torch.equal(batch["_ou_steps"][:, 0], state["shuttle"]["_ou_steps"] + 1)
    if not fast_path:
        assert batch["step_count"][:, 0].eq(10).all()


def test_policy_device_copy_and_weight_update() -> None:
    env = GymEnv("Pendulum-v1")
    policy = make_policy(env, ou=False)
    collector = SyncDataCollector(env, policy, frames_per_batch=5, total_frames=5)
    assert collector.policy is policy
    with torch.no_grad():
        policy.module[0].bias.add_(1.0)
    collector.update_policy_weights_()  # same object: nothing to do
    other = make_policy(env, seed=5, ou=False)
    collector.update_policy_weights_(other)
    assert torch.equal(policy.module[0].weight, other.module[0].weight)
    with pytest.raises(TypeError, match="state dict"):
        collector.update_policy_weights_(3)


def test_errors() -> None:
    with pytest.raises(ValueError, match="frames_per_batch"):
        SyncDataCollector(GymEnv("Pendulum-v1"), frames_per_batch=0)
    with pytest.raises(ValueError, match="total_frames"):
        SyncDataCollector(GymEnv("Pendulum-v1"), frames_per_batch=2, total_frames=0)
    with pytest.raises(TypeError, match="must return an EnvBase"):
        SyncDataCollector(lambda: 3, frames_per_batch=2)
    with pytest.raises(TypeError, match="policy"):
        SyncDataCollector(GymEnv("Pendulum-v1"), policy=3, frames_per_batch=2)  # type: ignore[arg-type]
    bad = TensorDictModule(torch.nn.Linear(3, 2), ["observation"], ["action"])
    with pytest.raises(ValueError, match="expected shape"):
        SyncDataCollector(GymEnv("Pendulum-v1"), bad, frames_per_batch=2).next()
    collector = SyncDataCollector(GymEnv("Pendulum-v1"), frames_per_batch=2)
    collector.shutdown()
    with pytest.raises(RuntimeError, match="shut down"):
        collector.next()


def test_equals_rollout_serial_of_vector_envs() -> None:
    make = lambda: SerialEnv(2, lambda: GymEnv("CartPole-v1", num_envs=2))  # noqa: E731
    env = make()
    env.set_seed(4)
    collector = SyncDataCollector(env, frames_per_batch=4 * 30, total_frames=4 * 90)
    assert collector.uses_fast_path
    got = torch.cat(list(collector), -1)
    reference = make()
    reference.set_seed(4)
    assert got.batch_size == torch.Size([2, 2, 90])
    assert_same(got, reference.rollout(90, break_when_any_done=False))
    ids = got["collector", "traj_ids"]
    assert torch.equal(ids[..., 1:] != ids[..., :-1], got["next", "done"][..., :-1, 0])


@pytest.mark.parametrize("with_policy", [True, False])
@pytest.mark.parametrize(
    "make_base", [lambda: SerialEnv(2, lambda: GymEnv("Pendulum-v1")), lambda: GymEnv("Pendulum-v1")]
)
def test_max_frames_per_traj_fast_path_equals_step_counter_rollout(make_base: object, with_policy: bool) -> None:
    env = make_base()  # type: ignore[operator]
    env.set_seed(2)
    n = env.batch_size.numel()
    policy = make_policy(env) if with_policy else None
    collector = SyncDataCollector(env, policy, frames_per_batch=n * 13, total_frames=n * 13 * 4, max_frames_per_traj=7)
    assert collector.uses_fast_path
    got = torch.cat(list(collector), -1)
    # the generic loop, step by step
    generic_env = make_base()  # type: ignore[operator]
    generic_env.set_seed(2)
    generic = SyncDataCollector(
        generic_env, make_policy(env) if with_policy else None, frames_per_batch=n * 13, total_frames=n * 13 * 4,
        max_frames_per_traj=7, fast_path=False,
    )
    assert not generic.uses_fast_path
    assert_same(got.exclude("collector"), torch.cat(list(generic), -1).exclude("collector"))
    if with_policy:  # (random actions: TransformedEnv.rollout draws them its own way)
        reference = TransformedEnv(make_base(), StepCounter(7))  # type: ignore[operator]
        reference.set_seed(2)
        with torch.no_grad():
            expected = reference.rollout(52, make_policy(reference), break_when_any_done=False)
        assert_same(got, expected)
    state = collector.state_dict()["shuttle"]
    assert torch.equal(state["step_count"], got["next", "step_count"][..., -1, :] % 7)


def memory_policy(tensordict: TensorDictBase) -> TensorDictBase:
    """Not a TensorDictModule: called on tensordicts; carries a counter from step to step."""
    count = tensordict.get("count", None)
    count = torch.zeros(*tensordict.batch_size, 1) if count is None else count
    tensordict.set("count", count + 1)
    tensordict.set("action", torch.tanh(tensordict.get("observation")[..., :1] + 0.01 * count))
    return tensordict


@pytest.mark.parametrize("max_frames", [None, 9])
def test_tensordict_policy_on_the_fast_path(max_frames: int | None) -> None:
    runs = []
    for fast_path in (True, False):
        env = pendulum_batch(2)
        env.set_seed(5)
        collector = SyncDataCollector(
            env, memory_policy, frames_per_batch=30, total_frames=90, fast_path=fast_path,
            max_frames_per_traj=max_frames,
        )
        assert collector.uses_fast_path == fast_path
        runs.append(torch.cat(list(collector), -1))
    assert_same(runs[0].exclude("collector"), runs[1].exclude("collector"))
    assert torch.equal(runs[0]["collector", "traj_ids"], runs[1]["collector", "traj_ids"])
    assert runs[0]["count"][:, -1].eq(45).all()
    if max_frames is None:
        reference = pendulum_batch(2)
        reference.set_seed(5)
        assert_same(runs[0], reference.rollout(45, memory_policy, break_when_any_done=False))


def test_set_seed_rejects_bad_seeds_and_the_collector_goes_on_as_before():
    make = lambda: SyncDataCollector(GymEnv("Pendulum-v1"), frames_per_batch=4)  # noqa: E731
    collector, reference = make(), make()
    collector.set_seed(3)
    reference.set_seed(3)
    for bad in (-1, 2**64, 2.0, "3"):
        with pytest.raises((TypeError, ValueError), match=r"SyncDataCollector.set_seed: the seed must be .*0 <= seed < 2\*\*63"):
            collector.set_seed(bad)
    assert torch.equal(collector.next()["next", "observation"], reference.next()["next", "observation"])
    collector.shutdown()
    reference.shutdown()


@pytest.mark.parametrize("with_policy", [False, True])
def test_a_parallel_env_worker_killed_in_a_batch_is_rebuilt_and_truncated(tmp_path, with_policy: bool) -> None:
    import os
    import signal

    from cadence.envs import ParallelEnv
    from cadence.envs.workers import WorkerDiedError
    from tests.envs.test_parallel import SelfKillingEnv

    trigger = tmp_path / "kill"
    factories = [lambda: SelfKillingEnv(str(tmp_path / "never")), lambda: SelfKillingEnv(str(trigger))]
    policy = TensorDictModule(torch.nn.Linear(1, 1), ["count"], ["action"]) if with_policy else None
    runs = []
    for kill in (False, True):
        with ParallelEnv(2, factories, max_restarts=1) as env:
            collector = SyncDataCollector(env, policy, frames_per_batch=20, total_frames=60)
            batches = []
            for batch in collector:
                batches.append(batch.clone())
                if kill and len(batches) == 1:
                    trigger.touch()  # worker 1 dies at the first step of the second batch
            assert env.restarts == [0, int(kill)]
        runs.append(torch.cat(batches, -1))
    plain, rebuilt = runs
    assert rebuilt.batch_size == torch.Size([2, 30])
    counts = rebuilt["next", "count"].squeeze(-1)
    assert counts[1].tolist() == list(range(1, 11)) + [0] + list(range(1, 20))
    assert rebuilt["next", "truncated"].squeeze(-1)[1].nonzero().flatten().tolist() == [10]
    assert rebuilt["next", "done"].squeeze(-1)[1].nonzero().flatten().tolist() == [10]
    assert torch.equal(rebuilt[0]["next", "count"], plain[0]["next", "count"])  # worker 0's data is untouched
    ids = rebuilt["collector", "traj_ids"][1]
    assert (ids[:11] == ids[0]).all() and (ids[11:] == ids[11]).all() and ids[11] != ids[0]
    with ParallelEnv(2, factories) as env:  # no restarts: the error names the worker
        collector = SyncDataCollector(env, policy, frames_per_batch=20, total_frames=60)
        collector.next()
        os.kill(env.pool.pids[1], signal.SIGKILL)
        with pytest.raises(WorkerDiedError, match=r"worker 1 .*SIGKILL.*max_restarts=0") as info:
            collector.next()
        assert info.value.index == 1


# ---------------------------------------------------------------- bad values (issue #14)
class FirstOfTwo(torch.nn.Module):
    """Always the first of the two one-hot actions of ``OffSpaceEnv``."""

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        action = torch.zeros(*observation.shape[:-1], 2, dtype=torch.bool)
        action[..., 0] = True
        return action


def first_of_two(tensordict: TensorDictBase) -> TensorDictBase:
    return tensordict.set("action", FirstOfTwo()(tensordict.get("observation")))


OFF_SPACE_POLICIES = {
    "random": lambda: None,
    "compiled": lambda: TensorDictModule(FirstOfTwo(), ["observation"], ["action"]),
    "tensordict": lambda: first_of_two,
}
OFF_SPACE_ENVS = {
    "GymWrapper": lambda make: GymWrapper(make()),
    "SerialEnv": lambda make: SerialEnv(2, lambda: GymWrapper(make())),
    "under a StepCounter": lambda make: TransformedEnv(GymWrapper(make()), StepCounter(3)),
}


@pytest.mark.parametrize("at", ["reset", "step"])
@pytest.mark.parametrize("policy", list(OFF_SPACE_POLICIES))
@pytest.mark.parametrize("kind", list(OFF_SPACE_ENVS))
def test_an_observation_off_its_declared_shape_is_named_on_the_fast_path(kind: str, policy: str, at: str) -> None:
    # the gymnasium runner used to fail with numpy's "could not broadcast" / "cannot reshape"
    env = OFF_SPACE_ENVS[kind](lambda: OffSpaceEnv(shape=(4,), at=at))
    collector = SyncDataCollector(env, OFF_SPACE_POLICIES[policy](), frames_per_batch=8, total_frames=16)
    assert collector.uses_fast_path
    with pytest.raises(SpecMismatchError) as info:
        collector.next()
    assert (
        "gave an observation of shape (4,) and dtype float32 at key 'observation', "
        "but its spec (from the declared observation space) has shape (3,)" in str(info.value)
    )
    assert f"{at}()" in str(info.value)  # which call gave it
    if kind == "SerialEnv":  # each sub-env is checked on its own, and named
        assert str(info.value).startswith("SerialEnv sub-env 0: ")
    collector.shutdown()


class LateOffSpaceEnv(OffSpaceEnv):
    """Well-formed until its second reset, whose observation has shape (4,)."""

    def __init__(self) -> None:
        super().__init__(shape=(3,))
        self.resets = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[object, dict]:
        obs, info = super().reset(seed=seed, options=options)
        self.resets += 1
        return (obs if self.resets < 2 else obs[[0, 1, 2, 2]]), info


@pytest.mark.parametrize("kind", ["GymWrapper", "SerialEnv"])
def test_a_reset_off_its_declared_shape_inside_a_batch_is_named(kind: str) -> None:
    # episodes end after 4 steps: the reset after the first one comes within the batch
    collector = SyncDataCollector(OFF_SPACE_ENVS[kind](LateOffSpaceEnv), frames_per_batch=12, total_frames=12)
    assert collector.uses_fast_path
    message = r"GymWrapper: the simulator's reset\(\) gave an observation of shape \(4,\).*has shape \(3,\)"
    with pytest.raises(SpecMismatchError, match=message):
        collector.next()


@pytest.mark.parametrize("kind", ["GymWrapper", "SerialEnv"])
def test_a_scalar_observation_is_named_on_the_fast_path_not_broadcast(kind: str) -> None:
    # numpy would broadcast the scalar into the batch's (3,) rows
    env = OFF_SPACE_ENVS[kind](lambda: OffSpaceEnv(shape=(), at="step"))
    collector = SyncDataCollector(env, frames_per_batch=8, total_frames=8)
    with pytest.raises(SpecMismatchError, match=r"step\(\) gave an observation of shape \(\).*has shape \(3,\)"):
        collector.next()


def test_observations_that_fit_their_space_still_collect_on_the_fast_path() -> None:
    # float64 for a float32 space: cast, as before; a policy's own ValueError is not renamed
    env = GymWrapper(OffSpaceEnv(shape=(3,), dtype=np.float64))
    collector = SyncDataCollector(env, frames_per_batch=8, total_frames=8)
    batch = collector.next()
    assert batch["next", "observation"].dtype == torch.float32 and batch.batch_size == torch.Size([8])

    def failing(tensordict: TensorDictBase) -> TensorDictBase:
        raise ValueError("the policy's own failure")

    with pytest.raises(ValueError, match="the policy's own failure"):
        SyncDataCollector(GymWrapper(OffSpaceEnv(shape=(3,))), failing, frames_per_batch=8).next()


def test_compile_policy_and_cudagraph_policy_do_the_documented_thing_or_warn(recwarn) -> None:
    from tensordict.nn import TensorDictModule

    torch.manual_seed(0)
    policy = TensorDictModule(torch.nn.Linear(3, 1), ["observation"], ["action"])
    plain = SyncDataCollector(GymEnv("Pendulum-v1"), policy, frames_per_batch=20, total_frames=40)
    calls = []

    def counting_backend(graph_module, example_inputs):  # stands for inductor: counts compilations
        calls.append(1)
        return graph_module.forward

    compiled = SyncDataCollector(
        GymEnv("Pendulum-v1"), policy, frames_per_batch=20, total_frames=40,
        compile_policy={"backend": counting_backend, "warmup": 2}, cudagraph_policy={"warmup": 10},
    )
    plain.set_seed(1)
    compiled.set_seed(1)
    for ours, theirs in zip(compiled, plain):
        torch.testing.assert_close(ours["action"], theirs["action"])
    assert calls, "the policy was never compiled"
    if not torch.cuda.is_available():
        assert any("cudagraph_policy skipped: CUDA graphs need a CUDA device" in str(w.message) for w in recwarn)
    assert compiled.policy is policy  # weights, state_dict and updates still reach the module
    with pytest.raises(TypeError, match="compile_policy: expected a bool or a dict"):
        SyncDataCollector(GymEnv("Pendulum-v1"), policy, frames_per_batch=20, compile_policy="max")


def test_a_collector_restored_on_a_new_env_starts_new_episodes() -> None:
    # what the reference's dqn script does on resume: a new env (never reset), the saved collector state
    first = SyncDataCollector(GymEnv("CartPole-v1"), frames_per_batch=30)
    first.next()
    state = first.state_dict()
    fresh = SyncDataCollector(GymEnv("CartPole-v1"), frames_per_batch=30)
    fresh.load_state_dict(state)
    batch = fresh.next()
    assert fresh.state_dict()["frames"] == 60
    assert batch["collector", "traj_ids"][0].item() > state["traj_ids"]["current"].max().item()

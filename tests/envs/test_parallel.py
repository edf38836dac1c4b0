"""ParallelEnv: real worker processes, shared memory, the pipe fallback, faults."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch
from tensordict import LazyStackedTensorDict, TensorDict

from cadence.envs import EnvCreator, GymEnv, ParallelEnv, PendulumEnv, SerialEnv, check_env_specs
from cadence.envs.workers import WorkerDiedError, WorkerError, WorkerException, WorkerTimeoutError
from cadence.envs import GymWrapper
from tests.fakes import CountingEnv, FailingEnv, SharedCounterEnv, SleepyEnv, TextEnv, assert_same_rollout


def _gone(pid: int, within: float = 3.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:  # a zombie waiting to be reaped counts as gone
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().split()[2] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def cartpoles():
    env = ParallelEnv(4, lambda: GymEnv("CartPole-v1"))
    yield env
    env.close()


def test_layout_lazy_start_and_specs(cartpoles):
    assert cartpoles.batch_size == torch.Size([4])
    assert not cartpoles.is_started
    assert cartpoles.action_spec.shape == torch.Size([4, 2])
    check_env_specs(cartpoles, seed=0)
    assert cartpoles.is_started


def test_attribute_pass_through_as_in_the_seed():
    def make_env():
        return GymEnv("Pendulum-v1", g=9.81)

    with ParallelEnv(4, make_env) as env:
        a, b, c, d = env.g  # gets the g-force of the various envs, which we set to 9.81 before
        assert a == b == c == d == 9.81
    with ParallelEnv(2, SharedCounterEnv) as env:
        assert env.twice(5) == [10, 10]


def test_partial_reset_as_in_the_seed(cartpoles):
    cartpoles.set_seed(0)
    first = cartpoles.reset()
    tensordict = TensorDict({"_reset": [[True], [False], [True], [True]]}, [4])
    out = cartpoles.reset(tensordict)  # eliminates the "_reset" entry
    assert set(out.keys()) == {"terminated", "done", "observation", "truncated"}
    assert "_reset" not in tensordict.keys()
    assert torch.equal(out["observation"][1], first["observation"][1])
    assert not torch.equal(out["observation"][0], first["observation"][0])


@pytest.mark.parametrize("break_when_any_done", [False, True])
def test_same_rollout_as_serial_env(break_when_any_done):
    serial = SerialEnv(3, lambda: GymEnv("CartPole-v1"))
    with ParallelEnv(3, lambda: GymEnv("CartPole-v1")) as parallel:
        assert parallel.set_seed(0) == serial.set_seed(0)
        expected = serial.rollout(60, break_when_any_done=break_when_any_done)
        assert_same_rollout(parallel.rollout(60, break_when_any_done=break_when_any_done), expected)


def test_step_by_step_matches_serial_env():
    serial = SerialEnv(2, lambda: GymEnv("CartPole-v1"))
    with ParallelEnv(2, lambda: GymEnv("CartPole-v1")) as parallel:
        for env in (serial, parallel):
            env.set_seed(3)
        data_s, data_p = serial.reset(), parallel.reset()
        for _ in range(40):
            action = serial.rand_action(data_s)["action"]
            data_s, next_s = serial.step_and_maybe_reset(data_s)
            data_p, next_p = parallel.step_and_maybe_reset(data_p.set("action", action))
            assert_same_rollout(data_p, data_s)
            data_s, data_p = next_s, next_p


def test_nested_batching():
    with ParallelEnv(2, lambda: GymEnv("CartPole-v1", num_envs=4)) as env:
        assert env.batch_size == torch.Size([2, 4])
        check_env_specs(env, seed=0)
        assert env.rollout(20, break_when_any_done=False).batch_size == torch.Size([2, 4, 20])
        data_ = env.reset()
        for _ in range(15):
            data, data_ = env.step_and_maybe_reset(env.rand_action(data_))
        assert data["next", "observation"].shape == torch.Size([2, 4, 4])
        assert not data_["done"].any()


def test_generic_and_stateless_envs():
    with ParallelEnv(2, lambda: CountingEnv(max_count=3)) as env:
        data = env.rollout(5, break_when_any_done=False)
        assert data["next", "count"][1].squeeze(-1).tolist() == [1, 2, 3, 1, 2]
    with ParallelEnv(2, PendulumEnv) as env:
        check_env_specs(env, seed=0)
        assert env.rollout(5)["next", "th"].shape == torch.Size([2, 5])


def test_dynamic_specs_go_through_the_pipes():
    from cadence.data import Binary, Bounded, Composite, Unbounded
    from cadence.envs import EnvBase

    class Growing(EnvBase):
        def __init__(self):
            super().__init__()
            self.observation_spec = Composite(observation=Unbounded(shape=(-1,)))
            self.action_spec = Bounded(-1.0, 1.0, shape=(1,))
            self.full_done_spec = Composite(done=Binary(1, shape=(1,), dtype=torch.bool),
                                            terminated=Binary(1, shape=(1,), dtype=torch.bool))
            self.count = 0

        def _reset(self, tensordict):
            self.count = 0
            return TensorDict({"observation": torch.zeros(1)}, [])

        def _step(self, tensordict):
            self.count += 1
            return TensorDict({"observation": torch.zeros(self.count + 1), "reward": torch.zeros(1),
                               "done": torch.tensor([self.count >= 3])}, [])

    with ParallelEnv(2, Growing) as env:
        data = env.rollout(3, return_contiguous=False)
        assert isinstance(data, LazyStackedTensorDict)
        assert data[0, 2]["next", "observation"].shape == torch.Size([4])


def test_non_tensor_data_goes_through_the_pipes():
    with ParallelEnv(2, lambda: GymWrapper(TextEnv())) as env:
        data = env.rollout(5)
        assert data.batch_size == torch.Size([2, 3])
        assert list(data[1]["next", "observation"]) == ["step1", "step2", "step3"]


def test_env_creator_shares_buffers_across_processes():
    with ParallelEnv(2, EnvCreator(SharedCounterEnv)) as env:
        env.rollout(3)
        assert [int(v) for v in env.steps_taken] == [6, 6]


# ---------------------------------------------------------------- faults
def test_an_exception_in_a_worker_names_it_and_carries_the_traceback():
    with ParallelEnv(2, [lambda: CountingEnv(max_count=100), lambda: FailingEnv(fail_at=2)]) as env:
        env.reset()
        with pytest.raises(WorkerException) as info:
            env.rollout(5)
        assert info.value.index == 1
        assert "the simulator broke at step 2" in str(info.value)
        assert "_step" in str(info.value)


def test_a_killed_worker_is_noticed_and_named(cartpoles):
    cartpoles.reset()
    os.kill(cartpoles.pool.pids[2], signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(WorkerDiedError) as info:
        cartpoles.rand_step()
    assert info.value.index == 2 and "2" in str(info.value)
    assert time.monotonic() - start < 5


def test_a_killed_worker_is_rebuilt_when_asked():
    with ParallelEnv(3, lambda: GymEnv("CartPole-v1"), max_restarts=1) as env:
        data = env.reset()
        os.kill(env.pool.pids[1], signal.SIGKILL)
        time.sleep(0.2)
        data = env.step(env.rand_action(data))
        assert data["next", "truncated"][1].all() and data["next", "done"][1].all()
        assert not data["next", "truncated"][[0, 2]].any()
        assert env.rollout(10).batch_size[0] == 3  # the batch keeps its shape
        os.kill(env.pool.pids[1], signal.SIGKILL)
        time.sleep(0.2)
        with pytest.raises(WorkerDiedError):  # no restarts left
            env.rand_step()


def test_a_hanging_worker_times_out():
    with ParallelEnv(2, [lambda: CountingEnv(), lambda: SleepyEnv(30.0)], timeout=0.5) as env:
        env.reset()
        start = time.monotonic()
        with pytest.raises(WorkerTimeoutError) as info:
            env.rand_step()
        assert info.value.index == 1
        assert time.monotonic() - start < 5
    assert issubclass(WorkerTimeoutError, WorkerError)


def test_close_and_garbage_collection_leave_no_process():
    env = ParallelEnv(2, lambda: GymEnv("CartPole-v1"))
    env.reset()
    pids = list(env.pool.pids)
    start = time.monotonic()
    env.close()
    assert time.monotonic() - start < 2
    assert all(_gone(pid) for pid in pids)
    env = ParallelEnv(2, lambda: GymEnv("CartPole-v1"))
    env.reset()
    pids = list(env.pool.pids)
    del env
    gc.collect()
    assert all(_gone(pid) for pid in pids)


def test_a_script_without_main_guard_works_and_leaves_nothing(tmp_path):
    script = tmp_path / "no_guard.py"
    script.write_text(textwrap.dedent("""
        from cadence.envs import GymEnv, ParallelEnv
        env = ParallelEnv(2, lambda: GymEnv("CartPole-v1"))
        print(env.rollout(5).batch_size)
        print(*env.pool.pids)
    """))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[0] == "torch.Size([2, 5])"
    assert all(_gone(int(pid)) for pid in lines[1].split())

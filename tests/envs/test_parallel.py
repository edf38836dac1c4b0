"""ParallelEnv: real worker processes, shared memory, the pipe fallback, faults."""

from __future__ import annotations

import gc
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time

import gymnasium
import numpy as np
import pytest
import torch
from tensordict import LazyStackedTensorDict, TensorDict

from cadence.data import Binary, Composite, Unbounded
from cadence.envs import EnvCreator, GymEnv, ParallelEnv, PendulumEnv, SerialEnv, check_env_specs, step_mdp
from cadence.envs.workers import WorkerDiedError, WorkerError, WorkerException, WorkerTimeoutError
from cadence.envs import GymWrapper
from cadence.envs.utils import SpecMismatchError
from tests.fakes import (
    CountingEnv,
    FailingEnv,
    OffSpaceEnv,
    SharedCounterEnv,
    SleepyEnv,
    TextEnv,
    assert_same_rollout,
)


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


class ThreadsEnv(CountingEnv):
    """Reports the torch threads of the process it runs in."""

    def torch_threads(self) -> int:
        return torch.get_num_threads()


def test_threads_of_this_process_and_the_workers():
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(4)
        env = ParallelEnv(2, ThreadsEnv)
        assert torch.get_num_threads() == 4  # nothing changes before the workers start
        env.start()
        assert torch.get_num_threads() == 2  # the workers' cores left to them
        assert env.torch_threads() == [1, 1]
        env.close()
        assert torch.get_num_threads() == 4  # given back
        with ParallelEnv(2, ThreadsEnv, num_threads=3, num_sub_threads=2, busy_wait=0.0) as env:
            env.start()
            assert torch.get_num_threads() == 3
            assert env.torch_threads() == [2, 2]
            assert env.rollout(5).batch_size == torch.Size([2, 5])
        assert torch.get_num_threads() == 4
        with pytest.raises(ValueError, match="num_threads must be None or an int >= 1, got 0"):
            ParallelEnv(2, ThreadsEnv, num_threads=0)
    finally:
        torch.set_num_threads(threads)


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
        seen = [int(v) for v in env.steps_taken]
    # both workers read one buffer, which holds both workers' steps (3 each, unshared: 3 and 3);
    # their `add_(1)` are not atomic, so two at the same instant may count once (failed once under load)
    assert seen[0] == seen[1] and 3 < seen[0] <= 6, seen


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


# ---------------------------------------------------------------- dead workers rebuilt on every path
class SelfKillingEnv(CountingEnv):
    """A CountingEnv (with a ``truncated`` entry) that SIGKILLs its own process in its next
    ``when`` (``"step"`` or ``"reset"``) once the file ``trigger`` exists; it removes the
    file first, so that the rebuilt worker lives on."""

    def __init__(self, trigger: str, when: str = "step", batch_size: tuple[int, ...] = ()) -> None:
        super().__init__(max_count=1000, batch_size=batch_size)
        flag = Binary(1, shape=(*batch_size, 1), dtype=torch.bool)
        self.full_done_spec = Composite(done=flag, terminated=flag.clone(), truncated=flag.clone(), shape=batch_size)
        self.trigger, self.when = trigger, when

    def _die_if_triggered(self, when: str) -> None:
        if when == self.when and os.path.exists(self.trigger):
            os.unlink(self.trigger)
            os.kill(os.getpid(), signal.SIGKILL)

    def _reset(self, tensordict):
        self._die_if_triggered("reset")
        return super()._reset(tensordict)

    def _step(self, tensordict):
        self._die_if_triggered("step")
        return super()._step(tensordict)


class PipedSelfKillingEnv(SelfKillingEnv):
    """The same with a dynamic observation spec, whose data goes through the pipes."""

    def __init__(self, trigger: str, when: str = "step", batch_size: tuple[int, ...] = ()) -> None:
        super().__init__(trigger, when, batch_size)
        self.observation_spec = Composite(count=Unbounded(shape=(*batch_size, -1)), shape=batch_size)


class KillingWrapper(gymnasium.Wrapper):
    """A gymnasium env that SIGKILLs its process at the ``at_step``-th step of an episode
    once ``trigger`` exists: stepped by the rollout shortcut, which runs in chunks."""

    def __init__(self, env: gymnasium.Env, trigger: str, at_step: int = 5) -> None:
        super().__init__(env)
        self.trigger, self.at_step, self.t = trigger, at_step, 0

    def reset(self, **kwargs):
        self.t = 0
        return self.env.reset(**kwargs)

    def step(self, action):
        self.t += 1
        if self.t == self.at_step and os.path.exists(self.trigger):
            os.unlink(self.trigger)
            os.kill(os.getpid(), signal.SIGKILL)
        return self.env.step(action)


@pytest.fixture(params=["shared", "pipes"])
def killable(request, tmp_path):
    """``make(when, max_restarts=1, batch_size=())``: a ParallelEnv of two counting envs
    whose worker 1 kills itself once ``trigger`` exists; and ``trigger``."""
    cls = SelfKillingEnv if request.param == "shared" else PipedSelfKillingEnv
    trigger, never = tmp_path / "kill", str(tmp_path / "never")
    envs = []

    def make(when="step", max_restarts=1, batch_size=()):
        env = ParallelEnv(
            2, [lambda: cls(never, when, batch_size), lambda: cls(str(trigger), when, batch_size)],
            max_restarts=max_restarts,
        )
        envs.append(env)
        env.start()
        assert (env._shared is None) is (request.param == "pipes")  # the premise of the pipes variant
        return env

    yield make, trigger
    for env in envs:
        env.close()


def counts(data, key=("next", "count")):
    return data[key].reshape(2, -1).tolist() if not isinstance(data, LazyStackedTensorDict) else [
        sub[key].reshape(-1).tolist() for sub in data.unbind(0)
    ]


def flags(data, name):
    return data["next", name].reshape(2, -1).any(-1).tolist()


def test_a_worker_killed_during_a_step_is_rebuilt_and_its_episode_truncated(killable):
    make, trigger = killable
    env = make("step")
    root = env.reset()
    data, root = env.step_and_maybe_reset(env.rand_action(root))
    pid = env.pool.pids[1]
    trigger.touch()
    data, root = env.step_and_maybe_reset(env.rand_action(root))
    assert env.pool.pids[1] != pid and env.restarts == [0, 1]
    assert counts(data) == [[2], [0]]  # worker 1: its fresh reset; worker 0 goes on
    assert flags(data, "truncated") == [False, True] and flags(data, "done") == [False, True]
    assert flags(data, "terminated") == [False, False]
    assert data["next", "reward"].reshape(-1).tolist() == [1.0, 0.0]
    assert counts(root, "count") == [[2], [0]]
    data, root = env.step_and_maybe_reset(env.rand_action(root))
    assert counts(data) == [[3], [1]] and flags(data, "done") == [False, False]


def test_a_worker_killed_between_steps_is_rebuilt_at_the_next_step(killable):
    make, _ = killable
    env = make("step")
    root = env.reset()
    data = env.step(env.rand_action(root))
    os.kill(env.pool.pids[1], signal.SIGKILL)
    data = env.step(env.rand_action(step_mdp(data)))
    assert counts(data) == [[2], [0]] and flags(data, "truncated") == [False, True]
    assert env.restarts == [0, 1]


@pytest.mark.parametrize("killed", ["during", "before"])
def test_a_worker_killed_in_a_full_reset_gets_a_fresh_reset(killable, killed):
    make, trigger = killable
    env = make("reset")
    root = env.reset()
    env.step_and_maybe_reset(env.rand_action(root))
    if killed == "during":
        trigger.touch()
    else:
        os.kill(env.pool.pids[1], signal.SIGKILL)
    out = env.reset()
    assert out.batch_size == torch.Size([2]) and counts(out, "count") == [[0], [0]]
    assert not out["done"].any() and env.restarts == [0, 1]
    data = env.step(env.rand_action(out))
    assert counts(data) == [[1], [1]]


@pytest.mark.parametrize("killed", ["during", "before"])
def test_a_worker_killed_in_a_partial_reset_gets_a_fresh_reset(killable, killed):
    make, trigger = killable
    env = make("reset")
    root = env.reset()
    for _ in range(2):
        data, root = env.step_and_maybe_reset(env.rand_action(root))
    if killed == "during":
        trigger.touch()
    else:
        os.kill(env.pool.pids[1], signal.SIGKILL)
    root["_reset"] = torch.tensor([[False], [True]])
    out = env.reset(root)
    assert counts(out, "count") == [[2], [0]] and env.restarts == [0, 1]
    data = env.step(env.rand_action(out))
    assert counts(data) == [[3], [1]]


def test_a_worker_killed_in_a_partial_reset_of_its_batch_is_reset_whole(tmp_path):
    trigger = tmp_path / "kill"
    make = lambda path: lambda: SelfKillingEnv(path, "reset", batch_size=(2,))  # noqa: E731
    with ParallelEnv(2, [make(str(tmp_path / "never")), make(str(trigger))], max_restarts=1) as env:
        root = env.reset()
        for _ in range(2):
            data, root = env.step_and_maybe_reset(env.rand_action(root))
        trigger.touch()
        root["_reset"] = torch.tensor([[[False], [True]], [[False], [True]]])
        out = env.reset(root)
        # worker 0: its sub-env 1 only; worker 1, rebuilt: both sub-envs, not the old count
        assert out["count"].reshape(2, 2).tolist() == [[2, 0], [0, 0]] and env.restarts == [0, 1]
        assert root["count"].reshape(2, 2).tolist() == [[2, 0], [0, 0]]


def test_a_worker_killed_in_a_policy_rollout_is_truncated_there(killable):
    make, trigger = killable
    env = make("step", max_restarts=2)
    steps = []

    def callback(env, data):
        steps.append(1)
        if len(steps) == 3:
            trigger.touch()

    data = env.rollout(6, policy=env.rand_action, callback=callback, break_when_any_done=False)
    assert data.batch_size == torch.Size([2, 6]) and env.restarts == [0, 1]
    assert counts(data) == [[1, 2, 3, 4, 5, 6], [1, 2, 3, 0, 1, 2]]
    truncated = data["next", "truncated"].reshape(2, 6)
    assert truncated[1].tolist() == [False, False, False, True, False, False] and not truncated[0].any()
    assert data["next", "done"].reshape(2, 6)[1, 3]
    steps.clear()
    stopped = env.rollout(6, policy=env.rand_action, callback=callback)  # stops at the first done
    assert stopped.batch_size == torch.Size([2, 4]) and flags(stopped[:, -1], "truncated") == [False, True]
    assert env.restarts == [0, 2]


@pytest.mark.parametrize("killed", ["during", "before"])
def test_a_worker_killed_in_a_chunked_rollout_rolls_its_chunk_again(tmp_path, killed):
    trigger = tmp_path / "kill"
    make0 = lambda: GymWrapper(gymnasium.make("CartPole-v1"))  # noqa: E731
    make1 = lambda: GymWrapper(KillingWrapper(gymnasium.make("CartPole-v1"), str(trigger)))  # noqa: E731
    runs = []
    for kill in (False, True):
        with ParallelEnv(2, [make0, make1], max_restarts=1) as env:
            env.set_seed(0)
            env.rollout(3, break_when_any_done=False)
            if kill and killed == "during":
                trigger.touch()
            elif kill:
                os.kill(env.pool.pids[1], signal.SIGKILL)
            runs.append(env.rollout(40, break_when_any_done=False))
            assert env.restarts == [0, int(kill)]
            assert not trigger.exists()
    plain, rebuilt = runs
    assert rebuilt.batch_size == torch.Size([2, 40])
    assert_same_rollout(rebuilt[0], plain[0])  # the other worker's data is untouched
    # worker 1's chunk is a whole rollout again, from its fresh reset: each step starts
    # where the last ended, unless that one was done
    obs, nxt, done = rebuilt[1]["observation"], rebuilt[1]["next", "observation"], rebuilt[1]["next", "done"]
    for t in range(39):
        assert done[t].item() or torch.equal(obs[t + 1], nxt[t])


@pytest.mark.parametrize("path", ["reset", "step", "rollout", "chunks"])
def test_without_restarts_a_killed_worker_is_named(tmp_path, path):
    factory = (
        (lambda: GymWrapper(gymnasium.make("CartPole-v1"))) if path == "chunks"
        else (lambda: SelfKillingEnv(str(tmp_path / "never")))
    )
    with ParallelEnv(2, factory) as env:
        root = env.reset()
        os.kill(env.pool.pids[1], signal.SIGKILL)
        with pytest.raises(WorkerDiedError, match=r"worker 1 .*SIGKILL.*max_restarts=0") as info:
            if path == "reset":
                env.reset()
            elif path == "step":
                env.step_and_maybe_reset(env.rand_action(root))
            elif path == "rollout":
                env.rollout(5, policy=env.rand_action, auto_reset=False, tensordict=root)
            else:
                env.rollout(5, break_when_any_done=False)
        assert info.value.index == 1 and env.restarts == [0, 0]


def test_restarts_run_out(killable):
    make, trigger = killable
    env = make("step", max_restarts=2)
    root = env.reset()
    for expected in (1, 2):
        trigger.touch()
        data, root = env.step_and_maybe_reset(env.rand_action(root))
        assert env.restarts == [0, expected]
    trigger.touch()
    with pytest.raises(WorkerDiedError, match=r"worker 1 .*2 of max_restarts=2") as info:
        env.step_and_maybe_reset(env.rand_action(root))
    assert info.value.index == 1 and info.value.exitcode == -signal.SIGKILL


class SlowResetEnv(CountingEnv):
    """Takes 0.3 s to reset."""

    def _reset(self, tensordict):
        time.sleep(0.3)
        return super()._reset(tensordict)


def test_an_interrupted_reset_leaves_the_workers_in_step():
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    with ParallelEnv(2, SlowResetEnv) as env:
        env.start()
        previous = signal.signal(signal.SIGALRM, interrupt)
        try:
            signal.setitimer(signal.ITIMER_REAL, 0.1)
            with pytest.raises(KeyboardInterrupt):
                env.reset()  # Ctrl-C while the workers reset
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        root = env.reset()  # the replies of the interrupted reset do not answer this one
        assert root["count"].reshape(-1).tolist() == [0.0, 0.0]
        assert env.step(env.rand_action(root))["next", "count"].reshape(-1).tolist() == [1.0, 1.0]


# ---------------------------------------------------------------- bad values (issue #14)
def _one_hot_policy(td):
    return td.set("action", torch.tensor([True, False]).expand(*td.batch_size, 2).clone())


def _step_once(env):
    root = env.reset()
    env.step(env.rand_action(root))


OFF_SPACE_PATHS = {
    "rollout, random actions (chunks)": lambda env: env.rollout(3, break_when_any_done=False),
    "rollout, policy": lambda env: env.rollout(3, _one_hot_policy),
    "step": _step_once,
    "reset": lambda env: env.reset(),
}


@pytest.mark.parametrize(
    "path, at",
    [(path, at) for path in OFF_SPACE_PATHS for at in ("reset", "step") if not (path == "reset" and at == "step")],
)
def test_an_observation_off_its_declared_shape_is_named_by_the_worker(path, at):
    # the shared-memory step used to fail with numpy's "could not broadcast input array"
    with ParallelEnv(2, lambda: GymWrapper(OffSpaceEnv(shape=(4,), at=at))) as env:
        with pytest.raises(WorkerException) as info:
            OFF_SPACE_PATHS[path](env)
    method = "rollout_chunk" if path.endswith("(chunks)") else at
    message = str(info.value)
    assert f"worker {info.value.index} of 'ParallelEnv'" in message
    assert f"raised SpecMismatchError in '{method}'" in message
    assert (
        "observation of shape (4,) and dtype float32 at key 'observation', "
        "but its spec (from the declared observation space) has shape (3,)" in message
    )
    assert isinstance(info.value.remote_exception, SpecMismatchError)


@pytest.mark.parametrize("path", ["rollout, policy", "step"])
def test_a_scalar_observation_is_named_by_the_worker_not_broadcast(path):
    # numpy would broadcast the scalar into the worker's (3,) row of shared memory
    with ParallelEnv(2, lambda: GymWrapper(OffSpaceEnv(shape=(), at="step"))) as env:
        message = r"SpecMismatchError in 'step'.*observation of shape \(\).*has shape \(3,\)"
        with pytest.raises(WorkerException, match=message):
            OFF_SPACE_PATHS[path](env)


def test_observations_that_fit_their_space_still_step_through_shared_memory():
    # a float64 observation for a float32 space is cast, as before; every episode rechecks
    with ParallelEnv(2, lambda: GymWrapper(OffSpaceEnv(shape=(3,), dtype=np.float64))) as env:
        data = env.rollout(10, _one_hot_policy, break_when_any_done=False)
    assert data["next", "observation"].shape == torch.Size([2, 10, 3])
    assert data["next", "observation"].dtype == torch.float32
    assert int(data["next", "done"].sum()) == 4  # episodes of 4 steps: reset and stepped again


def test_serial_for_single_keeps_one_env_in_this_process():
    single = ParallelEnv(1, lambda: GymEnv("Pendulum-v1"), serial_for_single=True)
    assert single.runs_in_process and single.batch_size == torch.Size([1])
    reference = SerialEnv(1, lambda: GymEnv("Pendulum-v1"))
    for env in (single, reference):
        env.set_seed(3)
    fast = single.rollout(20, break_when_any_done=False), reference.rollout(20, break_when_any_done=False)
    policy = lambda td: td.set("action", torch.full((1, 1), 0.5))  # noqa: E731
    stepwise = single.rollout(20, policy), reference.rollout(20, policy)
    for ours, theirs in (fast, stepwise):
        assert (ours == theirs).all()
    assert single.unwrapped == [env.unwrapped for env in single._in_process._envs]  # attribute pass-through
    assert multiprocessing.active_children() == []  # no worker process
    single.close()
    with ParallelEnv(2, lambda: GymEnv("Pendulum-v1"), serial_for_single=True) as two:
        assert not two.runs_in_process
        two.rollout(3)
        assert len(multiprocessing.active_children()) == 2


def test_a_closed_parallel_env_starts_its_workers_again_on_use():
    # the reference's example scripts close their evaluation env after a first reset, then roll it out
    env = ParallelEnv(2, lambda: GymEnv("CartPole-v1"))
    env.reset()
    env.close()
    assert env.is_closed and multiprocessing.active_children() == []
    assert env.rollout(5, break_when_any_done=False).batch_size == torch.Size([2, 5])
    env.close()
    assert multiprocessing.active_children() == []


# ---------------------------------------------------------------- the array protocol (ParallelSimulators)
class _GreedyOneHot(torch.nn.Module):
    """CartPole's one-hot action from a linear score."""

    def __init__(self) -> None:
        super().__init__()
        self.score = torch.nn.Linear(4, 2)

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.one_hot(self.score(observation).argmax(-1), 2)


def _vector_cartpoles() -> ParallelEnv:
    return ParallelEnv(2, lambda: GymEnv("CartPole-v1", num_envs=2))


@pytest.mark.parametrize("with_policy", [False, True], ids=["random", "policy"])
def test_the_collector_steps_the_workers_through_the_array_protocol(with_policy: bool) -> None:
    from cadence.collectors import SyncDataCollector
    from tensordict.nn import TensorDictModule

    batches = {}
    for fast_path in (True, False):
        env = _vector_cartpoles()
        env.set_seed(5)
        torch.manual_seed(0)
        policy = TensorDictModule(_GreedyOneHot(), ["observation"], ["action"]) if with_policy else None
        collector = SyncDataCollector(env, policy, frames_per_batch=80, total_frames=240, fast_path=fast_path)
        try:
            assert collector.uses_fast_path == fast_path
            batches[fast_path] = torch.cat(list(collector), -1)
        finally:
            collector.shutdown()
            env.close()
    fast, slow = batches[True], batches[False]
    assert set(fast.keys(True, True)) == set(slow.keys(True, True))
    for key in slow.keys(True, True):
        assert torch.equal(fast[key], slow[key]), key
    done = fast["next", "done"]
    assert done.any() and not done.all()  # partial resets, within and across workers


def test_a_rollout_with_a_policy_steps_the_workers_through_the_array_protocol() -> None:
    parallel, serial = _vector_cartpoles(), SerialEnv(2, lambda: GymEnv("CartPole-v1", num_envs=2))
    try:
        parallel.set_seed(3)
        serial.set_seed(3)
        assert type(parallel._array_simulator()).__name__ == "ParallelSimulators"
        policy = lambda td: td.set("action", torch.nn.functional.one_hot((td["observation"][..., 2] > 0).long(), 2))
        for kwargs in ({"break_when_any_done": False}, {}):
            fast = parallel.rollout(60, policy, **kwargs)
            slow = serial.rollout(60, policy, **kwargs)
            assert fast.batch_size == slow.batch_size
            for key in slow.keys(True, True):
                assert torch.equal(fast[key], slow[key]), key
    finally:
        parallel.close()


def test_the_array_protocol_rebuilds_a_worker_killed_in_a_batch_and_truncates_its_episode(tmp_path) -> None:
    from cadence.collectors import SyncDataCollector

    trigger = tmp_path / "kill"
    never = str(tmp_path / "never")
    factories = [
        lambda: GymWrapper(KillingWrapper(gymnasium.make("Pendulum-v1"), never)),
        lambda: GymWrapper(KillingWrapper(gymnasium.make("Pendulum-v1"), str(trigger), at_step=13)),
    ]
    runs = []
    for kill in (False, True):
        with ParallelEnv(2, factories, max_restarts=1) as env:
            env.set_seed(0)
            collector = SyncDataCollector(env, None, frames_per_batch=20, total_frames=60)
            assert collector.uses_fast_path
            batches = []
            for batch in collector:
                batches.append(batch.clone())
                if kill and len(batches) == 1:
                    trigger.touch()  # worker 1 dies at the 13th step of its episode, in the second batch
            assert env.restarts == [0, int(kill)]
        runs.append(torch.cat(batches, -1))
    plain, rebuilt = runs
    assert rebuilt["next", "truncated"].squeeze(-1)[1].nonzero().flatten().tolist() == [12]
    assert rebuilt["next", "done"].squeeze(-1)[1].nonzero().flatten().tolist() == [12]
    assert rebuilt["next", "reward"][1, 12].item() == 0.0  # no reward for the lost step
    assert torch.equal(rebuilt[0]["next", "observation"], plain[0]["next", "observation"])  # worker 0 untouched
    ids = rebuilt["collector", "traj_ids"][1]
    assert (ids[:13] == ids[0]).all() and (ids[13:] == ids[13]).all() and ids[13] != ids[0]

"""Small envs built from specs, shared by the tests."""

from __future__ import annotations

import gymnasium
import numpy as np
import torch
from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase

from cadence.data import Bounded, Categorical, Composite, Unbounded
from cadence.envs import EnvBase, GymEnv


class CountingEnv(EnvBase):
    """Counts its steps; terminates after ``max_count`` of them. Takes an action in [-1, 1]
    (ignored) unless ``with_action=False``, in which case it needs no input at all."""

    def __init__(self, max_count: int = 5, batch_size: tuple[int, ...] = (), with_action: bool = True) -> None:
        super().__init__(batch_size=batch_size)
        self.max_count = max_count
        self.observation_spec = Composite(count=Unbounded(shape=(*batch_size, 1)), shape=batch_size)
        if with_action:
            self.action_spec = Bounded(-1.0, 1.0, shape=(*batch_size, 1))
        self.count = torch.zeros(*batch_size, 1)

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        mask = None if tensordict is None else tensordict.get("_reset", None)
        if mask is None:
            self.count = torch.zeros(*self.batch_size, 1)
        else:
            self.count = torch.where(mask, torch.zeros_like(self.count), self.count)
        return TensorDict({"count": self.count.clone()}, self.batch_size)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self.count = self.count + 1
        return TensorDict(
            {"count": self.count.clone(), "reward": torch.ones(*self.batch_size, 1), "done": self.count >= self.max_count},
            self.batch_size,
        )


class MultiLevelZerosEnv(EnvBase):
    """Returns zeros after a reset, at the root and for two agents, each with its own
    done signals of shape (2,): the env of the reference's ``"_reset"`` examples."""

    def __init__(self) -> None:
        super().__init__()
        val = Unbounded(shape=(2,), dtype=torch.long)
        flag = Categorical(2, shape=(2,), dtype=torch.bool)
        self.observation_spec = Composite(
            val=val, agent0=Composite(val=val.clone()), agent1=Composite(val=val.clone())
        )
        self.action_spec = Unbounded(shape=(2,))
        self.full_done_spec = Composite(
            done=flag, terminated=flag.clone(),
            agent0=Composite(done=flag.clone(), terminated=flag.clone()),
            agent1=Composite(done=flag.clone(), terminated=flag.clone()),
        )
        self.reset_inputs: list[TensorDictBase | None] = []

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        self.reset_inputs.append(None if tensordict is None else tensordict.clone())
        zeros = torch.zeros(2, dtype=torch.long)
        return TensorDict(
            {"val": zeros, ("agent0", "val"): zeros.clone(), ("agent1", "val"): zeros.clone()}, []
        )

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        out = tensordict.select("val", ("agent0", "val"), ("agent1", "val")).apply(lambda v: v + 1)
        no = torch.zeros(2, dtype=torch.bool)
        out.set("reward", torch.zeros(1))
        for prefix in ((), ("agent0",), ("agent1",)):
            out.set(prefix + ("done",), no.clone())
        return out


class GenericPathGymEnv(GymEnv):
    """A gymnasium env kept off the rollout shortcut: its observation reader is not the stock one."""

    def read_obs(self, observations):
        return super().read_obs(observations)


def assert_same_rollout(fast: TensorDictBase, slow: TensorDictBase) -> None:
    """The two rollouts hold the same entries, dtypes and values."""
    assert fast.batch_size == slow.batch_size and fast.names == slow.names
    assert set(fast.keys(True, True)) == set(slow.keys(True, True))
    for key in fast.keys(True):  # nested ones keep their own dims (a group's agent dim)
        if isinstance(fast.get(key), TensorDictBase):
            assert fast.get(key).batch_size == slow.get(key).batch_size, key
    for key in fast.keys(True, True):
        assert fast[key].dtype == slow[key].dtype, key
        assert torch.equal(fast[key], slow[key]), key


class SharedCounterEnv(CountingEnv):
    """A CountingEnv whose steps also bump a buffer, to see buffers shared across envs."""

    def __init__(self, max_count: int = 100) -> None:
        super().__init__(max_count=max_count)
        self.register_buffer("steps_taken", torch.zeros((), dtype=torch.long))

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self.steps_taken.add_(1)
        return super()._step(tensordict)

    def twice(self, value: int) -> int:
        return 2 * value


class FailingEnv(CountingEnv):
    """Raises in ``_step`` once it has counted to ``fail_at``."""

    def __init__(self, fail_at: int = 2) -> None:
        super().__init__(max_count=100)
        self.fail_at = fail_at

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        if float(self.count.max()) + 1 >= self.fail_at:
            raise ValueError(f"the simulator broke at step {self.fail_at}")
        return super()._step(tensordict)


class SleepyEnv(CountingEnv):
    """Sleeps ``sleep_s`` seconds in ``_step``: a worker that hangs."""

    def __init__(self, sleep_s: float = 30.0) -> None:
        super().__init__(max_count=100)
        self.sleep_s = sleep_s

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        import time

        time.sleep(self.sleep_s)
        return super()._step(tensordict)


class TextEnv(gymnasium.Env):
    """A gymnasium env whose observations are strings (a Text space)."""

    observation_space = gymnasium.spaces.Text(8)
    action_space = gymnasium.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return "start", {}

    def step(self, action):
        self.t += 1
        return f"step{self.t}", 1.0, self.t >= 3, False, {}


class ExplodingEnv(gymnasium.Wrapper):
    """CartPole whose ``step`` raises once ``explode`` is set: a simulator that breaks on demand."""

    def __init__(self, env_context: object = None) -> None:
        super().__init__(gymnasium.make("CartPole-v1"))
        self.explode = False

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        if self.explode:
            raise ValueError("the simulator exploded")
        return self.env.step(action)


class OffSpaceEnv(gymnasium.Env):
    """Declares a Box of shape (3,) (float32, or uint8) but returns ``shape``/``dtype``
    observations at ``at`` ("reset", "step" or "both"); well-formed ones elsewhere.
    Its episodes end (terminated) after 4 steps."""

    def __init__(
        self,
        shape: tuple[int, ...] = (4,),
        dtype: type = np.float32,
        at: str = "both",
        box_dtype: type = np.float32,
    ) -> None:
        self.observation_space = gymnasium.spaces.Box(0, 1, (3,), dtype=box_dtype)
        self.action_space = gymnasium.spaces.Discrete(2)
        self.shape, self.dtype, self.at, self.box_dtype = shape, dtype, at, box_dtype
        self.t = 0

    def _obs(self, where: str) -> np.ndarray:
        if self.at in (where, "both"):
            return np.zeros(self.shape, dtype=self.dtype)
        return np.zeros(3, dtype=self.box_dtype)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t = 0
        return self._obs("reset"), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        return self._obs("step"), 0.0, self.t >= 4, False, {}


class HeterogeneousAgentsEnv(EnvBase):
    """Agents of one group that differ in shape: agent ``i`` observes a vector of ``2 + i``
    numbers and acts with ``1 + i``. Per-agent data sit under ``"agents"`` (a lazily
    stacked TensorDict, agents second after the envs), the done flags are shared at the
    root; episodes end after ``max_steps``."""

    def __init__(self, n_agents: int = 3, num_envs: int = 2, max_steps: int = 4) -> None:
        super().__init__(batch_size=(num_envs,))
        self.n_agents, self.max_steps = n_agents, max_steps
        batch = (num_envs,)
        per_agent = [
            Composite(
                observation=Unbounded(shape=batch + (2 + i,)),
                action=Bounded(-1.0, 1.0, shape=batch + (1 + i,)),
                reward=Unbounded(shape=batch + (1,)),
                shape=batch,
            )
            for i in range(n_agents)
        ]
        agents = torch.stack(per_agent, dim=1)
        self.observation_spec = Composite(agents=agents.select("observation"), shape=batch)
        self.action_spec = Composite(agents=agents.select("action"), shape=batch)
        self.reward_spec = Composite(agents=agents.select("reward"), shape=batch)
        self.positions = [torch.zeros(num_envs, 2 + i) for i in range(n_agents)]
        self.steps = torch.zeros(num_envs, 1, dtype=torch.long)

    def _agents(self, per_agent: list[dict[str, torch.Tensor]]) -> TensorDictBase:
        tds = [TensorDict(entries, batch_size=self.batch_size) for entries in per_agent]
        return LazyStackedTensorDict.lazy_stack(tds, dim=1)

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        mask = None if tensordict is None else tensordict.get("_reset", None)
        keep = torch.zeros(*self.batch_size, 1, dtype=torch.bool) if mask is None else ~mask
        self.positions = [torch.where(keep, p, torch.zeros_like(p)) for p in self.positions]
        self.steps = torch.where(keep, self.steps, torch.zeros_like(self.steps))
        return TensorDict({"agents": self._agents([{"observation": p.clone()} for p in self.positions])}, self.batch_size)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        actions = tensordict["agents"].get("action", as_list=True)
        per_agent = []
        for i, (position, action) in enumerate(zip(self.positions, actions)):
            position = position.clone()
            position[:, : 1 + i] += 0.1 * action
            self.positions[i] = position
            per_agent.append({"observation": position.clone(), "reward": -position.norm(dim=-1, keepdim=True)})
        self.steps = self.steps + 1
        done = self.steps >= self.max_steps
        return TensorDict(
            {"agents": self._agents(per_agent), "done": done, "terminated": done.clone()}, self.batch_size
        )


class RandomPixelsEnv(EnvBase):
    """Emits random channel-last ``uint8`` frames (``"pixels"``, ``size`` x ``size`` x 3)
    drawn from its own generator (seeded by ``set_seed``); takes an action in [-1, 1]
    (ignored), rewards 0 and terminates after ``max_steps`` steps."""

    def __init__(self, size: int = 16, max_steps: int = 100) -> None:
        super().__init__()
        self.size = size
        self.max_steps = max_steps
        self.observation_spec = Composite(pixels=Bounded(0, 255, shape=(size, size, 3), dtype=torch.uint8))
        self.action_spec = Bounded(-1.0, 1.0, shape=(1,))
        self.frame_rng = torch.Generator().manual_seed(0)
        self.steps = 0

    def _frame(self) -> torch.Tensor:
        return torch.randint(0, 256, (self.size, self.size, 3), generator=self.frame_rng, dtype=torch.uint8)

    def _set_seed(self, seed: int | None) -> None:
        if seed is not None:
            self.frame_rng.manual_seed(seed)

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        self.steps = 0
        return TensorDict({"pixels": self._frame()}, [])

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self.steps += 1
        done = torch.tensor([self.steps >= self.max_steps])
        return TensorDict({"pixels": self._frame(), "reward": torch.zeros(1), "done": done}, [])

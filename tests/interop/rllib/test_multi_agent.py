"""Multi-agent sampling with RLlib's old-API contract: MultiAgentEnv, its checker, the worker."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from cadence.interop.rllib import (
    DefaultCallbacks,
    MultiAgentBatch,
    MultiAgentEnv,
    MultiAgentEnvChecker,
    Policy,
    RolloutWorker,
    SampleBatch,
    SyncSampler,
)

SB = SampleBatch
BOX = gym.spaces.Box(0.0, 1e6, (1,), np.float32)


def _obs(n: int) -> np.ndarray:
    return np.array([float(n)], np.float32)


class TurnEnv(MultiAgentEnv):
    """Agents "a" and "b" act in turns ("a" first); "b" finishes at step ``b_done_at``, "a" at ``length``.

    The reset obs is "a"'s only: "b" joins at step 1. After "b" is done, "a" acts alone.
    obs = [env step], reward = env step, for the agents in the obs.
    """

    def __init__(self, b_done_at: int = 5, length: int = 10, per_agent_spaces: bool = False) -> None:
        super().__init__()
        self._agent_ids = {"a", "b"}
        self.b_done_at, self.length = b_done_at, length
        if per_agent_spaces:
            self.observation_space = gym.spaces.Dict({"a": BOX, "b": gym.spaces.Box(0.0, 1e6, (1,), np.float32)})
            self.action_space = gym.spaces.Dict({"a": gym.spaces.Discrete(2), "b": gym.spaces.Discrete(3)})
        else:
            self.observation_space, self.action_space = BOX, gym.spaces.Discrete(2)
        self.n, self.b_done = 0, False
        self.actors: list[list[str]] = []

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        self.n, self.b_done = 0, False
        return {"a": _obs(0)}, {}

    def step(self, action_dict: dict) -> tuple[dict, dict, dict, dict, dict]:
        self.actors.append(sorted(action_dict))
        self.n += 1
        n, o = self.n, _obs(self.n)
        terminateds: dict[str, bool] = {"__all__": False}
        if n >= self.length:
            obs = {"a": o} if self.b_done else {"a": o, "b": o}
            terminateds["__all__"] = True
        elif not self.b_done and n == self.b_done_at:
            obs = {"a": o, "b": o}
            terminateds["b"] = True
            self.b_done = True
        elif self.b_done:
            obs = {"a": o}
        else:
            obs = {"b": o} if n % 2 == 1 else {"a": o}
        rewards = {agent: float(n) for agent in obs}
        return obs, rewards, terminateds, {"__all__": False}, {agent: {"n": n} for agent in obs}


class TogetherEnv(MultiAgentEnv):
    """Agents 0 and 1 act at every step; the episode ends after ``length`` steps."""

    def __init__(self, length: int = 1000) -> None:
        super().__init__()
        self._agent_ids = {0, 1}
        self.observation_space, self.action_space = BOX, gym.spaces.Discrete(2)
        self.length, self.n = length, 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        self.n = 0
        return {0: _obs(0), 1: _obs(0)}, {}

    def step(self, action_dict: dict) -> tuple[dict, dict, dict, dict, dict]:
        self.n += 1
        obs = {agent: _obs(self.n) for agent in (0, 1)}
        return obs, {0: 1.0, 1: 2.0}, {"__all__": self.n >= self.length}, {"__all__": False}, {}


class RecordingPolicy(Policy):
    """Acts 0; records the rows of each inference call and what postprocessing saw."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict) -> None:
        super().__init__(observation_space, action_space, config)
        self.calls: list[int] = []
        self.others: list[list[Any]] = []

    def compute_actions_from_input_dict(self, input_dict: SampleBatch, explore: Any = None, **kwargs: Any) -> Any:
        rows = len(np.asarray(input_dict[SB.OBS]))
        self.calls.append(rows)
        return np.zeros(rows, np.int64), [], {}

    def postprocess_trajectory(self, sample_batch: SampleBatch, other_agent_batches: Any = None,
                               episode: Any = None) -> SampleBatch:
        assert len(set(np.asarray(sample_batch[SB.EPS_ID]).tolist())) == 1
        self.others.append(sorted((other_agent_batches or {}).keys(), key=repr))
        return sample_batch


def by_agent(agent_id: Any, episode: Any, worker: Any, **kwargs: Any) -> str:
    return f"p{agent_id}"


def turn_worker(batch_mode: str = "truncate_episodes", count_steps_by: str = "env_steps", length: int = 4,
                **config: Any) -> RolloutWorker:
    return RolloutWorker(
        env_creator=lambda ctx: TurnEnv(**ctx),
        policy_spec=RecordingPolicy,
        policy_config={
            "batch_mode": batch_mode, "rollout_fragment_length": length, "seed": 0,
            "multiagent": {"policies": {"pa": None, "pb": None}, "policy_mapping_fn": by_agent,
                           "count_steps_by": count_steps_by},
            **config,
        },
    )


def rows(batch: MultiAgentBatch) -> dict[str, int]:
    return {pid: b.count for pid, b in sorted(batch.policy_batches.items())}


# ----- sampling ---------------------------------------------------------------------------------

def test_complete_mode_gives_the_whole_episode_per_agent() -> None:
    worker = turn_worker("complete_episodes")
    for policy in worker.policy_map.values():
        policy.others.clear()  # the dummy batch's postprocessing at construction
    batch = worker.sample()
    assert isinstance(batch, MultiAgentBatch)
    assert batch.env_steps() == 10 and batch.agent_steps() == 10 and rows(batch) == {"pa": 8, "pb": 2}
    pa, pb = batch["pa"], batch["pb"]
    # "a": obs at reset, then at steps 2, 4 and every step from 5 on.
    assert pa[SB.OBS][:, 0].tolist() == [0, 2, 4, 5, 6, 7, 8, 9]
    assert pa[SB.NEXT_OBS][:, 0].tolist() == [2, 4, 5, 6, 7, 8, 9, 10]
    assert pa[SB.REWARDS].tolist() == [2, 4, 5, 6, 7, 8, 9, 10]
    assert pa[SB.T].tolist() == list(range(8)) and pa[SB.TERMINATEDS].tolist() == [False] * 7 + [True]
    # "b" joins at step 1 and is done at step 5 while "a" goes on.
    assert pb[SB.OBS][:, 0].tolist() == [1, 3] and pb[SB.NEXT_OBS][:, 0].tolist() == [3, 5]
    assert pb[SB.REWARDS].tolist() == [3, 5] and pb[SB.TERMINATEDS].tolist() == [False, True]
    assert pa[SB.AGENT_INDEX].tolist() == [0] * 8 and pb[SB.AGENT_INDEX].tolist() == [1, 1]
    assert pa[SB.EPS_ID][0] == pb[SB.EPS_ID][0]
    # Only the agents asked acted: turns, then "a" alone once "b" is done.
    assert worker.env.actors == [["a"], ["b"], ["a"], ["b"], ["a"]] + [["a"]] * 5
    # Each agent's postprocessing saw the other's fragment.
    assert worker.policy_map["pa"].others == [["b"]] and worker.policy_map["pb"].others == [["a"]]


def test_truncate_counts_env_steps() -> None:
    worker = turn_worker(count_steps_by="env_steps", length=4)
    first, second, third = worker.sample(), worker.sample(), worker.sample()
    assert (first.env_steps(), first.agent_steps(), rows(first)) == (4, 3, {"pa": 2, "pb": 1})
    assert (second.env_steps(), second.agent_steps(), rows(second)) == (4, 5, {"pa": 4, "pb": 1})
    # Steps 9, 10 end the episode; steps 1, 2 of the next give "a" one transition.
    assert (third.env_steps(), third.agent_steps(), rows(third)) == (4, 3, {"pa": 3})
    assert len(set(third["pa"][SB.EPS_ID].tolist())) == 2
    # A cut episode keeps its eps_id and gets a new unroll_id.
    assert first["pa"][SB.EPS_ID][0] == second["pa"][SB.EPS_ID][0]
    assert first["pa"][SB.UNROLL_ID][0] != second["pa"][SB.UNROLL_ID][0]
    assert second["pa"][SB.T].tolist() == [2, 3, 4, 5]


def test_truncate_counts_agent_steps() -> None:
    worker = turn_worker(count_steps_by="agent_steps", length=3)
    first, second = worker.sample(), worker.sample()
    assert (first.env_steps(), first.agent_steps(), rows(first)) == (4, 3, {"pa": 2, "pb": 1})
    assert (second.env_steps(), second.agent_steps(), rows(second)) == (2, 3, {"pa": 2, "pb": 1})


def test_agents_acting_together_one_policy_call_per_step() -> None:
    worker = RolloutWorker(
        env_creator=lambda ctx: TogetherEnv(), policy_spec=RecordingPolicy,
        policy_config={"rollout_fragment_length": 3, "num_envs_per_worker": 2, "seed": 1,
                       "multiagent": {"policies": {"shared"}, "policy_mapping_fn": lambda aid, ep, worker, **kw: "shared",
                                      "count_steps_by": "env_steps"}},
    )
    worker.policy_map["shared"].calls.clear()  # the dummy batch's call at construction
    batch = worker.sample()
    assert isinstance(batch, MultiAgentBatch)
    assert batch.env_steps() == 6 and batch.agent_steps() == 12  # 3 steps x 2 envs x 2 agents
    assert worker.policy_map["shared"].calls == [4, 4, 4]  # both agents of both envs in one call a step
    assert sorted(set(batch["shared"][SB.AGENT_INDEX].tolist())) == [0, 1]
    assert sorted(set(batch["shared"][SB.REWARDS].tolist())) == [1.0, 2.0]
    # agent steps: a build at the first env step that reaches the count (2 agents x 2 envs a step).
    worker = RolloutWorker(
        env_creator=lambda ctx: TogetherEnv(), policy_spec=RecordingPolicy,
        policy_config={"rollout_fragment_length": 3, "num_envs_per_worker": 2, "seed": 1,
                       "multiagent": {"count_steps_by": "agent_steps"}},
    )
    batch = worker.sample()
    assert isinstance(batch, SampleBatch) and batch.count == 8  # only "default_policy": a SampleBatch


def test_default_policy_only_gives_a_sample_batch_and_per_agent_spaces() -> None:
    worker = RolloutWorker(env_creator=lambda ctx: TurnEnv(), policy_spec=RecordingPolicy,
                           policy_config={"batch_mode": "complete_episodes", "seed": 2})
    batch = worker.sample()
    assert isinstance(batch, SampleBatch) and batch.count == 10
    worker = RolloutWorker(
        env_creator=lambda ctx: TurnEnv(per_agent_spaces=True), policy_spec=RecordingPolicy,
        policy_config={"seed": 0, "multiagent": {"policies": {"pa": None, "pb": (None, None, None, {"gamma": 0.5})},
                                                 "policy_mapping_fn": by_agent}},
    )
    assert worker.policy_map["pb"].action_space == gym.spaces.Discrete(3)
    assert worker.policy_map["pa"].action_space == gym.spaces.Discrete(2)
    assert worker.policy_map["pb"].config["gamma"] == 0.5


def test_callbacks_see_agent_and_policy_ids() -> None:
    seen: list[tuple[Any, str, list[Any]]] = []

    class Record(DefaultCallbacks):
        def on_postprocess_trajectory(self, *, worker: Any, episode: Any, agent_id: Any, policy_id: str,
                                      policies: Any, postprocessed_batch: Any, original_batches: Any,
                                      **kwargs: Any) -> None:
            seen.append((agent_id, policy_id, sorted(original_batches)))
            assert original_batches[agent_id][0] == policy_id

        def on_episode_end(self, *, worker: Any, base_env: Any, policies: Any, episode: Any, **kwargs: Any) -> None:
            seen.append(("end", dict(episode.agent_rewards), [episode.total_reward]))

    worker = turn_worker("complete_episodes", callbacks=Record)
    worker.sample()
    assert seen[:2] == [("a", "pa", ["a", "b"]), ("b", "pb", ["a", "b"])]
    assert seen[2] == ("end", {("a", "pa"): 51.0, ("b", "pb"): 9.0}, [60.0])


def test_horizon_cuts_multi_agent_episodes() -> None:
    worker = turn_worker("complete_episodes", horizon=3)
    batch = worker.sample()
    assert batch.env_steps() == 3 and rows(batch) == {"pa": 1, "pb": 1}
    assert batch["pa"][SB.TRUNCATEDS].tolist() == [False] and batch["pb"][SB.TRUNCATEDS].tolist() == [True]


def test_soft_horizon_and_no_done_at_end_and_async() -> None:
    worker = turn_worker("complete_episodes", horizon=4, soft_horizon=True)
    first, second = worker.sample(), worker.sample()
    assert first.env_steps() == 4 and second.env_steps() == 4
    assert not first["pa"][SB.TRUNCATEDS].any() and not first["pb"][SB.TRUNCATEDS].any()
    # No reset: the next logical episode goes on from step 4's obs ("a" to act, at obs 4).
    assert second["pa"][SB.OBS][0, 0] == 4 and second["pa"][SB.T][0] == 0
    assert second["pa"][SB.EPS_ID][0] != first["pa"][SB.EPS_ID][0]
    batch = turn_worker("complete_episodes", no_done_at_end=True).sample()
    assert not any(batch[pid][col].any() for pid in ("pa", "pb") for col in (SB.TERMINATEDS, SB.TRUNCATEDS))
    worker = turn_worker(length=4, sample_async=True)
    try:
        batch = worker.sample()
        assert (batch.env_steps(), batch.agent_steps()) == (4, 3)
    finally:
        worker.stop()


# ----- bad input --------------------------------------------------------------------------------

def test_bad_multiagent_config_is_named() -> None:
    with pytest.raises(ValueError, match="count_steps_by: expected 'env_steps' or 'agent_steps', got 'steps'"):
        turn_worker(count_steps_by="steps")
    with pytest.raises(ValueError, match="unknown key 'policy_map'"):
        RolloutWorker(env_creator=lambda ctx: TurnEnv(), policy_spec=RecordingPolicy,
                      policy_config={"multiagent": {"policy_map": {}}})
    with pytest.raises(KeyError, match="mapped agent 'b' to policy 'pb', which is not in the policies"):
        RolloutWorker(env_creator=lambda ctx: TurnEnv(), policy_spec=RecordingPolicy,
                      policy_config={"multiagent": {"policies": {"pa": None}, "policy_mapping_fn": by_agent}}).sample()
    with pytest.raises(ValueError, match="needs an env_creator that returns a MultiAgentEnv"):
        RolloutWorker(env_creator=lambda ctx: gym.make("CartPole-v1"), policy_spec=RecordingPolicy,
                      policy_config={"multiagent": {"policies": {"x": None}}})
    no_spaces = MultiAgentEnv()
    no_spaces._agent_ids = {"a"}
    with pytest.raises(ValueError, match=r"multiagent.policies\['pz'\]: no observation space given"):
        RolloutWorker(env_creator=lambda ctx: no_spaces, policy_spec=RecordingPolicy,
                      policy_config={"multiagent": {"policies": {"pz": None}}})
    policy = RecordingPolicy(BOX, gym.spaces.Discrete(2), {})
    with pytest.raises(TypeError, match=r"mix MultiAgentEnvs \(indices \[1\]\) and single-agent envs"):
        SyncSampler(envs=[gym.make("CartPole-v1"), TurnEnv()], policy_map={"default_policy": policy})
    with pytest.raises(TypeError, match=r"multiagent.policies\['pa'\]: expected"):
        RolloutWorker(env_creator=lambda ctx: TurnEnv(), policy_spec=RecordingPolicy,
                      policy_config={"multiagent": {"policies": {"pa": "RecordingPolicy"}}})


class Scripted(MultiAgentEnv):
    """Returns ``reset_result`` and then ``step_result`` (the contract breaks under test)."""

    def __init__(self, step_result: Any, reset_result: Any = None) -> None:
        super().__init__()
        self._agent_ids = {"a", "b"}
        self.observation_space, self.action_space = BOX, gym.spaces.Discrete(2)
        self.step_result = step_result
        self.reset_result = reset_result if reset_result is not None else ({"a": _obs(0)}, {})

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> Any:
        return self.reset_result

    def step(self, action_dict: dict) -> Any:
        return self.step_result


NOT_ALL = {"__all__": False}


@pytest.mark.parametrize(("step_result", "error", "message"), [
    (({"a": 1}, {"a": 1.0}, {"a": False}, NOT_ALL, {}), ValueError,
     r"step 1: terminateds has no '__all__' key; .* got keys \['a'\]"),
    (({"a": 1}, {"a": 1.0}, NOT_ALL, {}, {}), ValueError, r"step 1: truncateds has no '__all__' key"),
    (({"a": 1}, {"a": 1.0, "b": 2.0}, NOT_ALL, NOT_ALL, {}), ValueError,
     r"step 1: rewards has agent 'b', which is not in the obs \(expected rewards only for the agents in obs \['a'\]\)"),
    (({"a": 1}, {}, NOT_ALL, NOT_ALL, {"b": {}}), ValueError, r"infos has agent 'b', which is not in the obs"),
    (({"a": 1}, {}, {"__all__": False, "b": True}, NOT_ALL, {}), ValueError,
     r"terminateds has agent 'b', which is not in the obs"),
    ((np.zeros(1), {}, NOT_ALL, NOT_ALL, {}), TypeError, r"step 1: obs: expected a dict keyed by agent id, got ndarray"),
    (({"a": 1}, 1.0, NOT_ALL, NOT_ALL, {}), TypeError, r"rewards: expected a dict keyed by agent id, got float 1.0"),
    (({"a": 1}, {}, NOT_ALL), TypeError, r"step 1: expected a tuple \(obs, rewards, terminateds, truncateds, infos\)"),
    (({}, {}, NOT_ALL, NOT_ALL, {}), ValueError, r"obs is empty but '__all__' is not done"),
])
def test_checker_names_each_break(step_result: Any, error: type, message: str) -> None:
    env = MultiAgentEnvChecker(Scripted(step_result))
    env.reset()
    with pytest.raises(error, match=message):
        env.step({"a": 0})
    # The sampler checks at every step: the same error from a worker.
    worker = RolloutWorker(env_creator=lambda ctx: Scripted(step_result), policy_spec=RecordingPolicy)
    with pytest.raises(error, match=message):
        worker.sample()


def test_checker_names_bad_actions_and_resets() -> None:
    env = MultiAgentEnvChecker(Scripted(({"b": 1}, {}, {"__all__": False, "b": True}, NOT_ALL, {})))
    with pytest.raises(RuntimeError, match="before reset"):
        env.step({"a": 0})
    env.reset()
    with pytest.raises(ValueError, match=r"action for agent 'b', which has no observation yet .* expected actions for \['a'\]"):
        env.step({"a": 0, "b": 1})
    with pytest.raises(ValueError, match=r"no action for agent\(s\) \['a'\]"):
        env.step({})
    with pytest.raises(TypeError, match="action_dict: expected a dict keyed by agent id, got list"):
        env.step([0])  # type: ignore[arg-type]
    env.step({"a": 0})  # "b" joins and is done at once
    with pytest.raises(ValueError, match=r"action for agent 'b', which is done .* expected actions for \[\]"):
        env.step({"b": 0})
    env = MultiAgentEnvChecker(Scripted(({"b": 1}, {}, NOT_ALL, NOT_ALL, {})))
    env.reset()
    env.step({"a": 0})
    with pytest.raises(ValueError, match=r"action for agent 'a', which was not asked \(it is not in the last obs\)"):
        env.step({"a": 0, "b": 0})
    for bad, message in [((np.zeros(1), {}), "reset: obs: expected a dict keyed by agent id, got ndarray"),
                         ([{"a": 0}, {}], r"reset: expected a tuple \(obs, infos\), got list"),
                         (({"a": 0}, {"b": {}}), "infos has agent 'b', which is not in the obs"),
                         (({}, {}), "reset: obs is empty")]:
        with pytest.raises((TypeError, ValueError), match=message):
            MultiAgentEnvChecker(Scripted(None, reset_result=bad)).reset()


def test_the_end_needs_the_last_obs_of_live_agents() -> None:
    both = ({"a": _obs(0), "b": _obs(0)}, {})
    end_without_b = ({"a": _obs(1)}, {"a": 1.0}, {"__all__": True}, NOT_ALL, {})
    message = (r"step 1: the episode ended \('__all__'\) without a last obs for live agent\(s\) \['b'\] "
               r"\(they acted and are not done\)")
    with pytest.raises(ValueError, match=message):
        RolloutWorker(env_creator=lambda ctx: Scripted(end_without_b, both), policy_spec=RecordingPolicy).sample()
    # no_done_at_end waives it (RLlib's rule): "b"'s last action has no outcome and is not recorded.
    worker = RolloutWorker(env_creator=lambda ctx: Scripted(end_without_b, both), policy_spec=RecordingPolicy,
                           policy_config={"batch_mode": "complete_episodes", "no_done_at_end": True,
                                          "multiagent": {"policies": {"pa", "pb"}, "policy_mapping_fn": by_agent}})
    batch = worker.sample()
    assert rows(batch) == {"pa": 1} and batch.env_steps() == 1


def test_done_agent_must_not_come_back() -> None:
    env = MultiAgentEnvChecker(Scripted(({"a": 1}, {}, {"__all__": False, "a": True}, NOT_ALL, {})))
    env.reset()
    env.step({"a": 0})
    env.env.step_result = ({"a": 1}, {}, NOT_ALL, NOT_ALL, {})
    with pytest.raises(ValueError, match=r"obs has agent 'a', which is done"):
        env.step({})


class LearningPolicy(RecordingPolicy):
    def learn_on_batch(self, samples: SampleBatch) -> dict[str, Any]:
        return {"rows": samples.count}


@pytest.mark.parametrize("to_train", [["pa"], {"pa"}, lambda policy_id, batch=None: policy_id == "pa"])
def test_policies_to_train_limits_learning(to_train: Any) -> None:
    multiagent = {"policies": {"pa": None, "pb": None}, "policy_mapping_fn": by_agent, "policies_to_train": to_train}
    worker = RolloutWorker(env_creator=lambda ctx: TurnEnv(**ctx), policy_spec=LearningPolicy,
                           policy_config={"rollout_fragment_length": 4, "seed": 0, "multiagent": multiagent})
    batch = worker.sample()
    assert set(batch.policy_batches) == {"pa", "pb"}  # both still collect
    assert worker.get_policies_to_train() == {"pa"}
    assert worker.learn_on_batch(batch) == {"pa": {"rows": batch.policy_batches["pa"].count}}


def test_policies_to_train_errors_name_the_problem() -> None:
    with pytest.raises(ValueError, match=r"policies_to_train names \['pc'\], which are not among the policies \['pa', 'pb'\]"):
        turn_worker(multiagent={"policies": {"pa": None, "pb": None}, "policy_mapping_fn": by_agent,
                                "policies_to_train": ["pa", "pc"]})
    with pytest.raises(ValueError, match="policies_to_train: expected None, a collection of policy ids or a function"):
        turn_worker(multiagent={"policies": {"pa": None, "pb": None}, "policies_to_train": "pa"})

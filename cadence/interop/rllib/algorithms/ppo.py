"""RLlib's PPO policy (old API stack, torch) on Cadence: ``PPOTorchPolicy`` and ``DEFAULT_CONFIG``.

``PPOTorchPolicy(observation_space, action_space, config)`` keeps a
:class:`~cadence.interop.rllib.models.FullyConnectedNetwork` (``config["model"]``) whose
outputs parametrise a categorical distribution (``Discrete`` actions) or a diagonal
Gaussian (``Box`` actions: the outputs are the means then the log-stds, as RLlib's
``TorchDiagGaussian``). With RLlib's semantics:

* ``compute_actions_from_input_dict`` samples actions (``explore=False``: the mode) from a
  ``torch.Generator`` seeded from ``config["seed"]`` and returns the extra fetches
  ``vf_preds``, ``action_dist_inputs`` and ``action_logp``;
* ``postprocess_trajectory`` adds ``advantages`` and ``value_targets`` (GAE, computed by
  Cadence's :func:`~cadence.objectives.value.functional.generalized_advantage_estimate`):
  a fragment that ends terminated bootstraps from 0, one that is truncated or cut from the
  value of its last ``new_obs``; ``use_gae=False`` gives discounted returns (``lambda`` 1),
  ``use_critic=False`` returns without a baseline;
* ``loss`` is RLlib's: ``mean(-min(r A, clip(r, 1 - clip_param, 1 + clip_param) A)
  + vf_loss_coeff * min((V - value_targets)^2, vf_clip_param) - entropy_coeff * H)
  + kl_coeff * KL(old || new)``;
* ``learn_on_batch`` standardises the advantages over the train batch (RLlib does it
  before SGD), runs ``num_sgd_iter`` epochs of shuffled ``sgd_minibatch_size`` minibatches
  (a ``numpy`` Generator seeded from ``config["seed"]``), then adapts ``kl_coeff`` to
  ``kl_target`` as RLlib's ``update_kl`` (x1.5 above twice the target, x0.5 below half).

The loss is written here, not taken from :class:`cadence.objectives.ClipPPOLoss`: RLlib's
value loss clips the squared error (``vf_clip_param``), not the change of the value, and
adds the adaptive KL term, so the numbers would differ from an RLlib user's.

Deliberate differences from RLlib: ``action_logp`` is the real log-probability also when
``explore=False`` (RLlib writes zeros); ``kl_coeff`` is adapted inside ``learn_on_batch``
(RLlib's algorithm calls ``update_kl`` after it) from the last epoch's mean KL.

Examples:
    >>> import gymnasium as gym, numpy as np
    >>> policy = PPOTorchPolicy(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2), {"seed": 0})
    >>> actions, state, extra = policy.compute_actions_from_input_dict({"obs": np.zeros((3, 4), np.float32)})
    >>> actions.shape, state, sorted(extra)
    ((3,), [], ['action_dist_inputs', 'action_logp', 'vf_preds'])
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from cadence.interop.rllib._batch_columns import map_column
from cadence.interop.rllib.models import FullyConnectedNetwork, ModelV2
from cadence.interop.rllib.policy import LEARNER_STATS_KEY, Policy
from cadence.interop.rllib.sample_batch import SampleBatch
from cadence.objectives.value.functional import generalized_advantage_estimate

__all__ = ["DEFAULT_CONFIG", "PPOTorchPolicy", "Postprocessing"]

#: RLlib's PPO defaults (old API stack, ray 2.x ``PPOConfig``) for the keys this policy and
#: the :class:`~cadence.interop.rllib.rollout_worker.RolloutWorker` read.
DEFAULT_CONFIG: dict[str, Any] = {
    # Sampling (the worker's keys).
    "rollout_fragment_length": 200,
    "batch_mode": "truncate_episodes",
    "num_envs_per_worker": 1,
    "explore": True,
    "seed": None,
    # Training.
    "train_batch_size": 4000,
    "sgd_minibatch_size": 128,
    "num_sgd_iter": 30,
    "shuffle_sequences": True,
    "lr": 5e-5,
    "grad_clip": None,
    # PPO.
    "gamma": 0.99,
    "lambda": 1.0,
    "use_gae": True,
    "use_critic": True,
    "kl_coeff": 0.2,
    "kl_target": 0.01,
    "clip_param": 0.3,
    "vf_clip_param": 10.0,
    "vf_loss_coeff": 1.0,
    "entropy_coeff": 0.0,
    # The model (RLlib's MODEL_DEFAULTS for a fully connected network).
    "model": {"fcnet_hiddens": [256, 256], "fcnet_activation": "tanh", "vf_share_layers": False, "free_log_std": False},
}

_NONNEGATIVE = ("lr", "kl_coeff", "kl_target", "clip_param", "vf_clip_param", "vf_loss_coeff", "entropy_coeff")
_UNIT = ("gamma", "lambda")
_POSITIVE_INTS = ("num_sgd_iter", "sgd_minibatch_size", "train_batch_size")


class Postprocessing:
    """RLlib's names of the columns that PPO's postprocessing adds.

    Examples:
        >>> Postprocessing.ADVANTAGES, Postprocessing.VALUE_TARGETS
        ('advantages', 'value_targets')
    """

    ADVANTAGES = "advantages"
    VALUE_TARGETS = "value_targets"


class _Categorical:
    """A categorical distribution over ``inputs`` (logits ``[B, n]``), RLlib's ``TorchCategorical``."""

    def __init__(self, inputs: torch.Tensor, model: ModelV2 | None = None) -> None:
        self.inputs = inputs
        self.log_probs = torch.log_softmax(inputs.float(), dim=-1)

    def sample(self, generator: torch.Generator) -> torch.Tensor:
        # torch.distributions cannot take a generator: draw from the probabilities directly.
        return torch.multinomial(self.log_probs.exp(), 1, generator=generator).squeeze(-1)

    def deterministic_sample(self) -> torch.Tensor:
        return self.log_probs.argmax(dim=-1)

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        return self.log_probs.gather(-1, actions.long().reshape(-1, 1)).squeeze(-1)

    def entropy(self) -> torch.Tensor:
        return -(self.log_probs.exp() * self.log_probs).sum(-1)

    def kl(self, other: _Categorical) -> torch.Tensor:
        return (self.log_probs.exp() * (self.log_probs - other.log_probs)).sum(-1)


class _DiagGaussian:
    """A diagonal Gaussian: ``inputs`` ``[B, 2 d]`` are the means then the log-stds (RLlib's)."""

    def __init__(self, inputs: torch.Tensor, model: ModelV2 | None = None) -> None:
        self.inputs = inputs
        self.mean, self.log_std = torch.chunk(inputs.float(), 2, dim=-1)
        self.std = self.log_std.exp()

    def sample(self, generator: torch.Generator) -> torch.Tensor:
        noise = torch.randn(self.mean.shape, generator=generator, dtype=self.mean.dtype)
        return self.mean + self.std * noise

    def deterministic_sample(self) -> torch.Tensor:
        return self.mean

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        actions = actions.float().reshape(self.mean.shape)
        z = (actions - self.mean) / self.std
        return (-0.5 * z.pow(2) - self.log_std - 0.5 * np.log(2.0 * np.pi)).sum(-1)

    def entropy(self) -> torch.Tensor:
        return (self.log_std + 0.5 * np.log(2.0 * np.pi * np.e)).sum(-1)

    def kl(self, other: _DiagGaussian) -> torch.Tensor:
        ratio = (self.std / other.std).pow(2) + ((self.mean - other.mean) / other.std).pow(2)
        return (other.log_std - self.log_std + 0.5 * ratio - 0.5).sum(-1)


def _merged_config(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """``DEFAULT_CONFIG`` updated with ``config`` (``model`` merged key by key), checked."""
    merged = copy.deepcopy(DEFAULT_CONFIG)
    given = dict(config or {})
    model = given.pop("model", None)
    merged.update(given)
    if model is not None:
        if not isinstance(model, Mapping):
            raise TypeError(f"PPOTorchPolicy: config['model']: expected a dict, got {type(model).__name__}")
        merged["model"].update(model)
    for key in _NONNEGATIVE + _UNIT:
        value = merged[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ValueError(f"PPOTorchPolicy: config[{key!r}]: expected a number >= 0, got {value!r}")
    for key in _UNIT:
        if merged[key] > 1:
            raise ValueError(f"PPOTorchPolicy: config[{key!r}]: expected a number in [0, 1], got {merged[key]!r}")
    for key in _POSITIVE_INTS:
        value = merged[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"PPOTorchPolicy: config[{key!r}]: expected an int >= 1, got {value!r}")
    seed = merged["seed"]
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ValueError(f"PPOTorchPolicy: config['seed']: expected an int or None, got {seed!r}")
    return merged


class PPOTorchPolicy(Policy):
    """RLlib's PPO policy (torch, old API stack): see the module for what each method does.

    Args:
        observation_space: The space of one observation (flattened for the MLP).
        action_space: ``Discrete`` (categorical) or a 1-D ``Box`` (diagonal Gaussian).
        config: Overrides of :data:`DEFAULT_CONFIG` (``model`` merged key by key).

    Attributes:
        model: The :class:`FullyConnectedNetwork` (policy and value heads).
        dist_class: The action distribution class for the model's outputs.
        kl_coeff: The current KL coefficient (adapted by :meth:`update_kl`).

    Raises:
        ValueError: A config value out of range (names the key, the expected range and the value).
        TypeError: An action space other than ``Discrete`` or a 1-D ``Box``; a ``model`` that is not a dict.

    Examples:
        >>> import gymnasium as gym, numpy as np
        >>> policy = PPOTorchPolicy(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Box(-2, 2, (2,)),
        ...                         {"seed": 1, "model": {"fcnet_hiddens": [8]}})
        >>> policy.model.num_outputs, sorted(k for k, v in policy.view_requirements.items() if v.used_for_compute_actions)
        (4, ['obs'])
        >>> PPOTorchPolicy(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2), {"clip_param": -1})
        Traceback (most recent call last):
        ...
        ValueError: PPOTorchPolicy: config['clip_param']: expected a number >= 0, got -1
    """

    #: The keys this policy reads (the RolloutWorker accepts them through this attribute).
    DEFAULT_CONFIG = DEFAULT_CONFIG

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: Mapping[str, Any] | None) -> None:
        merged = _merged_config(config)
        if isinstance(action_space, gym.spaces.Discrete):
            dist_class: type = _Categorical
            num_outputs = int(action_space.n)
        elif isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1:
            dist_class = _DiagGaussian
            num_outputs = 2 * int(action_space.shape[0])
        else:
            raise TypeError(
                f"PPOTorchPolicy: action_space: expected Discrete or a 1-D Box, got {action_space!r}"
            )
        seed = int(merged["seed"] or 0)
        # One generator per purpose: weights, action sampling and minibatch shuffling do not
        # shift each other's streams when one of them draws more.
        self.model = FullyConnectedNetwork(
            observation_space, action_space, num_outputs, merged["model"], "ppo_model",
            generator=torch.Generator().manual_seed(seed),
        )
        self.dist_class = dist_class
        super().__init__(observation_space, action_space, merged)
        self.kl_coeff = float(merged["kl_coeff"])
        self._action_generator = torch.Generator().manual_seed(seed + 1)
        self._shuffle_rng = np.random.default_rng(seed + 2)
        self._last_stats: dict[str, torch.Tensor] = {}
        self._initialize_loss_from_dummy_batch()

    # ----- acting -----------------------------------------------------------------------------------

    def compute_actions_from_input_dict(
        self, input_dict: SampleBatch | Mapping[str, Any], explore: bool | None = None, timestep: int | None = None,
        episodes: list[Any] | None = None, **kwargs: Any,
    ) -> tuple[np.ndarray, list[Any], dict[str, np.ndarray]]:
        """Actions for the rows of ``input_dict`` (``explore=False``: the distribution's mode).

        Args:
            input_dict: At least ``obs`` (``[B, ...]``).
            explore: Sample (True) or take the mode (False); ``None``: ``config["explore"]``.
            timestep, episodes, kwargs: Unused (RLlib's signature).

        Returns:
            ``(actions [B, ...], [], {"vf_preds": [B], "action_dist_inputs": [B, n],
            "action_logp": [B]})`` as numpy arrays.

        Examples:
            >>> import gymnasium as gym, numpy as np
            >>> policy = PPOTorchPolicy(gym.spaces.Box(-1, 1, (2,)), gym.spaces.Discrete(3), {"seed": 0})
            >>> actions, _, extra = policy.compute_actions_from_input_dict({"obs": np.ones((2, 2), np.float32)}, explore=False)
            >>> actions.dtype, extra["action_dist_inputs"].shape, extra["vf_preds"].dtype
            (dtype('int64'), (2, 3), dtype('float32'))
        """
        explore = bool(self.config["explore"]) if explore is None else bool(explore)
        with torch.no_grad():
            inputs, _ = self.model(input_dict)
            values = self.model.value_function()
            dist = self.dist_class(inputs, self.model)
            actions = dist.sample(self._action_generator) if explore else dist.deterministic_sample()
            logp = dist.logp(actions)
        extra = {
            SampleBatch.VF_PREDS: values.float().numpy(),
            SampleBatch.ACTION_DIST_INPUTS: inputs.float().numpy(),
            SampleBatch.ACTION_LOGP: logp.float().numpy(),
        }
        return actions.numpy(), [], extra

    def _values(self, obs: Any) -> np.ndarray:
        """The value function on the observations ``obs`` ``[B, ...]`` (leaf by leaf for Dict/Tuple)."""
        with torch.no_grad():
            self.model({SampleBatch.OBS: obs})
            return self.model.value_function().float().numpy()

    # ----- postprocessing ---------------------------------------------------------------------------

    def postprocess_trajectory(
        self, sample_batch: SampleBatch, other_agent_batches: dict[Any, Any] | None = None, episode: Any = None
    ) -> SampleBatch:
        """Adds ``advantages`` and ``value_targets`` (GAE) to one episode's fragment, in place.

        Each row bootstraps from the next row's ``vf_preds``; where the episode ends in the
        batch it bootstraps from 0 if terminated, else (truncated, or the fragment is cut)
        from the value of that row's ``new_obs``. Several episodes in one batch are split at
        ``eps_id`` changes.

        Examples:
            >>> import gymnasium as gym, numpy as np
            >>> policy = PPOTorchPolicy(gym.spaces.Box(-1, 1, (1,)), gym.spaces.Discrete(2),
            ...                         {"gamma": 0.5, "lambda": 1.0})
            >>> batch = SampleBatch(obs=np.zeros((2, 1), np.float32), new_obs=np.zeros((2, 1), np.float32),
            ...     rewards=np.ones(2, np.float32), terminateds=np.array([False, True]),
            ...     truncateds=np.zeros(2, bool), eps_id=np.zeros(2, np.int64), vf_preds=np.zeros(2, np.float32))
            >>> policy.postprocess_trajectory(batch)["value_targets"].tolist()
            [1.5, 1.0]
        """
        config = self.config
        rewards = np.asarray(sample_batch[SampleBatch.REWARDS], np.float32).reshape(-1)
        terminated = np.asarray(sample_batch[SampleBatch.TERMINATEDS], bool).reshape(-1)
        truncated = np.asarray(sample_batch[SampleBatch.TRUNCATEDS], bool).reshape(-1)
        eps_id = np.asarray(sample_batch[SampleBatch.EPS_ID]).reshape(-1)
        rows = len(rewards)
        if rows == 0:
            sample_batch[Postprocessing.ADVANTAGES] = np.zeros(0, np.float32)
            sample_batch[Postprocessing.VALUE_TARGETS] = np.zeros(0, np.float32)
            return sample_batch
        # Where an episode's data stops inside this batch: the last row, an episode end, or an eps_id change.
        ends = np.ones(rows, bool)
        ends[:-1] = terminated[:-1] | truncated[:-1] | (eps_id[1:] != eps_id[:-1])
        use_critic = bool(config["use_critic"])
        if use_critic:
            # Read unconditionally, so that pruning keeps both columns whatever the dummy's flags.
            values = np.asarray(sample_batch[SampleBatch.VF_PREDS], np.float32).reshape(-1)
            next_obs = sample_batch[SampleBatch.NEXT_OBS]
            next_values = np.zeros(rows, np.float32)
            next_values[:-1] = values[1:]
            bootstrap = ends & ~terminated
            if bootstrap.any():
                next_values[bootstrap] = self._values(map_column(lambda leaf: np.asarray(leaf)[bootstrap], next_obs))
        else:
            # RLlib without a critic: plain discounted returns, no baseline, no bootstrap value.
            values = np.zeros(rows, np.float32)
            next_values = np.zeros(rows, np.float32)
        # use_gae=False: lambda 1 turns GAE into the discounted return minus the value.
        lmbda = float(config["lambda"]) if config["use_gae"] else 1.0

        def column(array: np.ndarray) -> torch.Tensor:
            return torch.as_tensor(array).reshape(rows, 1)  # [T, 1]: Cadence's time dimension is -2

        advantages, targets = generalized_advantage_estimate(
            float(config["gamma"]), lmbda, column(values), column(next_values), column(rewards),
            done=column(ends), terminated=column(terminated),
        )
        sample_batch[Postprocessing.ADVANTAGES] = advantages.reshape(rows).numpy().astype(np.float32)
        sample_batch[Postprocessing.VALUE_TARGETS] = (
            targets.reshape(rows).numpy().astype(np.float32) if use_critic else np.zeros(rows, np.float32)
        )
        return sample_batch

    # ----- learning ---------------------------------------------------------------------------------

    def loss(self, model: ModelV2 | None, dist_class: Any, train_batch: SampleBatch) -> torch.Tensor:
        """RLlib's PPO loss on a (mini)batch: clipped surrogate, clipped value error, entropy, KL.

        Reads ``obs`` (through the model), ``actions``, ``action_dist_inputs``, ``action_logp``,
        ``advantages`` and (with the critic) ``value_targets``; keeps the statistics for
        :meth:`stats_fn`.

        Examples:
            >>> import gymnasium as gym, numpy as np
            >>> policy = PPOTorchPolicy(gym.spaces.Box(-1, 1, (2,)), gym.spaces.Discrete(2), {"seed": 0})
            >>> batch = policy._get_dummy_batch_from_view_requirements(4)
            >>> _, _, extra = policy.compute_actions_from_input_dict(batch)
            >>> batch.update(extra, advantages=np.ones(4, np.float32), value_targets=np.zeros(4, np.float32))
            >>> batch.set_get_interceptor(lambda value: torch.as_tensor(value))
            >>> loss = policy.loss(policy.model, policy.dist_class, batch)
            >>> loss.dim(), round(float(policy.stats_fn(batch)["policy_loss"]), 4)
            (0, -1.0)
        """
        config = self.config
        inputs, _ = model(train_batch)
        current = dist_class(inputs, model)
        previous = dist_class(torch.as_tensor(train_batch[SampleBatch.ACTION_DIST_INPUTS]).float(), model)
        actions = train_batch[SampleBatch.ACTIONS]
        ratio = torch.exp(current.logp(actions) - torch.as_tensor(train_batch[SampleBatch.ACTION_LOGP]).float())
        advantages = torch.as_tensor(train_batch[Postprocessing.ADVANTAGES]).float()
        clip = float(config["clip_param"])
        surrogate = torch.min(advantages * ratio, advantages * ratio.clamp(1.0 - clip, 1.0 + clip))
        entropy = current.entropy()
        if self.kl_coeff > 0.0:
            mean_kl = previous.kl(current).mean()
        else:
            mean_kl = inputs.new_zeros(())
        if config["use_critic"]:
            value = model.value_function()
            value_error = (value - torch.as_tensor(train_batch[Postprocessing.VALUE_TARGETS]).float()).pow(2)
            # RLlib clips the squared error itself (a bound on the critic's gradient, not its step).
            value_loss = value_error.clamp(0.0, float(config["vf_clip_param"]))
        else:
            value, value_loss = None, inputs.new_zeros(())
        total = (
            -surrogate + float(config["vf_loss_coeff"]) * value_loss - float(config["entropy_coeff"]) * entropy
        ).mean()
        if self.kl_coeff > 0.0:
            total = total + self.kl_coeff * mean_kl
        stats = {
            "total_loss": total, "policy_loss": -surrogate.mean(), "vf_loss": value_loss.mean(),
            "kl": mean_kl, "entropy": entropy.mean(),
        }
        if value is not None:
            targets = torch.as_tensor(train_batch[Postprocessing.VALUE_TARGETS]).float()
            variance = targets.var(unbiased=False) if targets.numel() > 1 else targets.new_zeros(())
            if variance > 0:
                # RLlib's explained_variance, floored at -1 so that one bad batch does not swamp the mean.
                explained = torch.clamp(1.0 - (targets - value.detach()).var(unbiased=False) / variance, min=-1.0)
            else:
                explained = targets.new_zeros(())
            stats["vf_explained_var"] = explained
        self._last_stats = {key: tensor.detach() for key, tensor in stats.items()}
        return total

    def optimizer(self) -> torch.optim.Optimizer:
        """Adam on the model's parameters with ``config["lr"]`` (RLlib's torch default).

        Examples:
            >>> import gymnasium as gym
            >>> policy = PPOTorchPolicy(gym.spaces.Box(-1, 1, (2,)), gym.spaces.Discrete(2), {"lr": 1e-3})
            >>> type(policy.optimizer()).__name__, policy.optimizer().param_groups[0]["lr"]
            ('Adam', 0.001)
        """
        return torch.optim.Adam(self.model.parameters(), lr=float(self.config["lr"]))

    def stats_fn(self, train_batch: SampleBatch) -> dict[str, Any]:
        """The last loss call's statistics plus ``cur_kl_coeff``, ``cur_lr``, ``entropy_coeff``.

        Examples:
            >>> import gymnasium as gym
            >>> policy = PPOTorchPolicy(gym.spaces.Box(-1, 1, (2,)), gym.spaces.Discrete(2), {})
            >>> sorted(policy.stats_fn(SampleBatch()))[:3]
            ['cur_kl_coeff', 'cur_lr', 'entropy']
        """
        stats: dict[str, Any] = {key: float(value) for key, value in self._last_stats.items()}
        stats.update(cur_kl_coeff=self.kl_coeff, cur_lr=float(self.config["lr"]), entropy_coeff=float(self.config["entropy_coeff"]))
        return stats

    def update_kl(self, sampled_kl: float) -> float:
        """RLlib's adaptive KL coefficient: x1.5 if ``sampled_kl > 2 kl_target``, x0.5 if below half.

        Returns:
            The new coefficient.

        Examples:
            >>> import gymnasium as gym
            >>> policy = PPOTorchPolicy(gym.spaces.Box(-1, 1, (2,)), gym.spaces.Discrete(2), {"kl_coeff": 0.2})
            >>> round(policy.update_kl(1.0), 6), round(policy.update_kl(0.0), 6), round(policy.update_kl(0.01), 6)
            (0.3, 0.15, 0.15)
        """
        target = float(self.config["kl_target"])
        if sampled_kl > 2.0 * target:
            self.kl_coeff *= 1.5
        elif sampled_kl < 0.5 * target:
            self.kl_coeff *= 0.5
        return self.kl_coeff

    def learn_on_batch(self, samples: SampleBatch | Mapping[str, Any]) -> dict[str, Any]:
        """``num_sgd_iter`` epochs of shuffled ``sgd_minibatch_size`` minibatches, then ``update_kl``.

        The advantages are standardised over the whole batch first (as RLlib's PPO does);
        ``samples`` is not modified. A last minibatch shorter than ``sgd_minibatch_size`` is
        dropped unless it is the only one.

        Returns:
            ``{"learner_stats": {total_loss, policy_loss, vf_loss, vf_explained_var, kl,
            entropy, cur_kl_coeff, cur_lr, entropy_coeff, [grad_gnorm]} (means over the last
            epoch), "num_agent_steps_trained", "num_grad_updates_lifetime"}``.

        Raises:
            KeyError: ``samples`` lacks a column the loss reads (names it).
            ValueError: ``samples`` has no rows.

        Examples:
            >>> import gymnasium as gym
            >>> from cadence.interop.rllib.rollout_worker import RolloutWorker
            >>> worker = RolloutWorker(env_creator=lambda _: gym.make("CartPole-v1"), policy_spec=PPOTorchPolicy,
            ...     policy_config={"seed": 0, "rollout_fragment_length": 32, "num_sgd_iter": 2, "sgd_minibatch_size": 16})
            >>> result = worker.get_policy().learn_on_batch(worker.sample())
            >>> result["num_grad_updates_lifetime"], "vf_loss" in result["learner_stats"]
            (4, True)
        """
        batch = samples if isinstance(samples, SampleBatch) else SampleBatch(dict(samples))
        needed = [key for key, view in self.view_requirements.items() if view.used_for_training and key in batch]
        for key in (SampleBatch.OBS, SampleBatch.ACTIONS, SampleBatch.ACTION_DIST_INPUTS, SampleBatch.ACTION_LOGP,
                    Postprocessing.ADVANTAGES) + ((Postprocessing.VALUE_TARGETS,) if self.config["use_critic"] else ()):
            if key not in batch:
                raise KeyError(f"PPOTorchPolicy.learn_on_batch(): the batch has no column {key!r}; got {sorted(batch.keys())}")
            if key not in needed:
                needed.append(key)
        # Numeric columns only (infos and other object columns have no tensor form), leaf by leaf.
        columns = {key: map_column(_train_tensor, batch[key]) for key in needed}
        columns = {key: value for key, value in columns.items() if value is not None}
        advantages = columns[Postprocessing.ADVANTAGES].float()
        if advantages.shape[0] == 0:
            raise ValueError("PPOTorchPolicy.learn_on_batch(): expected a batch with at least one row, got 0 rows")
        columns[Postprocessing.ADVANTAGES] = (advantages - advantages.mean()) / max(float(advantages.std(unbiased=False)), 1e-4)
        rows = int(advantages.shape[0])
        size = min(int(self.config["sgd_minibatch_size"]), rows)
        if self._optimizers is None:
            self._optimizers = [self.optimizer()]
        optimizer = self._optimizers[0]
        params = [p for group in optimizer.param_groups for p in group["params"]]
        grad_clip = self.config["grad_clip"]
        epoch_stats: list[dict[str, Any]] = []
        for _ in range(int(self.config["num_sgd_iter"])):
            order = torch.from_numpy(self._shuffle_rng.permutation(rows))
            epoch_stats = []
            for start in range(0, rows - size + 1, size):
                index = order[start:start + size]
                minibatch = SampleBatch(
                    {key: map_column(lambda leaf: leaf[index], value) for key, value in columns.items()}, _is_training=True
                )
                total = self.loss(self.model, self.dist_class, minibatch)
                optimizer.zero_grad()
                total.backward()
                stats = self.stats_fn(minibatch)
                if grad_clip is not None:
                    stats["grad_gnorm"] = float(torch.nn.utils.clip_grad_norm_(params, float(grad_clip)))
                optimizer.step()
                self.num_grad_updates += 1
                epoch_stats.append(stats)
        learner_stats = {key: float(np.mean([stats[key] for stats in epoch_stats])) for key in epoch_stats[0]}
        if self.kl_coeff > 0.0:
            self.update_kl(learner_stats["kl"])
        return {
            LEARNER_STATS_KEY: learner_stats, "num_agent_steps_trained": rows,
            "num_grad_updates_lifetime": self.num_grad_updates,
        }


def _train_tensor(leaf: Any) -> torch.Tensor | None:
    """One numeric column as a tensor (float64 as float32); None for object columns such as infos."""
    array = np.asarray(leaf)
    if array.dtype.kind not in "biuf":
        return None
    return torch.from_numpy(np.ascontiguousarray(array, np.float32 if array.dtype == np.float64 else None))

"""RLlib's ``Policy`` (old API stack): actions, postprocessing, loss, and view pruning.

A :class:`Policy` subclass is built as ``Policy(observation_space, action_space, config)``
and defines ``compute_actions_from_input_dict``; it may define ``postprocess_trajectory``,
``loss(model, dist_class, train_batch)`` with ``optimizer()``, and keep a :class:`ModelV2`
under ``self.model``. ``policy.view_requirements`` starts as RLlib's defaults, updated with
the model's views, and tells the sampler what to collect and show to whom.

Pruning (:meth:`Policy._initialize_loss_from_dummy_batch`, the seed's "How does RLlib
determine which Views are required?"): a dummy batch (zeros from each view's space) goes
through ``compute_actions_from_input_dict`` (given the inference views only), then, with
the actions, state outputs and extra fetches added as columns, through
``postprocess_trajectory`` and ``loss``; the columns each stage reads are recorded
(through ``[]``/``get``, copies and slices of the batch, ``items()``/``values()``, and the
model's forward pass). Then:

* an inference view that ``compute_actions_from_input_dict`` did not read gets
  ``used_for_compute_actions=False``; outputs and columns postprocessing adds get views
  (``used_for_compute_actions=False``);
* if the policy defines ``loss``: a view the loss did not read gets
  ``used_for_training=False``, and a view that nobody read (inference, postprocessing,
  loss) nor deleted in postprocessing is removed from ``view_requirements``, so the sampler
  does not collect it. Never removed nor hidden from training: ``rewards``, ``terminateds``,
  ``truncateds`` (the seed). Never removed, training flag untouched: the sampler's
  ``eps_id``, ``unroll_id``, ``agent_index``, ``t`` (episode cuts and sequences need them).
  A removed column that a kept view reads as its ``data_col`` is kept (both flags False).
* without a loss nothing is removed nor hidden from training: what an overridden
  ``learn_on_batch`` reads is unknown.

Deliberate differences from RLlib (ray 2.x): tracking is per stage (postprocessing reads
count even when ``postprocess_trajectory`` returns its input), and a column that only
``compute_actions`` reads stays collected (ray keeps only the model's views); ``infos`` is
pruned like any column; the model's views are not exempt from ``used_for_training=False``
(the loss's reads through the model are tracked); ``dict(batch)`` is not seen as a read.

Examples:
    >>> import gymnasium as gym, numpy as np
    >>> class Greedy(Policy):
    ...     def compute_actions_from_input_dict(self, input_dict, explore=None, timestep=None,
    ...                                         episodes=None, **kwargs):
    ...         return (input_dict["obs"][:, 0] > 0).astype(np.int64), [], {}
    ...     def loss(self, model, dist_class, train_batch):
    ...         reads = train_batch["obs"].sum() + train_batch["actions"].sum() + train_batch["rewards"].sum()
    ...         return reads.float().requires_grad_()
    >>> policy = Greedy(gym.spaces.Box(-1, 1, (2,)), gym.spaces.Discrete(2), {})
    >>> "new_obs" in policy.view_requirements
    True
    >>> policy._initialize_loss_from_dummy_batch()
    >>> sorted(policy.view_requirements)
    ['actions', 'agent_index', 'eps_id', 'obs', 'rewards', 't', 'terminateds', 'truncateds', 'unroll_id']
    >>> [key for key, view in policy.view_requirements.items() if view.used_for_compute_actions]
    ['obs']
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from cadence.interop._contracts import require_methods
from cadence.interop.rllib._batch_columns import map_column, to_numpy
from cadence.interop.rllib._dummy_batch import (
    _SAMPLER_COLUMNS,
    _TrackedBatch,
    _space_of,
    _dummy_column,
    _check_rows,
    _as_list,
    _stage,
)
from cadence.interop.rllib.models import ModelV2, convert_to_torch_tensor
from cadence.interop.rllib.sample_batch import SampleBatch
from cadence.interop.rllib.view_requirement import ViewRequirement, inference_view_requirements

__all__ = ["LEARNER_STATS_KEY", "Policy", "RandomPolicy"]

#: The key of the loss statistics in what ``learn_on_batch`` returns (RLlib's).
LEARNER_STATS_KEY = "learner_stats"

_REQUIRED = ("compute_actions_from_input_dict",)
# The seed: "the rewards and dones columns are never discarded".
_NEVER_PRUNED = frozenset({SampleBatch.REWARDS, SampleBatch.TERMINATEDS, SampleBatch.TRUNCATEDS})
# Written by the sampler and read by it (episode cuts, sequences): always collected.
# Dummy rows: a few, divisible into 4 sequences of 2 for recurrent policies.
_DUMMY_ROWS, _DUMMY_SEQS = 8, 4


class Policy:
    """RLlib's policy base class: computes actions, postprocesses trajectories, learns.

    A subclass defines ``compute_actions_from_input_dict`` (refused at class definition
    otherwise; ``class Base(Policy, abstract=True)`` declares a base class) and may define
    ``postprocess_trajectory``, ``loss`` with ``optimizer()`` (then the default
    :meth:`learn_on_batch` trains), ``stats_fn``, and ``self.model`` (a :class:`ModelV2`,
    set before or after ``super().__init__``). It should call
    :meth:`_initialize_loss_from_dummy_batch` at the end of its constructor, as RLlib's
    policies do (a sampler calls it otherwise, see :attr:`loss_initialized`).

    Args:
        observation_space, action_space: The spaces of one observation and one action.
        config: The policy's config (copied): ``grad_clip``, ``model`` (model config), ...

    Attributes:
        view_requirements: View column -> :class:`ViewRequirement`: RLlib's defaults
            (:meth:`_get_default_view_requirements`) updated with ``self.model``'s views.
        model: The :class:`ModelV2` (or ``None``).
        dist_class: The action distribution class (or ``None``).
        global_timestep: The sampling timestep, from :meth:`on_global_var_update`.

    Raises:
        TypeError: A space that is not a gymnasium space, a config that is not a mapping.
        ValueError: A view used for compute_actions with a positive shift (names it).

    Examples:
        >>> import gymnasium as gym, numpy as np
        >>> class Sign(Policy):
        ...     def compute_actions_from_input_dict(self, input_dict, explore=None, **kwargs):
        ...         return (input_dict["obs"][:, 0] > 0).astype(np.int64), [], {}
        >>> policy = Sign(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2), {})
        >>> policy.view_requirements["new_obs"].shift, policy.view_requirements["prev_actions"].data_col
        (1, 'actions')
        >>> policy.compute_single_action(np.array([0.5, 0, 0], np.float32))
        (np.int64(1), [], {})
        >>> class NoActions(Policy):
        ...     pass
        Traceback (most recent call last):
        ...
        TypeError: NoActions must define compute_actions_from_input_dict() (Policy's contract); declare `class NoActions(Policy, abstract=True)` for a base class
    """

    def __init_subclass__(cls, abstract: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if abstract:
            return
        require_methods(cls, Policy, _REQUIRED)

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: Mapping[str, Any] | None) -> None:
        for arg, space in (("observation_space", observation_space), ("action_space", action_space)):
            if not isinstance(space, gym.Space):
                raise TypeError(f"Policy: {arg} must be a gymnasium.spaces.Space, got {type(space).__name__}")
        if config is not None and not isinstance(config, Mapping):
            raise TypeError(f"Policy: config must be a dict, got {type(config).__name__}")
        self.observation_space = observation_space
        self.action_space = action_space
        self.config: dict[str, Any] = dict(config or {})
        self.global_timestep = 0
        self.num_grad_updates = 0
        # A subclass may have set these before calling us: keep them.
        self.model: ModelV2 | None = getattr(self, "model", None)
        self.dist_class: Any = getattr(self, "dist_class", None)
        self.view_requirements: dict[str, ViewRequirement] = self._get_default_view_requirements()
        self._model_views_merged = False
        self._loss_initialized = False
        self._optimizers: list[torch.optim.Optimizer] | None = None
        self._merge_model_view_requirements()
        inference_view_requirements(self.view_requirements)  # a positive inference shift fails here

    # ----- the contract ---------------------------------------------------------------------------

    def compute_actions_from_input_dict(
        self, input_dict: SampleBatch, explore: bool | None = None, timestep: int | None = None,
        episodes: list[Any] | None = None, **kwargs: Any,
    ) -> tuple[Any, list[Any], dict[str, Any]]:
        """Actions for a batch of inference input dicts (the subclass's).

        Args:
            input_dict: A SampleBatch of the views used for compute_actions (``obs``,
                ``prev_actions``, ``state_in_0``, ...), one row per agent step, with ``seq_lens``.
            explore, timestep, episodes, kwargs: Whether to explore (``None``: the config's
                choice), the sampling timestep, the rows' episodes if known, more.

        Returns:
            ``(actions [B, ...], state_outs [[B, ...], ...], extra_fetches {name: [B, ...]})``,
            extra fetches such as ``vf_preds``, ``action_logp``, ``action_dist_inputs``.

        Examples:
            >>> import gymnasium as gym
            >>> class Base(Policy, abstract=True):
            ...     pass
            >>> Base(gym.spaces.Discrete(2), gym.spaces.Discrete(2), {}).compute_actions_from_input_dict({})
            Traceback (most recent call last):
            ...
            NotImplementedError: Base.compute_actions_from_input_dict() is not defined
        """
        raise NotImplementedError(f"{type(self).__name__}.compute_actions_from_input_dict() is not defined")

    def postprocess_trajectory(
        self, sample_batch: SampleBatch, other_agent_batches: dict[Any, Any] | None = None, episode: Any = None
    ) -> SampleBatch:
        """Postprocesses one episode's (fragment's) batch, e.g. adds advantages; identity here.

        ``other_agent_batches`` maps agent ids to ``(policy, batch)`` of the other agents;
        ``episode`` is the episode if known. Returns the postprocessed batch.

        Examples:
            >>> import gymnasium as gym, numpy as np
            >>> batch = SampleBatch(obs=np.zeros(2))
            >>> RandomPolicy(gym.spaces.Discrete(2), gym.spaces.Discrete(2), {}).postprocess_trajectory(batch) is batch
            True
        """
        return sample_batch

    def loss(self, model: ModelV2 | None, dist_class: Any, train_batch: SampleBatch) -> torch.Tensor | list[torch.Tensor]:
        """The loss on a train batch (optional; a subclass that learns defines it).

        ``model`` and ``dist_class`` are ``self.model`` and ``self.dist_class``; ``train_batch``
        is the postprocessed batch, columns as tensors on read, ``is_training`` True. Returns a
        scalar loss tensor, or one per optimizer. This default raises NotImplementedError.

        Examples:
            >>> import gymnasium as gym, numpy as np
            >>> RandomPolicy(gym.spaces.Discrete(2), gym.spaces.Discrete(2), {}).loss(None, None, SampleBatch())
            Traceback (most recent call last):
            ...
            NotImplementedError: RandomPolicy has no loss (loss(model, dist_class, train_batch) is not defined)
        """
        raise NotImplementedError(f"{type(self).__name__} has no loss (loss(model, dist_class, train_batch) is not defined)")

    def optimizer(self) -> torch.optim.Optimizer | list[torch.optim.Optimizer]:
        """The optimizer(s) for :meth:`learn_on_batch`, one per loss term (this default raises).

        Examples:
            >>> import gymnasium as gym, numpy as np
            >>> RandomPolicy(gym.spaces.Discrete(2), gym.spaces.Discrete(2), {}).optimizer()
            Traceback (most recent call last):
            ...
            NotImplementedError: RandomPolicy.optimizer() is not defined
        """
        raise NotImplementedError(f"{type(self).__name__}.optimizer() is not defined")

    def stats_fn(self, train_batch: SampleBatch) -> dict[str, Any]:
        """Extra learner statistics after a loss call (``{}`` here).

        Examples:
            >>> import gymnasium as gym, numpy as np
            >>> RandomPolicy(gym.spaces.Discrete(2), gym.spaces.Discrete(2), {}).stats_fn(SampleBatch())
            {}
        """
        return {}

    def _defines(self, name: str) -> bool:
        return getattr(type(self), name) is not getattr(Policy, name)

    # ----- actions ----------------------------------------------------------------------------------

    def _fill_inference_views(self, columns: dict[str, Any], rows: int) -> SampleBatch:
        """``columns`` plus zeros (a fresh episode's values) for the inference views not given."""
        for view_col, view in inference_view_requirements(self.view_requirements).items():
            if view_col not in columns:
                columns[view_col] = _dummy_column(view_col, view, rows)
        return SampleBatch(columns, seq_lens=np.ones(rows, np.int32))

    def compute_single_action(
        self, obs: Any = None, state: Sequence[Any] | None = None, prev_action: Any = None, prev_reward: Any = None,
        info: dict[str, Any] | None = None, episode: Any = None, clip_actions: bool = False,
        explore: bool | None = None, timestep: int | None = None, *, input_dict: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> tuple[Any, list[Any], dict[str, Any]]:
        """The action for one observation: a one-row input dict through ``compute_actions_from_input_dict``.

        ``obs`` (or ``input_dict``: one step's views, unbatched), ``state`` (default: the
        initial state), ``prev_action``, ``prev_reward``, ``info`` fill the views that read
        them; other inference views are zeros, as at an episode start. ``clip_actions`` clips
        a ``Box`` action to the space's bounds; ``episode`` goes on as ``episodes=[episode]``.
        Returns ``(action, state_outs, extra_fetches)`` without the batch dimension; raises
        ValueError if neither ``obs`` nor ``input_dict`` is given.

        Examples:
            >>> import gymnasium as gym, numpy as np
            >>> class Sign(Policy):
            ...     def compute_actions_from_input_dict(self, input_dict, **kwargs):
            ...         obs = input_dict["obs"]
            ...         return obs * 2, [], {"vf_preds": obs.sum(-1)}
            >>> policy = Sign(gym.spaces.Box(-1, 1, (2,)), gym.spaces.Box(-1, 1, (2,)), {})
            >>> action, _, extra = policy.compute_single_action(np.array([0.25, 0.75], np.float32), clip_actions=True)
            >>> action.tolist(), float(extra["vf_preds"])
            ([0.5, 1.0], 1.0)
        """
        if input_dict is None and obs is None:
            raise ValueError("compute_single_action: expected an observation (obs=...) or input_dict=..., got neither")
        if input_dict is not None:
            row = dict(input_dict)
        else:
            given = {SampleBatch.PREV_ACTIONS: prev_action, SampleBatch.PREV_REWARDS: prev_reward, SampleBatch.INFOS: info}
            row = {SampleBatch.OBS: obs, **{key: value for key, value in given.items() if value is not None}}
            state = self.get_initial_state() if state is None else state
            row.update({f"state_in_{i}": s for i, s in enumerate(state)})
        columns = {
            key: [value] if key == SampleBatch.INFOS else map_column(lambda leaf: to_numpy(leaf)[None], value)
            for key, value in row.items()
        }
        batch = self._fill_inference_views(columns, 1)
        actions, state_outs, extra = self.compute_actions_from_input_dict(
            batch, explore=explore, timestep=timestep, episodes=None if episode is None else [episode], **kwargs
        )
        action = map_column(lambda leaf: leaf[0], to_numpy(actions))
        if clip_actions and isinstance(self.action_space, gym.spaces.Box):
            action = np.clip(action, self.action_space.low, self.action_space.high)
        return action, [to_numpy(s)[0] for s in state_outs], map_column(lambda leaf: leaf[0], to_numpy(dict(extra)))

    # ----- learning ---------------------------------------------------------------------------------

    def learn_on_batch(self, samples: SampleBatch | Mapping[str, Any]) -> dict[str, Any]:
        """One gradient step on ``loss`` over ``samples`` (a SampleBatch or dict; not modified).

        The optimizers come from :meth:`optimizer` on the first call; with several, the loss
        returns one term per optimizer and each optimizer steps on its own term's gradients.
        ``config["grad_clip"]`` (if set) clips each optimizer's gradient norm.

        Returns:
            ``{"learner_stats": {"total_loss", ["grad_gnorm"], **stats_fn(batch)},
            "num_agent_steps_trained", "num_grad_updates_lifetime"}``.

        Raises:
            NotImplementedError: ``loss`` or ``optimizer()`` is not defined (names which).
            ValueError: A number of loss terms other than the optimizers', or a term that is
                not a scalar tensor depending on parameters.

        Examples:
            >>> import gymnasium as gym, numpy as np, torch
            >>> class Fit(Policy):
            ...     def __init__(self, observation_space, action_space, config):
            ...         super().__init__(observation_space, action_space, config)
            ...         self.w = torch.nn.Parameter(torch.zeros(()))
            ...     def compute_actions_from_input_dict(self, input_dict, **kwargs):
            ...         return np.zeros(len(input_dict["obs"]), np.int64), [], {}
            ...     def loss(self, model, dist_class, train_batch):
            ...         return ((self.w - train_batch["rewards"]) ** 2).mean()
            ...     def optimizer(self):
            ...         return torch.optim.SGD([self.w], lr=0.5)
            >>> policy = Fit(gym.spaces.Discrete(2), gym.spaces.Discrete(2), {})
            >>> stats = policy.learn_on_batch(SampleBatch(rewards=np.ones(4, np.float32)))
            >>> stats["learner_stats"]["total_loss"], policy.w.item()
            (1.0, 1.0)
        """
        name = type(self).__name__
        missing = [label for label in ("loss(model, dist_class, train_batch)", "optimizer()") if not self._defines(label.split("(")[0])]
        if missing:
            raise NotImplementedError(
                f"{name}.learn_on_batch(): the default makes one gradient step on loss() with optimizer(), but "
                f"{name} does not define {' and '.join(missing)}; define them or override learn_on_batch()"
            )
        train = (samples if isinstance(samples, SampleBatch) else SampleBatch(dict(samples))).copy(shallow=True)
        train.set_training(True)
        train.set_get_interceptor(convert_to_torch_tensor)
        if self._optimizers is None:
            self._optimizers = _as_list(self.optimizer())
        losses = _as_list(self.loss(self.model, self.dist_class, train))
        if len(losses) != len(self._optimizers):
            raise ValueError(
                f"{name}.loss() returned {len(losses)} term(s) but optimizer() gave {len(self._optimizers)} "
                "optimizer(s); expected one term per optimizer"
            )
        stats: dict[str, Any] = {"total_loss": 0.0}
        steps = []
        for i, (optimizer, term) in enumerate(zip(self._optimizers, losses)):
            if not isinstance(term, torch.Tensor) or term.dim() != 0 or not term.requires_grad:
                got = repr(term) if isinstance(term, torch.Tensor) else type(term).__name__
                raise ValueError(f"{name}.loss() term {i}: expected a scalar tensor that depends on parameters, got {got}")
            params = [p for group in optimizer.param_groups for p in group["params"] if p.requires_grad]
            # Each optimizer steps on its own term's gradients (terms may share parameters).
            steps.append((optimizer, params, torch.autograd.grad(term, params, retain_graph=i < len(losses) - 1, allow_unused=True)))
            stats["total_loss"] += float(term.detach())
        grad_clip = self.config.get("grad_clip")
        for optimizer, params, grads in steps:
            optimizer.zero_grad()
            for param, grad in zip(params, grads):
                param.grad = grad
            if grad_clip is not None:
                norm = torch.nn.utils.clip_grad_norm_([p for p in params if p.grad is not None], float(grad_clip))
                stats["grad_gnorm"] = stats.get("grad_gnorm", 0.0) + float(norm)
            optimizer.step()
        self.num_grad_updates += 1
        for key, value in self.stats_fn(train).items():
            stats[key] = float(value) if isinstance(value, torch.Tensor) and value.numel() == 1 else value
        return {LEARNER_STATS_KEY: stats, "num_agent_steps_trained": train.count, "num_grad_updates_lifetime": self.num_grad_updates}

    # ----- state and weights ----------------------------------------------------------------------

    def get_initial_state(self) -> list[Any]:
        """The recurrent state at an episode start: ``self.model``'s, or ``[]`` (override for others).

        Examples:
            >>> import gymnasium as gym, numpy as np
            >>> policy = RandomPolicy(gym.spaces.Discrete(2), gym.spaces.Discrete(2), {})
            >>> policy.get_initial_state(), policy.is_recurrent(), policy.num_state_tensors()
            ([], False, 0)
        """
        return list(self.model.get_initial_state()) if self.model is not None else []

    def is_recurrent(self) -> bool:
        """Whether the policy has recurrent state (see :meth:`get_initial_state`).

        Examples:
            >>> import gymnasium as gym
            >>> RandomPolicy(gym.spaces.Discrete(2), gym.spaces.Discrete(2), {}).is_recurrent()
            False
        """
        return len(self.get_initial_state()) > 0

    def num_state_tensors(self) -> int:
        """The number of recurrent state tensors.

        Examples:
            >>> import gymnasium as gym, numpy as np
            >>> RandomPolicy(gym.spaces.Discrete(2), gym.spaces.Discrete(2), {}).num_state_tensors()
            0
        """
        return len(self.get_initial_state())

    def get_weights(self) -> dict[str, np.ndarray]:
        """``self.model``'s state dict as numpy copies (``{}`` without a model).

        Examples:
            >>> import gymnasium as gym
            >>> from cadence.interop.rllib.models import FullyConnectedNetwork
            >>> policy = RandomPolicy(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2), {})
            >>> policy.model = FullyConnectedNetwork(policy.observation_space, policy.action_space, 2, {"fcnet_hiddens": [4]}, "m")
            >>> weights = policy.get_weights()
            >>> weights["_logits.weight"].shape
            (2, 4)
            >>> policy.set_weights(weights)
        """
        if self.model is None:
            return {}
        return {key: value.detach().cpu().numpy().copy() for key, value in self.model.state_dict().items()}

    def set_weights(self, weights: Mapping[str, Any]) -> None:
        """Loads :meth:`get_weights`'s output into ``self.model``.

        Raises:
            ValueError: Missing or unexpected keys, a shape that differs (names the key), or
                weights for a policy without a model.

        Examples:
            >>> import gymnasium as gym, numpy as np
            >>> RandomPolicy(gym.spaces.Discrete(2), gym.spaces.Discrete(2), {}).set_weights({"w": np.zeros(1)})
            Traceback (most recent call last):
            ...
            ValueError: RandomPolicy.set_weights(): the policy has no model (self.model is None) but got weights for ['w']
        """
        name = f"{type(self).__name__}.set_weights()"
        if self.model is None:
            if weights:
                raise ValueError(f"{name}: the policy has no model (self.model is None) but got weights for {sorted(weights)}")
            return
        current = self.model.state_dict()
        missing, unexpected = sorted(set(current) - set(weights)), sorted(set(weights) - set(current))
        if missing or unexpected:
            raise ValueError(f"{name}: keys differ from the model's: missing {missing}, unexpected {unexpected}")
        loaded = {key: torch.as_tensor(np.asarray(to_numpy(value))) for key, value in weights.items()}
        for key, tensor in loaded.items():
            if tensor.shape != current[key].shape:
                raise ValueError(f"{name}: {key!r} has shape {tuple(tensor.shape)}, expected {tuple(current[key].shape)}")
        self.model.load_state_dict({key: tensor.to(current[key].dtype) for key, tensor in loaded.items()})

    def on_global_var_update(self, global_vars: Mapping[str, Any]) -> None:
        """Keeps the driver's global timestep (``global_vars["timestep"]``).

        Examples:
            >>> import gymnasium as gym, numpy as np
            >>> policy = RandomPolicy(gym.spaces.Discrete(2), gym.spaces.Discrete(2), {})
            >>> policy.on_global_var_update({"timestep": 100}); policy.global_timestep
            100
        """
        self.global_timestep = int(global_vars["timestep"])

    # ----- view requirements and pruning ------------------------------------------------------------

    def _get_default_view_requirements(self) -> dict[str, ViewRequirement]:
        """RLlib's default views: the broadest set, which pruning narrows.

        Examples:
            >>> import gymnasium as gym, numpy as np
            >>> views = RandomPolicy(gym.spaces.Discrete(2), gym.spaces.Discrete(2), {})._get_default_view_requirements()
            >>> [key for key, view in views.items() if not view.used_for_compute_actions]
            ['new_obs', 'actions', 'infos']
        """
        obs_space, act_space = self.observation_space, self.action_space
        return {
            SampleBatch.OBS: ViewRequirement(space=obs_space),
            SampleBatch.NEXT_OBS: ViewRequirement(SampleBatch.OBS, shift=1, space=obs_space, used_for_compute_actions=False),
            SampleBatch.ACTIONS: ViewRequirement(space=act_space, used_for_compute_actions=False),
            SampleBatch.PREV_ACTIONS: ViewRequirement(SampleBatch.ACTIONS, shift=-1, space=act_space),
            SampleBatch.REWARDS: ViewRequirement(),
            SampleBatch.PREV_REWARDS: ViewRequirement(SampleBatch.REWARDS, shift=-1),
            SampleBatch.TERMINATEDS: ViewRequirement(),
            SampleBatch.TRUNCATEDS: ViewRequirement(),
            SampleBatch.INFOS: ViewRequirement(used_for_compute_actions=False),
            SampleBatch.EPS_ID: ViewRequirement(),
            SampleBatch.UNROLL_ID: ViewRequirement(),
            SampleBatch.AGENT_INDEX: ViewRequirement(),
            SampleBatch.T: ViewRequirement(),
        }

    def _merge_model_view_requirements(self) -> None:
        """Updates the views with ``self.model``'s (copies), once, whenever the model appears."""
        if self._model_views_merged or self.model is None:
            return
        model_views = getattr(self.model, "view_requirements", None) or {}
        # Copies: pruning flips flags, and the model's own declaration should stay as written.
        self.view_requirements.update({key: copy.copy(view) for key, view in model_views.items()})
        self._model_views_merged = True

    def _add_state_views(self) -> None:
        """``state_in_i`` (``state_out_i`` one step back, once per sequence) and ``state_out_i``."""
        model_config = self.model.model_config if self.model is not None else self.config.get("model", {})
        max_seq_len = int(model_config.get("max_seq_len", 20))
        for i, state in enumerate(self.get_initial_state()):
            array = to_numpy(state)
            space = gym.spaces.Box(-1.0, 1.0, shape=array.shape, dtype=np.float32)
            self.view_requirements.setdefault(
                f"state_in_{i}",
                ViewRequirement(f"state_out_{i}", shift=-1, space=space, batch_repeat_value=max_seq_len),
            )
            self.view_requirements.setdefault(f"state_out_{i}", ViewRequirement(space=space, used_for_compute_actions=False))

    def _get_dummy_batch_from_view_requirements(self, batch_size: int = 1) -> SampleBatch:
        """A batch of ``batch_size`` rows, one column per view: zeros from its space.

        ``infos`` is empty dicts, ``t`` counts up; without a space, the sampler's id columns
        are int64, the done columns bool, others float32 scalars.

        Examples:
            >>> import gymnasium as gym, numpy as np
            >>> batch = RandomPolicy(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2), {})._get_dummy_batch_from_view_requirements(2)
            >>> batch["obs"].shape, batch["actions"].dtype, batch["terminateds"].dtype, batch["t"].tolist()
            ((2, 3), dtype('int64'), dtype('bool'), [0, 1])
        """
        return SampleBatch({key: _dummy_column(key, view, batch_size) for key, view in self.view_requirements.items()})

    @property
    def loss_initialized(self) -> bool:
        """Whether :meth:`_initialize_loss_from_dummy_batch` has run (a sampler runs it if not).

        Examples:
            >>> import gymnasium as gym, numpy as np
            >>> policy = RandomPolicy(gym.spaces.Discrete(2), gym.spaces.Discrete(2), {})
            >>> policy.loss_initialized, (policy._initialize_loss_from_dummy_batch(), policy.loss_initialized)[1]
            (False, True)
        """
        return self._loss_initialized

    def _initialize_loss_from_dummy_batch(self, auto_remove_unneeded_view_reqs: bool = True) -> None:
        """Runs a dummy batch through inference, postprocessing and the loss, and prunes the views.

        See the module docstring for the rules. The global timestep is restored afterwards.

        Args:
            auto_remove_unneeded_view_reqs: Whether to add views for new columns and prune
                (RLlib's flag); ``False`` only runs the passes (and turns off
                ``used_for_compute_actions`` for inference views not read).

        Raises:
            ValueError: A view used for compute_actions with a positive shift (names it), or
                outputs without one row per input row.
            KeyError: A stage read a column its batch does not hold (names the stage).
            TypeError: ``postprocess_trajectory`` did not return a SampleBatch, or an extra
                fetch that is not an array, tensor or dict of them.

        Examples:
            >>> import gymnasium as gym, numpy as np
            >>> class Next(Policy):
            ...     def compute_actions_from_input_dict(self, input_dict, **kwargs):
            ...         return np.zeros(len(input_dict["obs"]), np.int64), [], {}
            >>> policy = Next(gym.spaces.Discrete(3), gym.spaces.Discrete(2), {})
            >>> policy.view_requirements["next_actions"] = ViewRequirement("actions", shift=1)
            >>> policy._initialize_loss_from_dummy_batch()  # doctest: +ELLIPSIS
            Traceback (most recent call last):
            ...
            ValueError: view 'next_actions' (data_col 'actions') is used for compute_actions but has shift=1, ...
        """
        views = self.view_requirements
        self._merge_model_view_requirements()
        self._add_state_views()
        inference = inference_view_requirements(views)
        global_timestep, rows = self.global_timestep, _DUMMY_ROWS
        dummy = self._get_dummy_batch_from_view_requirements(rows)

        # 1) Inference: the input dict holds the inference views only, as the sampler builds it.
        input_dict = _TrackedBatch({key: dict.__getitem__(dummy, key) for key in inference}, seq_lens=np.ones(rows, np.int32))
        output = _stage(
            f"compute_actions_from_input_dict (inference views: {list(inference)})",
            self.compute_actions_from_input_dict, input_dict, explore=False, timestep=global_timestep,
        )
        if not isinstance(output, (tuple, list)) or len(output) != 3 or not isinstance(output[2], Mapping):
            raise TypeError(
                "compute_actions_from_input_dict must return (actions, state_outs list, extra_fetches dict), got "
                f"{type(output).__name__} {output!r:.200}"
            )
        inference_read = set(input_dict.accessed_keys)
        for key, view in views.items():
            if key not in inference_read:
                view.used_for_compute_actions = False
        actions, state_outs, extra = output
        outputs = {SampleBatch.ACTIONS: _check_rows("actions", actions, rows)}
        outputs.update({f"state_out_{i}": _check_rows(f"state_outs[{i}]", s, rows) for i, s in enumerate(state_outs)})
        for key, value in extra.items():
            if not isinstance(value, (np.ndarray, torch.Tensor, Mapping)):
                raise TypeError(
                    f"compute_actions_from_input_dict: extra fetch {key!r} is a {type(value).__name__}; expected a "
                    "numpy array, a tensor or a dict of them"
                )
            outputs[key] = _check_rows(f"extra fetch {key!r}", value, rows)
        for key, value in outputs.items():
            views.setdefault(key, ViewRequirement(space=_space_of(value), used_for_compute_actions=False))

        # 2) Postprocessing, on every column plus the outputs; its reads tracked on their own.
        post_in = _TrackedBatch(dict(dict.items(dummy)))
        post_in.update(outputs)
        for tracked in (post_in.accessed_keys, post_in.added_keys, post_in.deleted_keys):
            tracked.clear()
        before = set(post_in.keys())
        post = _stage("postprocess_trajectory", self.postprocess_trajectory, post_in)
        if not isinstance(post, SampleBatch):
            raise TypeError(f"postprocess_trajectory must return a SampleBatch, got {type(post).__name__}")
        post_read = set(post_in.accessed_keys) | set(post.accessed_keys)
        post_added = set(post.keys()) - before
        post_deleted = set(post_in.deleted_keys) | set(post.deleted_keys)

        # 3) The loss, on a fresh copy of the postprocessed batch (its reads are the loss's).
        has_loss, loss_read = self._defines("loss"), set()
        if has_loss:
            train = _TrackedBatch(dict(dict.items(post)), _is_training=True)
            state_ins = [key for key in train.keys() if key.startswith("state_in_")]
            if state_ins:  # per-sequence state: 4 sequences of 2 steps
                train.update(
                    {key: dict.__getitem__(train, key)[:_DUMMY_SEQS] for key in state_ins},
                    seq_lens=np.full(_DUMMY_SEQS, rows // _DUMMY_SEQS, np.int32),
                )
            train.set_get_interceptor(convert_to_torch_tensor)
            _stage(f"loss (postprocessed columns: {sorted(post.keys())})", self.loss, self.model, self.dist_class, train)
            loss_read = set(train.accessed_keys)
        self.global_timestep = global_timestep
        if auto_remove_unneeded_view_reqs:
            self._prune(post, inference_read | post_read | post_added | loss_read, post_added, post_deleted, loss_read, has_loss)
        self._loss_initialized = True

    def _prune(
        self, post: SampleBatch, read: set[str], added: set[str], deleted: set[str], loss_read: set[str], has_loss: bool
    ) -> None:
        """Adds views for the columns postprocessing added; with a loss, hides and removes (see module)."""
        views = self.view_requirements
        for key in sorted(added - set(views) - {SampleBatch.SEQ_LENS}):
            views[key] = ViewRequirement(space=_space_of(dict.__getitem__(post, key)), used_for_compute_actions=False)
        if not has_loss:
            return
        # A deleted column stays collected: postprocessing's `del` would fail without it.
        kept = {key for key in views if key in read or key in deleted or key in _NEVER_PRUNED or key in _SAMPLER_COLUMNS}
        frontier = list(kept)
        while frontier:  # what a kept view reads must be collected too
            source = views[frontier.pop()].data_col
            if source is not None and source in views and source not in kept:
                kept.add(source)
                frontier.append(source)
        for key in list(views):
            if key not in kept:
                del views[key]
            elif key not in loss_read and key not in _NEVER_PRUNED and key not in _SAMPLER_COLUMNS:
                views[key].used_for_training = False


class RandomPolicy(Policy):
    """Acts uniformly at random in the action space and does not learn (RLlib's example policy).

    Actions are drawn from a private copy of the action space seeded with
    ``config["seed"]`` (default 0), so no global random state is used or changed. It reads
    no column, so pruning turns every inference view off and, having no loss, removes none.

    Examples:
        >>> import gymnasium as gym
        >>> policy = RandomPolicy(gym.spaces.Box(-1, 1, (2,)), gym.spaces.Discrete(3), {"seed": 4})
        >>> actions, state, extra = policy.compute_actions_from_input_dict(SampleBatch(obs=np.zeros((5, 2))))
        >>> actions.shape, bool(((0 <= actions) & (actions < 3)).all()), state, extra
        ((5,), True, [], {})
    """

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: Mapping[str, Any] | None) -> None:
        super().__init__(observation_space, action_space, config)
        self._sampler = copy.deepcopy(action_space)
        self._sampler.seed(int(self.config.get("seed") or 0))

    def compute_actions_from_input_dict(
        self, input_dict: SampleBatch, explore: bool | None = None, timestep: int | None = None,
        episodes: list[Any] | None = None, **kwargs: Any,
    ) -> tuple[Any, list[Any], dict[str, Any]]:
        """``len(input_dict)`` random actions, stacked (a dict of stacks for a ``Dict`` space).

        Examples:
            >>> import gymnasium as gym
            >>> policy = RandomPolicy(gym.spaces.Discrete(2), gym.spaces.Discrete(2), {})
            >>> policy.compute_actions_from_input_dict(SampleBatch(obs=np.zeros(4)))[0].shape
            (4,)
        """
        samples = [self._sampler.sample() for _ in range(len(input_dict))]
        if isinstance(self._sampler, gym.spaces.Dict):
            return {key: np.stack([sample[key] for sample in samples]) for key in self._sampler.spaces}, [], {}
        return np.stack(samples) if samples else np.zeros((0,) + tuple(self._sampler.shape or ())), [], {}

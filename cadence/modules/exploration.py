"""Exploration wrappers that perturb a policy's action: Ornstein-Uhlenbeck noise,
additive Gaussian noise and epsilon-greedy.

Put one after the policy (``TensorDictSequential(actor, OrnsteinUhlenbeckProcessModule(...))``).
They perturb the action only when the exploration type is ``RANDOM`` (the default;
see :func:`set_exploration_type`, also importable from ``cadence.envs.utils``
as in TorchRL) and leave it alone under
``DETERMINISTIC``, ``MODE`` and ``MEAN``, so the same policy serves collection and
evaluation. Their noise scale anneals linearly with ``.step(frames)``, which the
training loop calls with the number of frames collected. Every draw comes from the
module's ``generator`` (a ``torch.Generator``; seeded with 0 unless one is given),
so seeding it reproduces a run.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from cadence.data import Bounded
    >>> from cadence.envs.utils import ExplorationType, set_exploration_type
    >>> from cadence.modules import AdditiveGaussianModule
    >>> noise = AdditiveGaussianModule(Bounded(-1.0, 1.0, shape=(2,)), sigma_init=0.5)
    >>> data = TensorDict(action=torch.zeros(2))
    >>> with set_exploration_type(ExplorationType.DETERMINISTIC):
    ...     noise(data.clone())["action"].tolist()
    [0.0, 0.0]
    >>> bool((noise(data.clone())["action"] != 0).all())
    True
"""

from __future__ import annotations

import math
import torch
from tensordict import TensorDictBase
from tensordict.nn import InteractionType, TensorDictModuleBase, interaction_type, set_interaction_type

from cadence.data import Categorical, OneHot, TensorSpec
from cadence.modules.actors import _as_composite, _HoldsSpec, _project, _spec_leaf

__all__ = [
    "DEFAULT_EXPLORATION_TYPE",
    "ExplorationType",
    "OrnsteinUhlenbeckProcessModule",
    "AdditiveGaussianModule",
    "EGreedyModule",
    "exploration_type",
    "set_exploration_type",
]

NestedKey = str | tuple[str, ...]
DeviceLike = torch.device | str | int


#: The exploration modes a policy can be asked to use (an alias of tensordict's
#: ``InteractionType``, so that tensordict's probabilistic modules follow it too).
ExplorationType = InteractionType

#: Context manager and decorator that sets the exploration mode (tensordict's
#: ``set_interaction_type``).
set_exploration_type = set_interaction_type

DEFAULT_EXPLORATION_TYPE: InteractionType = InteractionType.RANDOM


def exploration_type() -> InteractionType:
    """Returns the exploration mode in force (``RANDOM`` unless one was set).

    Examples:
        >>> from cadence.modules.exploration import ExplorationType, exploration_type, set_exploration_type
        >>> exploration_type()
        <InteractionType.RANDOM: 'random'>
        >>> with set_exploration_type(ExplorationType.DETERMINISTIC):
        ...     print(exploration_type() == ExplorationType.DETERMINISTIC)
        True
    """
    current = interaction_type()
    return DEFAULT_EXPLORATION_TYPE if current is None else current


def _linear_anneal(current: float, start: float, end: float, num_steps: int, frames: int) -> float:
    """Moves ``current`` from ``start`` towards ``end`` by ``frames / num_steps`` of the way."""
    delta = (start - end) / num_steps * frames
    return max(end, current - delta) if start >= end else min(end, current - delta)


class _ExplorationBase(_HoldsSpec, TensorDictModuleBase):
    """What the exploration modules share: the action spec, the generator, the check
    of the exploration type and the read of the action."""

    def __init__(
        self, spec: TensorSpec | None, action_key: NestedKey, generator: torch.Generator | None, owner: str
    ) -> None:
        super().__init__()
        self.action_key = action_key
        self.spec = _as_composite(spec, [action_key], owner)
        self.generator = generator if generator is not None else torch.Generator().manual_seed(0)
        self._owner = owner

    @property
    def action_spec(self) -> TensorSpec | None:
        """The spec of the action (``spec[action_key]``)."""
        return _spec_leaf(self.spec, self.action_key)

    @staticmethod
    def exploring() -> bool:
        """Whether the exploration type in force asks for exploration (``RANDOM``)."""
        return exploration_type() == ExplorationType.RANDOM

    def _get_action(self, tensordict: TensorDictBase) -> torch.Tensor:
        action = tensordict.get(self.action_key, None)
        if action is None:
            raise KeyError(
                f"{self._owner}: the tensordict holds no action at {self.action_key!r} (put the module after the "
                f"policy); it holds {sorted(map(str, tensordict.keys(True, True)))}"
            )
        return action

    def _randn(self, shape: torch.Size, like: torch.Tensor) -> torch.Tensor:
        # draw on the generator's device, then move: a CPU generator can feed a CUDA policy
        draw = torch.randn(shape, generator=self.generator, device=self.generator.device, dtype=like.dtype)
        return draw.to(like.device)

    def _rand(self, shape: torch.Size, device: torch.device) -> torch.Tensor:
        return torch.rand(shape, generator=self.generator, device=self.generator.device).to(device)

    @staticmethod
    def _batch_view(t: torch.Tensor, batch: torch.Size, action: torch.Tensor) -> torch.Tensor:
        """Reshapes a per-env tensor (``[*batch]`` or ``[*batch, 1]``) to broadcast over ``action``."""
        per_env = t.reshape(*batch, -1)[..., 0]
        return per_env.reshape(*batch, *([1] * (action.ndim - len(batch))))


class OrnsteinUhlenbeckProcessModule(_ExplorationBase):
    """Adds temporally correlated Ornstein-Uhlenbeck noise to the action (the DDPG paper's).

    Per env, ``noise_t = noise_{t-1} + theta * (mu - noise_{t-1}) * dt + sigma_t * sqrt(dt) * W``
    with ``W ~ N(0, 1)``; the action becomes ``action + eps * noise_t`` (projected
    into the spec if ``safe``). Within a trajectory ``sigma_t`` decreases linearly
    from ``sigma`` to ``sigma_min`` over ``n_steps_annealing`` steps (constant when
    ``sigma_min`` is None); across training ``eps`` decreases linearly from
    ``eps_init`` to ``eps_end`` over ``annealing_num_steps`` frames, one
    ``.step(frames)`` call at a time.

    The noise and the trajectory's step count travel in the tensordict (under
    ``"_ou_prev_noise"`` and ``"_ou_steps"`` by default), so each env of a batch
    has its own process and rollouts carry it from step to step. Where
    ``is_init_key`` (written by the ``InitTracker`` transform) is True, that env's
    process restarts from ``x0``.

    Args:
        spec: the action spec (a leaf, or a Composite holding ``action_key``).
        eps_init: the initial noise scale.
        eps_end: the final noise scale.
        annealing_num_steps: the frames over which ``eps`` anneals.
        theta: the process's mean-reversion rate.
        mu: the process's long-run mean.
        sigma: the process's volatility.
        dt: the time step.
        x0: the process's start value (default 0).
        sigma_min: the volatility reached after ``n_steps_annealing`` steps of a trajectory.
        n_steps_annealing: the steps over which ``sigma`` anneals within a trajectory.
        action_key: the action's key.
        is_init_key: the key marking the first step of a trajectory.
        key: the key of the noise state (the step count goes to ``key + "_steps"``).
        safe: project the noisy action into the spec.
        device: where the module's buffers live.
        generator: the ``torch.Generator`` the noise is drawn from.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from cadence.data import Bounded
        >>> from cadence.modules import OrnsteinUhlenbeckProcessModule
        >>> ou = OrnsteinUhlenbeckProcessModule(Bounded(-1.0, 1.0, shape=(3, 1)), annealing_num_steps=100)
        >>> data = TensorDict(action=torch.zeros(3, 1), is_init=torch.ones(3, 1, dtype=torch.bool), batch_size=[3])
        >>> out = ou(data)
        >>> sorted(out.keys())
        ['_ou_prev_noise', '_ou_steps', 'action', 'is_init']
        >>> ou.step(50)
        >>> round(ou.eps.item(), 3)
        0.55
    """

    def __init__(
        self,
        spec: TensorSpec,
        eps_init: float = 1.0,
        eps_end: float = 0.1,
        annealing_num_steps: int = 1000,
        theta: float = 0.15,
        mu: float = 0.0,
        sigma: float = 0.2,
        dt: float = 1e-2,
        x0: float | torch.Tensor | None = None,
        sigma_min: float | None = None,
        n_steps_annealing: int = 1000,
        *,
        action_key: NestedKey = "action",
        is_init_key: NestedKey = "is_init",
        key: str | None = None,
        safe: bool = True,
        device: DeviceLike | None = None,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__(spec, action_key, generator, "OrnsteinUhlenbeckProcessModule")
        if annealing_num_steps <= 0 or n_steps_annealing <= 0:
            raise ValueError(
                "OrnsteinUhlenbeckProcessModule: expected annealing_num_steps > 0 and n_steps_annealing > 0, got "
                f"{annealing_num_steps} and {n_steps_annealing}"
            )
        self.eps_init, self.eps_end = float(eps_init), float(eps_end)
        self.annealing_num_steps = annealing_num_steps
        self.register_buffer("eps", torch.tensor(float(eps_init), device=device))
        self.theta, self.mu, self.sigma, self.dt = theta, mu, sigma, dt
        self.sigma_min, self.n_steps_annealing = sigma_min, n_steps_annealing
        self.register_buffer("x0", torch.as_tensor(0.0 if x0 is None else x0, device=device, dtype=torch.float32))
        self.is_init_key = is_init_key
        self.noise_key: NestedKey = key if key is not None else "_ou_prev_noise"
        self.steps_key: NestedKey = f"{key}_steps" if key is not None else "_ou_steps"
        self.safe = safe
        self.in_keys = [action_key, is_init_key, self.noise_key, self.steps_key]
        self.out_keys = [action_key, self.noise_key, self.steps_key]
        if device is not None:
            self.spec = self.spec.to(device)

    def step(self, frames: int = 1) -> None:
        """Anneals ``eps`` by ``frames`` frames (call it with each batch's frame count).

        Examples:
            >>> from cadence.data import Bounded
            >>> ou = OrnsteinUhlenbeckProcessModule(Bounded(-1.0, 1.0, shape=(1,)), annealing_num_steps=10)
            >>> ou.step(100)
            >>> round(ou.eps.item(), 6)
            0.1
        """
        value = _linear_anneal(float(self.eps), self.eps_init, self.eps_end, self.annealing_num_steps, frames)
        self.eps.fill_(value)

    def current_sigma(self, steps: torch.Tensor) -> torch.Tensor:
        """The process's volatility after ``steps`` steps of a trajectory."""
        if self.sigma_min is None:
            return torch.full_like(steps, self.sigma, dtype=torch.get_default_dtype())
        slope = (self.sigma - self.sigma_min) / self.n_steps_annealing
        return (self.sigma - slope * steps.to(torch.get_default_dtype())).clamp_min(self.sigma_min)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Adds the next noise value to the action (only when exploring)."""
        action = self._get_action(tensordict)
        if not self.exploring():
            return tensordict
        batch = tensordict.batch_size
        noise = tensordict.get(self.noise_key, None)
        steps = tensordict.get(self.steps_key, None)
        x0 = self.x0.to(device=action.device, dtype=action.dtype).expand_as(action)
        if noise is None or steps is None:
            noise = x0.clone()
            steps = torch.zeros(*batch, 1, dtype=torch.long, device=action.device)
        is_init = tensordict.get(self.is_init_key, None)
        if is_init is not None:
            restart = self._batch_view(is_init.bool(), batch, action)
            noise = torch.where(restart, x0, noise)
            steps = torch.where(self._batch_view(is_init.bool(), batch, steps), torch.zeros_like(steps), steps)
        sigma_t = self._batch_view(self.current_sigma(steps), batch, action).to(action)
        noise = (
            noise
            + self.theta * (self.mu - noise) * self.dt
            + sigma_t * math.sqrt(self.dt) * self._randn(action.shape, action)
        )
        out = action + self.eps.to(action) * noise
        tensordict.set(self.action_key, out)
        tensordict.set(self.noise_key, noise)
        tensordict.set(self.steps_key, steps + 1)
        if self.safe:
            _project(tensordict, self.spec, [self.action_key])
        return tensordict


class AdditiveGaussianModule(_ExplorationBase):
    """Adds Gaussian noise ``sigma * N(mean, std)`` to the action (as in TD3).

    ``sigma`` decreases linearly from ``sigma_init`` to ``sigma_end`` over
    ``annealing_num_steps`` frames, one ``.step(frames)`` call at a time.

    Args:
        spec: the action spec (a leaf, or a Composite holding ``action_key``).
        sigma_init: the initial noise scale.
        sigma_end: the final noise scale.
        annealing_num_steps: the frames over which ``sigma`` anneals.
        mean: the mean of the unscaled noise.
        std: the standard deviation of the unscaled noise.
        action_key: the action's key.
        safe: project the noisy action into the spec.
        device: where the module's buffers live.
        generator: the ``torch.Generator`` the noise is drawn from.

    Examples:
        >>> from cadence.data import Bounded
        >>> from cadence.modules import AdditiveGaussianModule
        >>> noise = AdditiveGaussianModule(Bounded(-1.0, 1.0, shape=(1,)), annealing_num_steps=10)
        >>> noise.step(5)
        >>> round(noise.sigma.item(), 6)
        0.55
    """

    def __init__(
        self,
        spec: TensorSpec,
        sigma_init: float = 1.0,
        sigma_end: float = 0.1,
        annealing_num_steps: int = 1000,
        mean: float = 0.0,
        std: float = 1.0,
        *,
        action_key: NestedKey = "action",
        safe: bool = True,
        device: DeviceLike | None = None,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__(spec, action_key, generator, "AdditiveGaussianModule")
        if annealing_num_steps <= 0:
            raise ValueError(f"AdditiveGaussianModule: expected annealing_num_steps > 0, got {annealing_num_steps}")
        self.sigma_init, self.sigma_end = float(sigma_init), float(sigma_end)
        self.annealing_num_steps = annealing_num_steps
        self.register_buffer("sigma", torch.tensor(float(sigma_init), device=device))
        self.mean, self.std = mean, std
        self.safe = safe
        self.in_keys = [action_key]
        self.out_keys = [action_key]
        if device is not None:
            self.spec = self.spec.to(device)

    def step(self, frames: int = 1) -> None:
        """Anneals ``sigma`` by ``frames`` frames."""
        value = _linear_anneal(float(self.sigma), self.sigma_init, self.sigma_end, self.annealing_num_steps, frames)
        self.sigma.fill_(value)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Adds noise to the action (only when exploring)."""
        action = self._get_action(tensordict)
        if not self.exploring():
            return tensordict
        noise = self.mean + self.std * self._randn(action.shape, action)
        tensordict.set(self.action_key, action + self.sigma.to(action) * noise)
        if self.safe:
            _project(tensordict, self.spec, [self.action_key])
        return tensordict


class EGreedyModule(_ExplorationBase):
    """Replaces the action by a random one with probability ``eps`` (epsilon-greedy).

    ``eps`` decreases linearly from ``eps_init`` to ``eps_end`` over
    ``annealing_num_steps`` frames, one ``.step(frames)`` call at a time. With
    ``action_mask_key``, random actions are drawn among the allowed ones only
    (discrete OneHot or Categorical specs).

    Args:
        spec: the action spec (a leaf, or a Composite holding ``action_key``).
        eps_init: the initial probability of a random action.
        eps_end: the final probability.
        annealing_num_steps: the frames over which ``eps`` anneals.
        action_key: the action's key.
        action_mask_key: the key of the boolean mask of allowed actions, if any.
        device: where the module's buffers live.
        generator: the ``torch.Generator`` the draws come from.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from cadence.data import Categorical
        >>> from cadence.modules import EGreedyModule
        >>> greedy = EGreedyModule(Categorical(4), eps_init=1.0, eps_end=0.0, annealing_num_steps=10)
        >>> mask = torch.tensor([False, False, True, False]).expand(100, 4)
        >>> greedy.action_mask_key = "action_mask"
        >>> out = greedy(TensorDict(action=torch.zeros(100, dtype=torch.long), action_mask=mask, batch_size=[100]))
        >>> out["action"].unique().tolist()
        [2]
        >>> greedy.step(10)
        >>> greedy.eps.item()
        0.0
    """

    def __init__(
        self,
        spec: TensorSpec,
        eps_init: float = 1.0,
        eps_end: float = 0.1,
        annealing_num_steps: int = 1000,
        *,
        action_key: NestedKey = "action",
        action_mask_key: NestedKey | None = None,
        device: DeviceLike | None = None,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__(spec, action_key, generator, "EGreedyModule")
        if self.action_spec is None:
            raise ValueError(f"EGreedyModule: expected a spec holding {action_key!r}, got {spec!r}")
        if annealing_num_steps <= 0:
            raise ValueError(f"EGreedyModule: expected annealing_num_steps > 0, got {annealing_num_steps}")
        if not 0.0 <= eps_init <= 1.0 or not 0.0 <= eps_end <= 1.0:
            raise ValueError(f"EGreedyModule: expected eps_init and eps_end in [0, 1], got {eps_init} and {eps_end}")
        self.eps_init, self.eps_end = float(eps_init), float(eps_end)
        self.annealing_num_steps = annealing_num_steps
        self.register_buffer("eps", torch.tensor(float(eps_init), device=device))
        self.action_mask_key = action_mask_key
        self.in_keys = [action_key] + ([action_mask_key] if action_mask_key is not None else [])
        self.out_keys = [action_key]
        if device is not None:
            self.spec = self.spec.to(device)

    def step(self, frames: int = 1) -> None:
        """Anneals ``eps`` by ``frames`` frames."""
        value = _linear_anneal(float(self.eps), self.eps_init, self.eps_end, self.annealing_num_steps, frames)
        self.eps.fill_(value)

    def _random_actions(self, tensordict: TensorDictBase, action: torch.Tensor) -> torch.Tensor:
        spec = self.action_spec
        assert spec is not None
        if self.action_mask_key is None:
            lead = action.shape[: action.ndim - spec.ndim]
            return spec.rand(lead, generator=self.generator).to(device=action.device, dtype=action.dtype)
        if not isinstance(spec, (OneHot, Categorical)):
            raise ValueError(
                f"EGreedyModule: an action mask needs a OneHot or Categorical action spec, got {type(spec).__name__}"
            )
        mask = tensordict.get(self.action_mask_key, None)
        if mask is None:
            raise KeyError(
                f"EGreedyModule: the tensordict holds no action mask at {self.action_mask_key!r}; "
                f"it holds {sorted(map(str, tensordict.keys(True, True)))}"
            )
        n = spec.n
        weights = mask.bool().reshape(-1, n).float().to(self.generator.device)
        if bool((weights.sum(-1) == 0).any()):
            raise ValueError(f"EGreedyModule: the mask at {self.action_mask_key!r} allows no action in some rows")
        index = torch.multinomial(weights, 1, generator=self.generator).to(action.device)
        if isinstance(spec, OneHot):
            return torch.nn.functional.one_hot(index.squeeze(-1), n).reshape(action.shape).to(action.dtype)
        return index.reshape(action.shape).to(action.dtype)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Replaces each env's action by a random one with probability ``eps`` (only when exploring)."""
        action = self._get_action(tensordict)
        if not self.exploring():
            return tensordict
        batch = tensordict.batch_size
        take_random = self._rand(batch, action.device) < self.eps.to(action.device)
        random_action = self._random_actions(tensordict, action)
        view = take_random.reshape(*batch, *([1] * (action.ndim - len(batch))))
        tensordict.set(self.action_key, torch.where(view, random_action, action))
        return tensordict


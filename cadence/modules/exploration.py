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
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.nn import InteractionType, TensorDictModuleBase, interaction_type, set_interaction_type

from cadence.data import Categorical, OneHot, TensorSpec
from cadence.modules.actors import _as_composite, _HoldsSpec, _projected, _spec_leaf

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
        # sigma_t * sqrt(dt), kept while it cannot change (see _scaled_sigma)
        self._scaled_sigma_cache: tuple[tuple[Any, ...], torch.Tensor] | None = None
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

    def add_noise(
        self,
        action: torch.Tensor,
        noise: torch.Tensor | None,
        steps: torch.Tensor | None,
        is_init: torch.Tensor | None,
        batch: torch.Size,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One step of the process (the arithmetic of :meth:`forward`, on tensors): the
        noisy action (projected into the spec where ``safe``), the new noise and the new
        step count, for a batch of shape ``batch``. Without ``noise`` or ``steps`` the
        process starts at ``x0``; where ``is_init`` is True it starts there again.

        Examples:
            >>> import torch
            >>> from cadence.data import Bounded
            >>> ou = OrnsteinUhlenbeckProcessModule(Bounded(-1.0, 1.0, shape=(2, 1)))
            >>> action, noise, steps = ou.add_noise(torch.zeros(2, 1), None, None, None, torch.Size([2]))
            >>> steps.tolist(), bool((action.abs() <= 1).all())
            ([[1], [1]], True)
        """
        if noise is None or steps is None:
            noise = self.x0.to(device=action.device, dtype=action.dtype).expand_as(action).clone()
            steps = torch.zeros(*batch, 1, dtype=torch.long, device=action.device)
        if is_init is not None:
            restart = is_init.bool()
            x0 = self.x0.to(device=action.device, dtype=action.dtype).expand_as(action)
            noise = torch.where(self._batch_view(restart, batch, action), x0, noise)
            steps = torch.where(self._batch_view(restart, batch, steps), torch.zeros_like(steps), steps)
        noise = (
            noise
            + self.theta * (self.mu - noise) * self.dt
            + self._scaled_sigma(steps, batch, action) * self._randn(action.shape, action)
        )
        out = action + self.eps.to(action) * noise
        return _projected(out, self.action_spec if self.safe else None), noise, steps + 1

    def _scaled_sigma(self, steps: torch.Tensor, batch: torch.Size, action: torch.Tensor) -> torch.Tensor:
        """``sigma_t * sqrt(dt)`` shaped to ``action``; without annealing within trajectories
        (``sigma_min`` None) it does not change from step to step: computed once, by the
        same ops, and kept while sigma, dt, the shape and the dtype stay the same."""
        key = (self.sigma, self.dt, action.shape, action.dtype, action.device) if self.sigma_min is None else None
        cached = self._scaled_sigma_cache
        if key is not None and cached is not None and cached[0] == key:
            return cached[1]
        value = self._batch_view(self.current_sigma(steps), batch, action).to(action) * math.sqrt(self.dt)
        if key is not None:
            self._scaled_sigma_cache = (key, value)
        return value

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Adds the next noise value to the action (only when exploring)."""
        action = self._get_action(tensordict)
        if not self.exploring():
            return tensordict
        action, noise, steps = self.add_noise(
            action, tensordict.get(self.noise_key, None), tensordict.get(self.steps_key, None),
            tensordict.get(self.is_init_key, None), tensordict.batch_size,
        )
        tensordict.set(self.action_key, action)
        tensordict.set(self.noise_key, noise)
        tensordict.set(self.steps_key, steps)
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

    def add_noise(self, action: torch.Tensor) -> torch.Tensor:
        """``action`` with this step's noise added, projected into the spec where ``safe``
        (the arithmetic of :meth:`forward`, on a tensor).

        Examples:
            >>> import torch
            >>> from cadence.data import Bounded
            >>> noise = AdditiveGaussianModule(Bounded(-1.0, 1.0, shape=(3,)), sigma_init=10.0)
            >>> bool((noise.add_noise(torch.zeros(3)).abs() <= 1).all())
            True
        """
        noise = self.mean + self.std * self._randn(action.shape, action)
        return _projected(action + self.sigma.to(action) * noise, self.action_spec if self.safe else None)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Adds noise to the action (only when exploring)."""
        action = self._get_action(tensordict)
        if not self.exploring():
            return tensordict
        tensordict.set(self.action_key, self.add_noise(action))
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


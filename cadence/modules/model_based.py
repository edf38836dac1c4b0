"""World-model networks for model-based RL: the world-model wrapper, the recurrent
state-space model (RSSM) of PlaNet and Dreamer, its pixel encoder and decoder, and
Dreamer's actor.

The RSSM keeps two latents per step: a deterministic *belief* ``h`` carried by a GRU
cell and a stochastic *state* ``s`` drawn from a diagonal normal. The prior
(:class:`RSSMPrior`) predicts ``s_{t+1}`` from ``(s_t, a_t)`` alone, which is what an
imagined rollout (:class:`~cadence.envs.model_based.dreamer.DreamerEnv`) steps with; the
posterior (:class:`RSSMPosterior`) corrects it with the encoded observation, and
:class:`RSSMRollout` chains the two over a sequence of real data to train them.

Every draw of the stochastic state comes from a ``torch.Generator`` the module owns
(its ``generator`` attribute), never from torch's global generator: seeding that
generator (a model-based env's ``set_seed`` does it) reproduces a rollout exactly.

Examples:
    >>> import torch
    >>> from cadence.modules.model_based import RSSMPrior
    >>> prior = RSSMPrior(None, hidden_dim=8, rnn_hidden_dim=8, state_dim=4, action_dim=2)
    >>> mean, std, state, belief = prior(torch.zeros(3, 4), torch.zeros(3, 8), torch.zeros(3, 2))
    >>> state.shape, belief.shape, bool((std >= 0.1).all())
    (torch.Size([3, 4]), torch.Size([3, 8]), True)
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from tensordict.nn import NormalParamExtractor, TensorDictModuleBase, TensorDictSequential
from torch import nn

from cadence.data import TensorSpec
from cadence.modules.models import MLP

__all__ = [
    "WorldModelWrapper",
    "RSSMPrior",
    "RSSMPosterior",
    "RSSMRollout",
    "ObsEncoder",
    "ObsDecoder",
    "DreamerActor",
]

NestedKey = str | tuple[str, ...]
DeviceLike = torch.device | str | int


def _standard_normal(like: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Standard normal noise shaped like ``like``, drawn from ``generator``.

    The draw happens on the generator's device (a CPU generator can serve a CUDA model)
    and is then moved to ``like``'s.
    """
    noise = torch.randn(like.shape, generator=generator, device=generator.device, dtype=like.dtype)
    return noise.to(like.device)


def _check_last_dim(value: torch.Tensor, expected: int, name: str, owner: str) -> None:
    if value.shape[-1:] != (expected,):
        raise ValueError(f"{owner}: {name} must end with a dim of size {expected}, got shape {tuple(value.shape)}")


class WorldModelWrapper(TensorDictSequential):
    """A transition model and a reward model, run one after the other.

    The transition model writes the next world state (the next observation, or a
    latent state) and the reward model reads it to write the reward of the imagined
    transition. A :class:`~cadence.envs.model_based.ModelBasedEnvBase` steps such a
    model as an env.

    Args:
        transition_model: reads the current world state and the action and writes the
            next world state.
        reward_model: reads the world state and writes the reward.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from cadence.modules import MLP
        >>> from cadence.modules.model_based import WorldModelWrapper
        >>> world_model = WorldModelWrapper(  # MLP concatenates its inputs
        ...     TensorDictModule(MLP(5, 4, depth=0), in_keys=["hidden", "action"], out_keys=["hidden"]),
        ...     TensorDictModule(torch.nn.Linear(4, 1), in_keys=["hidden"], out_keys=["reward"]),
        ... )
        >>> out = world_model(TensorDict(hidden=torch.zeros(2, 4), action=torch.zeros(2, 1), batch_size=[2]))
        >>> out["hidden"].shape, out["reward"].shape
        (torch.Size([2, 4]), torch.Size([2, 1]))
        >>> world_model.get_reward_operator().out_keys
        ['reward']
    """

    def __init__(self, transition_model: TensorDictModuleBase, reward_model: TensorDictModuleBase) -> None:
        super().__init__(transition_model, reward_model)

    def get_transition_model_operator(self) -> TensorDictModuleBase:
        """The transition model: the world state (and action) to the next world state.

        Examples:
            >>> import torch
            >>> from tensordict.nn import TensorDictModule
            >>> from cadence.modules.model_based import WorldModelWrapper
            >>> transition = TensorDictModule(torch.nn.Linear(2, 1), in_keys=["x", "action"], out_keys=["x"])
            >>> reward = TensorDictModule(torch.nn.Linear(1, 1), in_keys=["x"], out_keys=["reward"])
            >>> WorldModelWrapper(transition, reward).get_transition_model_operator() is transition
            True
        """
        return self.module[0]

    def get_reward_operator(self) -> TensorDictModuleBase:
        """The reward model: the world state to the reward.

        Examples:
            >>> import torch
            >>> from tensordict.nn import TensorDictModule
            >>> from cadence.modules.model_based import WorldModelWrapper
            >>> transition = TensorDictModule(torch.nn.Linear(2, 1), in_keys=["x", "action"], out_keys=["x"])
            >>> reward = TensorDictModule(torch.nn.Linear(1, 1), in_keys=["x"], out_keys=["reward"])
            >>> WorldModelWrapper(transition, reward).get_reward_operator() is reward
            True
        """
        return self.module[1]


class RSSMPrior(nn.Module):
    """The prior of the RSSM: the next state and belief from the state, belief and action.

    ``(s_t, a_t)`` is projected (a linear layer and an ELU), fed to a GRU cell whose
    hidden state is the belief ``h_t``; the new belief ``h_{t+1}`` is mapped to the mean
    and standard deviation of the next state, and a state is drawn from that normal.
    In the Dreamer paper the belief is the "deterministic state" and the state the
    "stochastic state".

    Args:
        action_spec: the action spec; its last dim sizes the input layer when
            ``action_dim`` is not given. ``None`` with no ``action_dim`` makes the input
            layer lazy (``nn.LazyLinear``), sized by the first call.
        hidden_dim: the width of the projections (the GRU cell's input size).
        rnn_hidden_dim: the GRU cell's hidden size: the size of the belief.
        state_dim: the size of the stochastic state.
        scale_lb: the lower bound of the state's standard deviation.
        action_dim: the size of the action (overrides ``action_spec``).
        device: where the parameters are created.
        generator: the generator the states are drawn from; a fresh
            ``torch.Generator()`` (fixed default seed) if not given.

    Examples:
        >>> import torch
        >>> from cadence.data import Bounded
        >>> from cadence.modules.model_based import RSSMPrior
        >>> prior = RSSMPrior(Bounded(-1, 1, shape=(2,)), hidden_dim=8, rnn_hidden_dim=6, state_dim=4)
        >>> prior.generator.manual_seed(0)  # doctest: +ELLIPSIS
        <torch._C.Generator object at ...>
        >>> mean, std, state, belief = prior(torch.zeros(5, 4), torch.zeros(5, 6), torch.zeros(5, 2))
        >>> mean.shape, state.shape, belief.shape
        (torch.Size([5, 4]), torch.Size([5, 4]), torch.Size([5, 6]))
        >>> prior.generator.manual_seed(0)  # doctest: +ELLIPSIS
        <torch._C.Generator object at ...>
        >>> bool((prior(torch.zeros(5, 4), torch.zeros(5, 6), torch.zeros(5, 2))[2] == state).all())
        True
    """

    def __init__(
        self,
        action_spec: TensorSpec | None,
        hidden_dim: int = 200,
        rnn_hidden_dim: int = 200,
        state_dim: int = 30,
        scale_lb: float = 0.1,
        action_dim: int | None = None,
        device: DeviceLike | None = None,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        if action_dim is None and action_spec is not None:
            if len(action_spec.shape) == 0:
                raise ValueError(
                    f"RSSMPrior: action_spec must have at least one dim (the action's size), got {action_spec}"
                )
            action_dim = int(action_spec.shape[-1])
        if action_dim is not None:
            first: nn.Module = nn.Linear(state_dim + action_dim, hidden_dim, device=device)
        else:
            first = nn.LazyLinear(hidden_dim, device=device)
        self.action_state_projector = nn.Sequential(first, nn.ELU())
        self.rnn = nn.GRUCell(hidden_dim, rnn_hidden_dim, device=device)
        self.rnn_to_prior_projector = nn.Sequential(
            nn.Linear(rnn_hidden_dim, hidden_dim, device=device),
            nn.ELU(),
            nn.Linear(hidden_dim, 2 * state_dim, device=device),
            NormalParamExtractor(scale_mapping="softplus", scale_lb=scale_lb),
        )
        self.state_dim = state_dim
        self.rnn_hidden_dim = rnn_hidden_dim
        self.action_dim = action_dim
        self.action_shape = action_spec.shape if action_spec is not None else None
        self.generator = generator if generator is not None else torch.Generator()

    def forward(
        self, state: torch.Tensor, belief: torch.Tensor, action: torch.Tensor, noise: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """One prior step.

        Args:
            state: the stochastic state ``[*batch, state_dim]``.
            belief: the belief ``[*batch, rnn_hidden_dim]``.
            action: the action ``[*batch, action_dim]``.
            noise: standard normal noise for the state draw (drawn from
                ``self.generator`` if not given).

        Returns:
            The prior's mean and standard deviation, the drawn next state and the next
            belief.
        """
        _check_last_dim(state, self.state_dim, "state", "RSSMPrior")
        _check_last_dim(belief, self.rnn_hidden_dim, "belief", "RSSMPrior")
        projected = self.action_state_projector(torch.cat([state, action], dim=-1))
        batch_shape = projected.shape[:-1]
        # the GRU cell takes one batch dim: fold the others in and out
        next_belief = self.rnn(projected.reshape(-1, projected.shape[-1]), belief.reshape(-1, belief.shape[-1]))
        next_belief = next_belief.reshape(*batch_shape, self.rnn_hidden_dim)
        mean, std = self.rnn_to_prior_projector(next_belief)
        if noise is None:
            noise = _standard_normal(std, self.generator)
        return mean, std, mean + noise * std, next_belief


class RSSMPosterior(nn.Module):
    """The posterior of the RSSM: the state from the belief and the encoded observation.

    Args:
        hidden_dim: the width of the hidden layer.
        state_dim: the size of the stochastic state.
        scale_lb: the lower bound of the state's standard deviation.
        rnn_hidden_dim: the size of the belief; with ``obs_embed_dim``, sizes the input
            layer (else it is lazy, sized by the first call).
        obs_embed_dim: the size of the encoded observation.
        device: where the parameters are created.
        generator: the generator the states are drawn from; a fresh
            ``torch.Generator()`` (fixed default seed) if not given.

    Examples:
        >>> import torch
        >>> from cadence.modules.model_based import RSSMPosterior
        >>> posterior = RSSMPosterior(hidden_dim=8, state_dim=4, rnn_hidden_dim=6, obs_embed_dim=10)
        >>> mean, std, state = posterior(torch.zeros(5, 6), torch.zeros(5, 10))
        >>> mean.shape, std.shape, state.shape
        (torch.Size([5, 4]), torch.Size([5, 4]), torch.Size([5, 4]))
        >>> bool((posterior(torch.zeros(5, 6), torch.zeros(5, 10), noise=torch.zeros(5, 4))[2] == mean).all())
        True
    """

    def __init__(
        self,
        hidden_dim: int = 200,
        state_dim: int = 30,
        scale_lb: float = 0.1,
        rnn_hidden_dim: int | None = None,
        obs_embed_dim: int | None = None,
        device: DeviceLike | None = None,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        if rnn_hidden_dim is not None and obs_embed_dim is not None:
            first: nn.Module = nn.Linear(rnn_hidden_dim + obs_embed_dim, hidden_dim, device=device)
        else:
            first = nn.LazyLinear(hidden_dim, device=device)
        self.obs_rnn_to_post_projector = nn.Sequential(
            first,
            nn.ELU(),
            nn.Linear(hidden_dim, 2 * state_dim, device=device),
            NormalParamExtractor(scale_mapping="softplus", scale_lb=scale_lb),
        )
        self.hidden_dim = hidden_dim
        self.state_dim = state_dim
        self.generator = generator if generator is not None else torch.Generator()

    def forward(
        self, belief: torch.Tensor, obs_embedding: torch.Tensor, noise: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The posterior's mean, standard deviation and a state drawn from it.

        Args:
            belief: the belief ``[*batch, rnn_hidden_dim]``.
            obs_embedding: the encoded observation ``[*batch, obs_embed_dim]``.
            noise: standard normal noise for the draw (drawn from ``self.generator``
                if not given).
        """
        mean, std = self.obs_rnn_to_post_projector(torch.cat([belief, obs_embedding], dim=-1))
        if noise is None:
            noise = _standard_normal(std, self.generator)
        return mean, std, mean + noise * std


class RSSMRollout(TensorDictModuleBase):
    """Runs the RSSM prior and posterior over a sequence of real steps.

    The input's last batch dim is time. At each step the prior reads the state, the
    belief and the action and writes (under ``"next"``) the prior's parameters and the
    next belief; the posterior reads the next belief and the encoded next observation
    and writes the posterior's parameters and the next state. The entries written
    under ``"next"`` whose names the prior reads at the root (the state and the
    belief) become the root entries of the following step, so each step starts from
    the previous posterior: the state and belief of the input are read at the first
    step only. The output stacks every step on the time dim; its root state and
    belief are the ones each step started from.

    Args:
        rssm_prior: a ``TensorDictModule`` of an :class:`RSSMPrior`.
        rssm_posterior: a ``TensorDictModule`` of an :class:`RSSMPosterior`.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from cadence.modules.model_based import RSSMPosterior, RSSMPrior, RSSMRollout
        >>> prior = TensorDictModule(
        ...     RSSMPrior(None, hidden_dim=8, rnn_hidden_dim=6, state_dim=4, action_dim=1),
        ...     in_keys=["state", "belief", "action"],
        ...     out_keys=[("next", "prior_mean"), ("next", "prior_std"), "_", ("next", "belief")])
        >>> posterior = TensorDictModule(
        ...     RSSMPosterior(hidden_dim=8, state_dim=4, rnn_hidden_dim=6, obs_embed_dim=3),
        ...     in_keys=[("next", "belief"), ("next", "encoded_latents")],
        ...     out_keys=[("next", "posterior_mean"), ("next", "posterior_std"), ("next", "state")])
        >>> data = TensorDict({"state": torch.zeros(2, 5, 4), "belief": torch.zeros(2, 5, 6),
        ...     "action": torch.zeros(2, 5, 1), ("next", "encoded_latents"): torch.zeros(2, 5, 3)}, [2, 5])
        >>> out = RSSMRollout(prior, posterior)(data)
        >>> out["next", "state"].shape, out["next", "prior_mean"].shape
        (torch.Size([2, 5, 4]), torch.Size([2, 5, 4]))
        >>> bool((out["state"][:, 1:] == out["next", "state"][:, :-1]).all())
        True
    """

    def __init__(self, rssm_prior: TensorDictModuleBase, rssm_posterior: TensorDictModuleBase) -> None:
        super().__init__()
        sequence = TensorDictSequential(rssm_prior, rssm_posterior)
        self.in_keys = list(sequence.in_keys)
        self.out_keys = list(sequence.out_keys)
        self.rssm_prior = rssm_prior
        self.rssm_posterior = rssm_posterior
        prior_inputs = {_as_tuple(key) for key in rssm_prior.in_keys}
        # ("next", "state") -> "state": what one step hands the next
        self._carried = [
            (key, _unwrap(_as_tuple(key)[1:]))
            for key in self.out_keys
            if _as_tuple(key)[0] == "next" and _as_tuple(key)[1:] in prior_inputs
        ]

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Rolls the prior and posterior over the last batch dim of ``tensordict``.

        Args:
            tensordict: the sequence, of batch ``[*batch, T]``, holding the first state
                and belief, the actions and the encoded next observations.

        Returns:
            A new tensordict of batch ``[*batch, T]`` with the modules' outputs.
        """
        if tensordict.batch_dims == 0:
            raise ValueError(
                "RSSMRollout: the input needs a time dim (its last batch dim), got batch size "
                f"{tuple(tensordict.batch_size)}"
            )
        time_dim = tensordict.batch_dims - 1
        steps = tensordict.exclude(*self.out_keys).unbind(time_dim)
        outputs: list[TensorDictBase] = []
        carried: dict[NestedKey, torch.Tensor] = {}
        for step in steps:
            for key, value in carried.items():
                step.set(key, value)
            self.rssm_prior(step)
            self.rssm_posterior(step)
            outputs.append(step)
            carried = {root_key: step.get(next_key) for next_key, root_key in self._carried}
        return torch.stack(outputs, time_dim)


def _as_tuple(key: NestedKey) -> tuple[str, ...]:
    return (key,) if isinstance(key, str) else tuple(key)


def _unwrap(key: tuple[str, ...]) -> NestedKey:
    return key[0] if len(key) == 1 else key


class ObsEncoder(nn.Module):
    """The pixel encoder of PlaNet and Dreamer: strided convolutions to a flat vector.

    ``num_layers`` convolutions of kernel 4 and stride 2 with ReLUs, the number of
    channels doubling from ``channels`` at each layer; a ``64 x 64`` image gives
    ``channels * 32`` features with the defaults (1024).

    Args:
        channels: the output channels of the first layer.
        num_layers: the number of convolutions (at least 1).
        in_channels: the input channels; ``None`` makes the first layer lazy.
        device: where the parameters are created.

    Examples:
        >>> import torch
        >>> from cadence.modules.model_based import ObsEncoder
        >>> encoder = ObsEncoder(channels=8, in_channels=3)
        >>> encoder(torch.zeros(2, 5, 3, 64, 64)).shape
        torch.Size([2, 5, 256])
    """

    def __init__(
        self,
        channels: int = 32,
        num_layers: int = 4,
        in_channels: int | None = None,
        device: DeviceLike | None = None,
    ) -> None:
        if num_layers < 1:
            raise ValueError(f"ObsEncoder: num_layers must be at least 1, got {num_layers}")
        super().__init__()
        if in_channels is not None:
            first: nn.Module = nn.Conv2d(in_channels, channels, 4, stride=2, device=device)
        else:
            first = nn.LazyConv2d(channels, 4, stride=2, device=device)
        layers: list[nn.Module] = [first, nn.ReLU()]
        width = channels
        for _ in range(1, num_layers):
            layers += [nn.Conv2d(width, 2 * width, 4, stride=2, device=device), nn.ReLU()]
            width *= 2
        self.encoder = nn.Sequential(*layers)

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        """Encodes images ``[*batch, C, H, W]`` (any number of batch dims) to ``[*batch, F]``."""
        if observation.ndim < 3:
            raise ValueError(f"ObsEncoder: expected images [*batch, C, H, W], got shape {tuple(observation.shape)}")
        batch_shape = observation.shape[:-3]
        encoded = self.encoder(observation.reshape(-1, *observation.shape[-3:]))
        return encoded.reshape(*batch_shape, -1)


class ObsDecoder(nn.Module):
    """The pixel decoder of PlaNet and Dreamer: from the state and belief to an image.

    The concatenated state and belief go through a linear layer (and a ReLU) to
    ``channels * 32`` features, seen as a ``1 x 1`` image, then through ``num_layers``
    transposed convolutions of stride 2 with ReLUs between them, the channels halving
    down to ``channels`` and then ``out_channels``. With the defaults (kernels
    ``[5, 5, 6, 6]``) the image is ``64 x 64``.

    Args:
        channels: the channels before the last layer.
        num_layers: the number of transposed convolutions (at least 1).
        kernel_sizes: the kernel size of every layer (an int) or of each; defaults to
            ``[5, 5, 6, 6]`` for 4 layers, else 5.
        latent_dim: the size of the state and belief together; ``None`` makes the
            linear layer lazy.
        out_channels: the channels of the image (3 for RGB, 1 for grayscale).
        device: where the parameters are created.

    Examples:
        >>> import torch
        >>> from cadence.modules.model_based import ObsDecoder
        >>> decoder = ObsDecoder(channels=4, latent_dim=10)
        >>> decoder(torch.zeros(2, 7, 4), torch.zeros(2, 7, 6)).shape
        torch.Size([2, 7, 3, 64, 64])
    """

    def __init__(
        self,
        channels: int = 32,
        num_layers: int = 4,
        kernel_sizes: int | list[int] | None = None,
        latent_dim: int | None = None,
        out_channels: int = 3,
        device: DeviceLike | None = None,
    ) -> None:
        if num_layers < 1:
            raise ValueError(f"ObsDecoder: num_layers must be at least 1, got {num_layers}")
        if kernel_sizes is None:
            kernel_sizes = [5, 5, 6, 6] if num_layers == 4 else 5
        kernels = [kernel_sizes] * num_layers if isinstance(kernel_sizes, int) else list(kernel_sizes)
        if len(kernels) != num_layers:
            raise ValueError(
                f"ObsDecoder: kernel_sizes must give one size per layer ({num_layers}), got {kernel_sizes}"
            )
        super().__init__()
        features = channels * 32
        if latent_dim is not None:
            first: nn.Module = nn.Linear(latent_dim, features, device=device)
        else:
            first = nn.LazyLinear(features, device=device)
        self.state_to_latent = nn.Sequential(first, nn.ReLU())
        # channels: features -> channels * 2**(num_layers - 2) ... -> channels -> out_channels
        widths = [features, *(channels * 2 ** (num_layers - 2 - i) for i in range(num_layers - 1)), out_channels]
        layers: list[nn.Module] = []
        for i, kernel in enumerate(kernels):
            if i:
                layers.append(nn.ReLU())
            layers.append(nn.ConvTranspose2d(widths[i], widths[i + 1], kernel, stride=2, device=device))
        self.decoder = nn.Sequential(*layers)

    def forward(self, state: torch.Tensor, rnn_hidden: torch.Tensor) -> torch.Tensor:
        """Decodes ``[*batch, state_dim]`` and ``[*batch, belief_dim]`` to ``[*batch, C, H, W]``."""
        latent = self.state_to_latent(torch.cat([state, rnn_hidden], dim=-1))
        batch_shape = latent.shape[:-1]
        image = self.decoder(latent.reshape(-1, latent.shape[-1], 1, 1))
        return image.reshape(*batch_shape, *image.shape[-3:])


class DreamerActor(nn.Module):
    """Dreamer's actor: the mean and scale of the action distribution from the state
    and belief.

    An :class:`~cadence.modules.MLP` with ``2 * out_features`` outputs, split into a
    location and a scale mapped by a softplus biased so that a zero output gives
    ``std_bias``, bounded below by ``std_min_val``. Pair it with a ``TanhNormal`` in a
    probabilistic actor.

    Args:
        out_features: the size of the action.
        depth: the number of hidden layers.
        num_cells: the width of each hidden layer.
        activation_class: the activation between layers.
        std_bias: the scale given by a zero output.
        std_min_val: the smallest scale.
        device: where the parameters are created.

    Examples:
        >>> import torch
        >>> from cadence.modules.model_based import DreamerActor
        >>> actor = DreamerActor(out_features=2, depth=1, num_cells=8)
        >>> loc, scale = actor(torch.zeros(3, 4), torch.zeros(3, 6))
        >>> loc.shape, bool((scale > 0).all())
        (torch.Size([3, 2]), True)
    """

    def __init__(
        self,
        out_features: int,
        depth: int = 4,
        num_cells: int = 200,
        activation_class: type[nn.Module] = nn.ELU,
        std_bias: float = 5.0,
        std_min_val: float = 1e-4,
        device: DeviceLike | None = None,
    ) -> None:
        super().__init__()
        self.backbone = MLP(
            out_features=2 * out_features,
            depth=depth,
            num_cells=num_cells,
            activation_class=activation_class,
            device=device,
        )
        self.param_extractor = NormalParamExtractor(
            scale_mapping=f"biased_softplus_{std_bias}_{std_min_val}"
        )

    def forward(self, state: torch.Tensor, belief: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The location and scale of the action distribution."""
        return self.param_extractor(self.backbone(state, belief))


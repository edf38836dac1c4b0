"""Dreamer's imagination: ``DreamerEnv`` steps an RSSM prior and a reward model in latent
space, and ``DreamerDecoder`` decodes its latent states into observations.

The env's observations are the RSSM's latent ``"state"`` (stochastic) and ``"belief"``
(deterministic); its actions, rewards and done flags are the real env's. Imagined
rollouts start from latent states (the posterior states of real data, in training) and
carry gradients, so that an actor and a critic can be trained through them.

Examples:
    >>> import torch
    >>> from tensordict.nn import TensorDictModule
    >>> from cadence.data import Bounded
    >>> from cadence.envs.model_based.dreamer import DreamerDecoder, DreamerEnv
    >>> from cadence.modules import MLP
    >>> from cadence.modules.model_based import RSSMPrior, WorldModelWrapper
    >>> prior = RSSMPrior(None, hidden_dim=8, rnn_hidden_dim=8, state_dim=4, action_dim=1)
    >>> world_model = WorldModelWrapper(
    ...     TensorDictModule(prior, in_keys=["state", "belief", "action"],
    ...                      out_keys=["prior_mean", "prior_std", "state", "belief"]),
    ...     TensorDictModule(MLP(12, 1, num_cells=[8]), in_keys=["state", "belief"], out_keys=["reward"]))
    >>> decoder = TensorDictModule(MLP(12, 3, num_cells=[8]), in_keys=["state", "belief"],
    ...                            out_keys=["reco_observation"])
    >>> env = DreamerEnv(world_model, prior_shape=(4,), belief_shape=(8,), obs_decoder=decoder, batch_size=[2])
    >>> env.action_spec = Bounded(-1.0, 1.0, shape=(2, 1))
    >>> data = env.append_transform(DreamerDecoder()).rollout(5)
    >>> data["next", "belief"].shape, data["next", "reco_observation"].shape
    (torch.Size([2, 5, 8]), torch.Size([2, 5, 3]))
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModuleBase
from torch import nn

from cadence.data import Composite, Unbounded
from cadence.envs.common import EnvBase
from cadence.envs.model_based.common import ModelBasedEnvBase
from cadence.envs.transforms.base import Transform, TransformedEnv

__all__ = ["DreamerEnv", "DreamerDecoder"]

DeviceLike = torch.device | str | int
#: The latent entries: Dreamer's stochastic state and deterministic belief.
LATENT_KEYS = ("state", "belief")


class DreamerEnv(ModelBasedEnvBase):
    """Dreamer's imagination env: the RSSM prior and reward model stepped in latent space.

    The world model reads ``"state"``, ``"belief"`` and the action and writes the next
    ``"state"`` and ``"belief"`` (an :class:`~cadence.modules.model_based.RSSMPrior`)
    and the ``"reward"`` (e.g. an MLP of the new state and belief). These two latents are
    the env's observations and its state spec; the action, reward and done specs come
    from the real env (:meth:`set_specs_from_env`) or are set by hand. Imagination
    runs for a fixed horizon: the episode never ends unless the world model writes done
    flags itself, and a reset may start anywhere (``allow_done_after_reset``).

    ``reset(tensordict)`` starts from the latents the input holds (e.g. posterior states
    of real data, of any leading batch); ``reset()`` draws them from their specs (normal
    noise) with :attr:`rng`. ``set_seed`` also seeds the generators the world model's
    RSSM draws its states from.

    Args:
        world_model: the transition and reward models, e.g. a
            :class:`~cadence.modules.model_based.WorldModelWrapper`.
        prior_shape: the shape of the stochastic ``"state"`` (``(state_dim,)``).
        belief_shape: the shape of the ``"belief"`` (``(rnn_hidden_dim,)``).
        obs_decoder: an optional module reading the latents and writing a decoded
            observation (:meth:`decode_obs`, :class:`DreamerDecoder`).
        device: where the env's data and the models live.
        batch_size: the batch of latents the env steps.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from cadence.envs import GymEnv
        >>> from cadence.envs.model_based.dreamer import DreamerEnv
        >>> from cadence.modules import MLP
        >>> from cadence.modules.model_based import RSSMPrior, WorldModelWrapper
        >>> real_env = GymEnv("Pendulum-v1")
        >>> prior = RSSMPrior(real_env.action_spec, hidden_dim=8, rnn_hidden_dim=8, state_dim=4)
        >>> world_model = WorldModelWrapper(
        ...     TensorDictModule(prior, in_keys=["state", "belief", "action"], out_keys=["_", "_", "state", "belief"]),
        ...     TensorDictModule(MLP(12, 1, num_cells=[8]), in_keys=["state", "belief"], out_keys=["reward"]))
        >>> env = DreamerEnv(world_model, prior_shape=(4,), belief_shape=(8,))
        >>> env.set_specs_from_env(real_env)
        >>> start = TensorDict(state=torch.zeros(16, 4), belief=torch.zeros(16, 8), batch_size=[16])
        >>> _ = env.set_seed(0)
        >>> imagined = env.rollout(15, auto_reset=True, tensordict=start)
        >>> imagined.batch_size, imagined["next", "reward"].shape
        (torch.Size([16, 15]), torch.Size([16, 15, 1]))
    """

    def __init__(
        self,
        world_model: nn.Module,
        prior_shape: Sequence[int],
        belief_shape: Sequence[int],
        obs_decoder: TensorDictModuleBase | None = None,
        device: DeviceLike | None = None,
        batch_size: torch.Size | tuple[int, ...] | list[int] | None = None,
    ) -> None:
        super().__init__(world_model, device=device, batch_size=batch_size, allow_done_after_reset=True)
        if obs_decoder is not None and not isinstance(obs_decoder, nn.Module):
            raise TypeError(
                f"DreamerEnv: obs_decoder must be a torch.nn.Module (a TensorDictModule), got "
                f"{type(obs_decoder).__name__}"
            )
        self.obs_decoder = obs_decoder if obs_decoder is None or self.device is None else obs_decoder.to(self.device)
        self.prior_shape = torch.Size(prior_shape)
        self.belief_shape = torch.Size(belief_shape)
        latents = self._latent_spec()
        self.observation_spec = latents
        self.state_spec = latents.clone()

    def _latent_spec(self) -> Composite:
        """``"state"`` and ``"belief"``, unbounded, over the env's batch."""
        batch = self.batch_size
        return Composite(
            state=Unbounded(shape=(*batch, *self.prior_shape), device=self.device),
            belief=Unbounded(shape=(*batch, *self.belief_shape), device=self.device),
            shape=batch,
            device=self.device,
        )

    def set_specs_from_env(self, env: EnvBase) -> None:
        """Takes the action, reward and done specs of the real env ``env``, for this env's
        batch size and device; the observations stay the latents.

        If ``env`` has ``"state"``/``"belief"`` observations (primed for the real-world
        actor), their shapes must be ``prior_shape``/``belief_shape``.

        Args:
            env: the real env.

        Raises:
            ValueError: ``env``'s latent observations have other shapes.

        Examples:
            >>> from tensordict.nn import TensorDictModule
            >>> from cadence.envs import GymEnv
            >>> from cadence.envs.model_based.dreamer import DreamerEnv
            >>> from cadence.modules import MLP
            >>> from cadence.modules.model_based import WorldModelWrapper
        >>> model = WorldModelWrapper(  # the belief stays as it is in this toy model
        ...     TensorDictModule(MLP(7, 2), in_keys=["state", "belief", "action"], out_keys=["state"]),
        ...     TensorDictModule(MLP(6, 1), in_keys=["state", "belief"], out_keys=["reward"]))
            >>> env = DreamerEnv(model, prior_shape=(2,), belief_shape=(4,), batch_size=[3])
            >>> env.set_specs_from_env(GymEnv("Pendulum-v1"))
            >>> sorted(env.observation_spec.keys()), env.action_spec.shape
            (['belief', 'state'], torch.Size([3, 1]))
        """
        if not isinstance(env, EnvBase):
            raise TypeError(f"set_specs_from_env: expected an env (EnvBase), got {type(env).__name__}")
        real_observations = env.full_observation_spec
        for key, shape in (("state", self.prior_shape), ("belief", self.belief_shape)):
            if key in real_observations.keys():
                got = real_observations[key].shape[env.batch_dims :]
                if got != shape:
                    raise ValueError(
                        f"DreamerEnv.set_specs_from_env: the env's {key!r} observation has shape {tuple(got)} "
                        f"(batch dims left out), but this DreamerEnv's is {tuple(shape)}."
                    )
        self.full_action_spec = self._respec(env, env.full_action_spec)
        self.full_reward_spec = self._respec(env, env.full_reward_spec)
        self.full_done_spec = self._respec(env, env.full_done_spec)
        latents = self._latent_spec()
        self.full_observation_spec = latents
        self.full_state_spec = latents.clone()

    def decode_obs(self, tensordict: TensorDictBase, compute_latents: bool = False) -> TensorDictBase:
        """Decodes the latents of ``tensordict`` with the observation decoder.

        Args:
            tensordict: data holding ``"state"`` and ``"belief"`` (or, with
                ``compute_latents``, what the world model needs to compute them).
            compute_latents: run the world model on ``tensordict`` first.

        Returns:
            ``tensordict`` with the decoder's outputs written in.

        Raises:
            ValueError: the env has no observation decoder.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> from tensordict.nn import TensorDictModule
            >>> from cadence.envs.model_based.dreamer import DreamerEnv
            >>> from cadence.modules import MLP
            >>> from cadence.modules.model_based import WorldModelWrapper
        >>> model = WorldModelWrapper(  # the belief stays as it is in this toy model
        ...     TensorDictModule(MLP(7, 2), in_keys=["state", "belief", "action"], out_keys=["state"]),
        ...     TensorDictModule(MLP(6, 1), in_keys=["state", "belief"], out_keys=["reward"]))
            >>> decoder = TensorDictModule(MLP(6, 3), in_keys=["state", "belief"], out_keys=["reco_observation"])
            >>> env = DreamerEnv(model, prior_shape=(2,), belief_shape=(4,), obs_decoder=decoder)
            >>> data = TensorDict(state=torch.zeros(5, 2), belief=torch.zeros(5, 4), batch_size=[5])
            >>> env.decode_obs(data)["reco_observation"].shape
            torch.Size([5, 3])
        """
        if self.obs_decoder is None:
            raise ValueError(
                "DreamerEnv.decode_obs: this env has no observation decoder; build it with obs_decoder=..."
            )
        if compute_latents:
            tensordict = self._run_world_model(tensordict)
        return self.obs_decoder(tensordict)

    def _seeded_modules(self) -> Iterator[nn.Module]:
        yield self.world_model
        if self.obs_decoder is not None:
            yield self.obs_decoder


class DreamerDecoder(Transform):
    """Writes the decoded observations of a :class:`DreamerEnv`'s latents into its data.

    After every step and reset the observation decoder (the env's ``obs_decoder``, or
    the one given here) runs on the latents, so that an imagined rollout can be looked
    at (recorded as a video, say). The decoder's outputs join the observation spec,
    with the shapes and dtypes a trial run of the decoder on zeros gives.

    Args:
        obs_decoder: the decoder to use; by default the base env's ``obs_decoder``.
            Needed to use the transform outside an env (``transform(data)``).

    Examples:
        >>> import torch
        >>> from tensordict.nn import TensorDictModule
        >>> from cadence.data import Bounded
        >>> from cadence.envs.model_based.dreamer import DreamerDecoder, DreamerEnv
        >>> from cadence.modules import MLP
        >>> from cadence.modules.model_based import ObsDecoder
        >>> from cadence.modules.model_based import WorldModelWrapper
        >>> model = WorldModelWrapper(  # the belief stays as it is in this toy model
        ...     TensorDictModule(MLP(7, 2), in_keys=["state", "belief", "action"], out_keys=["state"]),
        ...     TensorDictModule(MLP(6, 1), in_keys=["state", "belief"], out_keys=["reward"]))
        >>> decoder = TensorDictModule(ObsDecoder(channels=2, latent_dim=6), in_keys=["state", "belief"],
        ...                            out_keys=["reco_pixels"])
        >>> env = DreamerEnv(model, prior_shape=(2,), belief_shape=(4,), obs_decoder=decoder)
        >>> env.action_spec = Bounded(-1.0, 1.0, shape=(1,))
        >>> env = env.append_transform(DreamerDecoder())
        >>> env.observation_spec["reco_pixels"].shape
        torch.Size([3, 64, 64])
        >>> env.rollout(2)["next", "reco_pixels"].shape
        torch.Size([2, 3, 64, 64])
    """

    def __init__(self, obs_decoder: TensorDictModuleBase | None = None) -> None:
        super().__init__()
        if obs_decoder is not None and not isinstance(obs_decoder, nn.Module):
            raise TypeError(
                f"DreamerDecoder: obs_decoder must be a torch.nn.Module (a TensorDictModule), got "
                f"{type(obs_decoder).__name__}"
            )
        self.obs_decoder = obs_decoder

    def _decoder(self) -> nn.Module:
        """The decoder given here, else the base env's."""
        if self.obs_decoder is not None:
            return self.obs_decoder
        container = self.container
        while container is not None and not isinstance(container, TransformedEnv):
            container = container.container
        decoder = getattr(container.base_env, "obs_decoder", None) if container is not None else None
        if decoder is None:
            where = "outside an env" if container is None else f"on {type(container.base_env).__name__}"
            raise ValueError(
                f"DreamerDecoder has no observation decoder {where}: pass one (DreamerDecoder(obs_decoder=...)) "
                "or use it on a DreamerEnv built with obs_decoder=..."
            )
        return decoder

    def _call(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self._decoder()(tensordict)

    def _reset(self, tensordict: TensorDictBase | None, tensordict_reset: TensorDictBase) -> TensorDictBase:
        return self._call(tensordict_reset)

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        decoder = self._decoder()
        with torch.no_grad():  # a trial run on zeros, for the decoded entries' shapes
            decoded = decoder(observation_spec.zero())
        for key in decoder.out_keys:
            value = decoded.get(key, None)
            if value is None:
                raise KeyError(
                    f"DreamerDecoder: the decoder lists {key!r} among its out_keys but wrote no such entry; "
                    f"it wrote {sorted(map(str, decoded.keys(True, True)))}."
                )
            observation_spec[key] = Unbounded(shape=value.shape, dtype=value.dtype, device=value.device)
        return observation_spec

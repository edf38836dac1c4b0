"""MO-Gymnasium (multi-objective gymnasium): ``MOGymWrapper`` around a built env, ``MOGymEnv`` by id.

An MO-Gymnasium env is a gymnasium env whose reward is a vector, one entry per objective,
described by the env's ``reward_space``. These wrappers are Cadence's gymnasium wrappers
(:class:`~cadence.envs.libs.gym.GymWrapper`, :class:`~cadence.envs.libs.gym.GymEnv`)
with the reward spec read from that space: ``Bounded`` (or ``Unbounded`` where no bound
is finite) of shape ``[*batch, n_objectives]`` in the space's dtype, rather than a
scalar reward of shape ``[*batch, 1]``. Everything else (observations, actions, done
flags, pixels, frame skip, seeding, vector envs) is the gymnasium wrapper's.

The array shortcut of gymnasium rollouts (:mod:`cadence.envs.libs.gym_simulator`) writes
one number per step and env into its reward arrays; these wrappers opt out of it, so
their rollouts, serial and parallel batches take the step loops, which keep the vector.

``MOGymEnv(name, num_envs=N)`` batches N copies in MO-Gymnasium's own synchronous vector
env (gymnasium's would store the rewards as scalars).

mo_gymnasium is an optional dependency, imported when an env is built; the examples
below start with a line that skips them where it is not installed.

Examples:
    >>> import pytest; mo_gymnasium = pytest.importorskip("mo_gymnasium")  # skips without mo_gymnasium
    >>> from cadence.envs.libs.mo_gym import MOGymEnv
    >>> env = MOGymEnv("deep-sea-treasure-v0")
    >>> env.reward_spec.shape
    torch.Size([2])
    >>> next_seed = env.set_seed(0)
    >>> env.rollout(5, break_when_any_done=False)["next", "reward"].shape
    torch.Size([5, 2])
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from cadence._utils import MAX_QUOTED, ClassProperty, quoted
from cadence.data import TensorSpec
from cadence.envs.libs.gym import GymEnv, GymWrapper, space_to_spec
from cadence.envs.libs.gym_backend import set_gym_backend

__all__ = ["MOGymEnv", "MOGymWrapper", "reward_space_of"]

_INSTALL_HINT = 'pip install "cadence[mo_gymnasium]"'


def _import_mo_gymnasium(caller: str = "MOGymEnv") -> Any:
    """Imports mo_gymnasium (which registers its envs with gymnasium), or raises an
    ImportError that says how to install it."""
    try:
        import mo_gymnasium
    except ImportError as err:
        raise ImportError(f"{caller} needs the mo_gymnasium library, which is not installed: {_INSTALL_HINT}.") from err
    return mo_gymnasium


def _registered_ids() -> list[str]:
    """The ids MO-Gymnasium registers with gymnasium ([] without mo_gymnasium)."""
    try:
        _import_mo_gymnasium()
    except ImportError:
        return []
    import gymnasium

    return sorted(
        env_id for env_id, spec in gymnasium.envs.registry.items()
        if isinstance(spec.entry_point, str) and spec.entry_point.startswith("mo_gymnasium")
    )


def _is_registered(registry: Mapping[str, Any], env_id: str) -> bool:
    """Whether ``env_id`` names an env of gymnasium's ``registry``: a registered id, or
    one without its ``-v<N>`` that gymnasium completes with the latest version."""
    if env_id in registry:
        return True
    prefix = f"{env_id}-v"
    return any(key.startswith(prefix) and key[len(prefix) :].isdigit() for key in registry)


def reward_space_of(env: Any) -> Any:
    """The reward space of one env of ``env`` (an MO-Gymnasium env, maybe wrapped, or a
    vector env of them), or ``None`` if it declares none.

    A vector env's own ``reward_space`` may be the batched one or the single one,
    depending on who built it, so the first sub-env's is read.

    Args:
        env: a ``gymnasium.Env`` or ``gymnasium.vector.VectorEnv``.

    Returns:
        A gymnasium space (a ``Box`` for MO-Gymnasium's envs), or ``None``.

    Examples:
        >>> import pytest; mo_gymnasium = pytest.importorskip("mo_gymnasium")  # skips without mo_gymnasium
        >>> reward_space_of(mo_gymnasium.make("deep-sea-treasure-v0")).shape
        (2,)
        >>> import gymnasium
        >>> reward_space_of(gymnasium.make("CartPole-v1")) is None
        True
    """
    import gymnasium

    if isinstance(env, gymnasium.vector.VectorEnv):
        try:
            return env.get_attr("reward_space")[0]
        except AttributeError:
            return None
    if hasattr(env, "get_wrapper_attr"):  # gymnasium >= 1.0: wrappers do not forward attributes
        try:
            return env.get_wrapper_attr("reward_space")
        except AttributeError:
            return None
    return getattr(env, "reward_space", None)


class MOGymWrapper(GymWrapper):
    """Wraps a built MO-Gymnasium env (or a vector env of them) as a Cadence env.

    As :class:`~cadence.envs.libs.gym.GymWrapper` (same arguments), but the reward spec
    is the env's ``reward_space``: ``reward`` has shape ``[*batch, n_objectives]``.
    The gymnasium backend is gymnasium while the specs are built (MO-Gymnasium's spaces
    are gymnasium's), whatever :func:`~cadence.envs.libs.gym_backend.set_gym_backend` says.

    Args:
        env: a ``gymnasium.Env`` with a vector ``reward_space`` (``mo_gymnasium.make(...)``),
            or a vector env of them (``mo_gymnasium.wrappers.vector.MOSyncVectorEnv``).
        **kwargs: the options of :class:`~cadence.envs.libs.gym.GymWrapper`
            (``categorical_action_encoding``, ``from_pixels``, ``frame_skip``, ``device``...).

    Raises:
        ValueError: the env declares no ``reward_space`` (a plain gymnasium env: use
            ``GymWrapper``).

    Examples:
        >>> import pytest; mo_gymnasium = pytest.importorskip("mo_gymnasium")  # skips without mo_gymnasium
        >>> env = MOGymWrapper(mo_gymnasium.make("mo-mountaincar-v0"), categorical_action_encoding=True)
        >>> env.reward_spec.shape, env.action_spec.shape
        (torch.Size([3]), torch.Size([]))
        >>> env.rand_step()["next", "reward"].shape
        torch.Size([3])
    """

    #: None: the array kernels hold one reward number per step and env; the step loops
    #: keep the vector.
    array_kernel = None

    #: the ids MO-Gymnasium registers (empty without mo_gymnasium)
    available_envs = ClassProperty(lambda cls: _registered_ids())
    #: the mo_gymnasium module (imported on first access)
    lib = ClassProperty(lambda cls: _import_mo_gymnasium(cls.__name__))

    def __init__(self, env: Any, **kwargs: Any) -> None:
        with set_gym_backend("gymnasium"):  # its spaces are gymnasium's
            super().__init__(env, **kwargs)

    def _build_specs(self) -> None:
        super()._build_specs()
        self.reward_spec = self._reward_spec()

    def _reward_spec(self) -> TensorSpec:
        space = reward_space_of(self._env)
        if space is None:
            raise ValueError(
                f"{type(self).__name__}: the env {quoted(self._env)} declares no reward_space, so its rewards are not "
                "multi-objective; wrap it with GymWrapper."
            )
        return space_to_spec(space, self.batch_size, True, self.device)

class MOGymEnv(GymEnv, MOGymWrapper):
    """An MO-Gymnasium env built from its id.

    As :class:`~cadence.envs.libs.gym.GymEnv`: keyword arguments that are not the
    wrapper's own go to ``mo_gymnasium.make``; ``num_envs=N`` builds MO-Gymnasium's
    synchronous vector env of N copies, stepped as one batch of size ``[N]`` (rewards
    ``[N, n_objectives]``).

    Args:
        env_name: the registered id, e.g. ``"deep-sea-treasure-v0"`` (see
            ``MOGymEnv.available_envs``).
        num_envs: batch N copies in one vector env (``None``/``0``: a single env).
        **kwargs: wrapper options and ``make`` keyword arguments.

    Raises:
        ImportError: mo_gymnasium (or a package the env needs) is not installed; the
            message says what to install.
        TypeError: ``env_name`` is not a str, or ``num_envs`` not an int.
        ValueError: the id is not registered (checked before gymnasium sees it: a path or
            a ``"module:Name-v0"`` id never reaches ``make``), or ``num_envs`` is negative.

    Examples:
        >>> import pytest; mo_gymnasium = pytest.importorskip("mo_gymnasium")  # skips without mo_gymnasium
        >>> env = MOGymEnv("deep-sea-treasure-v0", num_envs=3)
        >>> env.batch_size, env.reward_spec.shape
        (torch.Size([3]), torch.Size([3, 2]))
        >>> "deep-sea-treasure-v0" in MOGymEnv.available_envs
        True
        >>> MOGymEnv("../../etc/passwd")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: MOGymEnv: env_name '../../etc/passwd' is not a registered id (...). MO-Gymnasium registers: ...
    """

    @staticmethod
    def _make(env_name: str, num_envs: int | None, make_kwargs: dict[str, Any]) -> Any:
        if not isinstance(env_name, str):
            raise TypeError(
                f"MOGymEnv: env_name must be a registered id (a str such as 'deep-sea-treasure-v0'), got "
                f"{type(env_name).__name__} {quoted(env_name)}."
            )
        if num_envs is not None and (isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 0):
            error_type = ValueError if isinstance(num_envs, int) and not isinstance(num_envs, bool) else TypeError
            raise error_type(
                f"MOGymEnv: num_envs must be an int >= 1 (the copies of a vector env), or None/0 for a single env; "
                f"got {type(num_envs).__name__} {quoted(num_envs)}."
            )
        mo_gymnasium = _import_mo_gymnasium("MOGymEnv")
        import gymnasium

        # only ids of the registry reach gymnasium: its make would import the module of a
        # "module:Name-v0" id, and reports a malformed one (a path, say) with an error of its own
        if not _is_registered(gymnasium.envs.registry, env_name):
            raise ValueError(
                f"MOGymEnv: env_name {quoted(env_name)} is not a registered id (import the package that registers "
                f"it first). MO-Gymnasium registers: {', '.join(_registered_ids())}."
            )
        error = gymnasium.error
        try:
            if num_envs:
                make = functools.partial(mo_gymnasium.make, env_name, **make_kwargs)
                # next-step autoreset, which Cadence's masked resets cancel (see GymWrapper)
                return mo_gymnasium.wrappers.vector.MOSyncVectorEnv([make] * num_envs)
            return mo_gymnasium.make(env_name, **make_kwargs)
        except error.DependencyNotInstalled as exc:
            raise ImportError(f"MOGymEnv({quoted(env_name)}) needs a package that is not installed: {exc}") from exc
        except (error.NameNotFound, error.VersionNotFound, error.UnregisteredEnv) as exc:
            raise ValueError(
                f"MOGymEnv: no environment {quoted(env_name)} is registered by mo_gymnasium "
                f"({str(exc)[:MAX_QUOTED]}). Registered ids: {', '.join(_registered_ids())}."
            ) from exc


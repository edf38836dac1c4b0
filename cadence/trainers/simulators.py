"""Snapshots of the simulators inside an env, so that a resumed run steps on exactly
where the interrupted one stood.

A training checkpoint saves the learner's state, but the episodes in progress live in
the simulators: a gymnasium env's physics, its random generator, its time limit's step
count. :func:`simulator_state` reads them out of every simulator under a Cadence env
(``TransformedEnv``, ``SerialEnv``, ``GymEnv``, ``DMControlEnv``) and
:func:`load_simulator_state` writes them back into an env built the same way.

What can be saved, by simulator:

* gymnasium envs written in Python (classic control, toy text): the whole env object,
  pickled, restored attribute by attribute;
* gymnasium MuJoCo envs: the physics (``mujoco.mj_getState``, warm start included), the
  random generator and the wrappers' step counts;
* dm_control envs: what ``DMControlWrapper.get_simulator_state()`` returns.

Others (Box2D, Atari, ...) rebuild their internals when unpickled; for them
:func:`simulator_state` returns ``None`` and the resumed run starts new episodes.

Snapshots hold pickles, and unpickling runs code: a training checkpoint stores them
signed with its run's key, and unpickles them only when the signature checks out
(see ``checkpoint_files``). Never pass :func:`load_simulator_state` a state read from
a file you have not checked that way.

Examples:
    >>> from cadence.envs import GymEnv
    >>> env = GymEnv("Pendulum-v1")
    >>> _ = env.set_seed(0)
    >>> _ = env.rollout(5)
    >>> state = simulator_state(env)
    >>> twin = GymEnv("Pendulum-v1")
    >>> load_simulator_state(twin, state)
    >>> bool((twin._env.unwrapped.state == env._env.unwrapped.state).all())
    True
"""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np

from cadence.envs.common import EnvBase

__all__ = ["load_simulator_state", "simulator_state"]


def _simulators(env: EnvBase) -> list[Any]:
    """The backend wrappers under ``env``, in a fixed order (``GymWrapper``s,
    ``DMControlWrapper``s); raises ``TypeError`` for an env it cannot look into."""
    from cadence.envs.batched import SerialEnv
    from cadence.envs.libs.gym import GymWrapper
    from cadence.envs.transforms import TransformedEnv

    if isinstance(env, TransformedEnv):
        return _simulators(env.base_env)
    if isinstance(env, SerialEnv):
        env.start()
        return [wrapper for sub_env in env._envs for wrapper in _simulators(sub_env)]
    if isinstance(env, GymWrapper) or hasattr(env, "get_simulator_state"):
        return [env]
    raise TypeError(f"simulator_state: cannot look into a {type(env).__name__}; expected gymnasium or dm_control envs.")


def _wrapper_chain(gym_env: Any) -> list[Any]:
    chain = [gym_env]
    while hasattr(chain[-1], "env") and chain[-1] is not chain[-1].unwrapped:
        chain.append(chain[-1].env)
    return chain


def _wrapper_attributes(wrapper: Any) -> dict[str, bytes]:
    """A wrapper's own attributes (a time limit's step count, an order checker's flag,
    the passive checker's last data), each pickled; those that cannot be are left out."""
    saved = {}
    for name, value in vars(wrapper).items():
        if name == "env":
            continue
        try:
            saved[name] = pickle.dumps(value)
        except Exception:  # a handle or a callable: not part of the episode's state
            continue
    return saved


def _is_mujoco(unwrapped: Any) -> bool:
    return hasattr(unwrapped, "data") and hasattr(unwrapped, "model") and hasattr(unwrapped, "set_state")


def _gym_state(gym_env: Any) -> dict[str, Any] | None:
    chain = _wrapper_chain(gym_env)
    unwrapped = chain[-1]
    wrappers = [_wrapper_attributes(level) for level in chain[:-1]]
    if _is_mujoco(unwrapped):
        import mujoco

        kind = mujoco.mjtState.mjSTATE_INTEGRATION
        physics = np.empty(mujoco.mj_stateSize(unwrapped.model, kind))
        mujoco.mj_getState(unwrapped.model, unwrapped.data, physics, kind)
        generator = unwrapped.np_random.bit_generator.state
        return {"kind": "mujoco", "wrappers": wrappers, "physics": physics, "np_random": generator}
    if hasattr(unwrapped, "_ezpickle_args"):
        return None  # unpickling rebuilds it from its constructor's arguments: its state is lost
    try:
        blob = pickle.dumps(unwrapped)
    except Exception:  # an env holding handles (a window, a socket) cannot be saved
        return None
    return {"kind": "pickle", "wrappers": wrappers, "env": blob}


def _load_gym_state(gym_env: Any, state: dict[str, Any]) -> None:
    chain = _wrapper_chain(gym_env)
    unwrapped = chain[-1]
    if len(state["wrappers"]) != len(chain) - 1:
        raise ValueError(
            f"load_simulator_state: the saved env had {len(state['wrappers'])} wrappers, this one has {len(chain) - 1}."
        )
    for level, saved in zip(chain[:-1], state["wrappers"]):
        for name, value in saved.items():
            setattr(level, name, pickle.loads(value))
    if state["kind"] == "mujoco":
        import mujoco

        kind = mujoco.mjtState.mjSTATE_INTEGRATION
        mujoco.mj_setState(unwrapped.model, unwrapped.data, state["physics"], kind)
        mujoco.mj_forward(unwrapped.model, unwrapped.data)  # bodies' positions, sensors: derived from the state
        mujoco.mj_setState(unwrapped.model, unwrapped.data, state["physics"], kind)  # the warm start as it was
        unwrapped.np_random.bit_generator.state = state["np_random"]
    else:
        vars(unwrapped).update(vars(pickle.loads(state["env"])))


def simulator_state(env: EnvBase) -> list[Any] | None:
    """The state of every simulator under ``env``, or ``None`` if one of them cannot be
    saved (see the module's docstring).

    Args:
        env: a gymnasium or dm_control env, possibly transformed or in a ``SerialEnv``.

    Examples:
        >>> from cadence.envs import GymEnv, SerialEnv
        >>> len(simulator_state(SerialEnv(2, lambda: GymEnv("Pendulum-v1"))))
        2
    """
    states: list[Any] = []
    for wrapper in _simulators(env):
        if hasattr(wrapper, "get_simulator_state"):
            states.append({"kind": "wrapper", "state": wrapper.get_simulator_state()})
            continue
        state = _gym_state(wrapper._env)
        if state is None:
            return None
        states.append(state)
    return states


def load_simulator_state(env: EnvBase, states: list[Any]) -> None:
    """Writes :func:`simulator_state`'s output into the simulators of ``env``, an env
    built as the saved one was. A seed given to ``set_seed`` and not used yet is
    dropped: the simulators continue from the saved state, not from a new reset.

    Raises:
        ValueError: if ``env`` holds another number of simulators than the saved one.

    Examples:
        >>> from cadence.envs import GymEnv
        >>> load_simulator_state(GymEnv("Pendulum-v1"), [])
        Traceback (most recent call last):
        ...
        ValueError: load_simulator_state: the state holds 0 simulators, the env 1.
    """
    wrappers = _simulators(env)
    if len(wrappers) != len(states):
        raise ValueError(f"load_simulator_state: the state holds {len(states)} simulators, the env {len(wrappers)}.")
    for wrapper, state in zip(wrappers, states):
        if state["kind"] == "wrapper":
            wrapper.set_simulator_state(state["state"])
        else:
            _load_gym_state(wrapper._env, state)
        if hasattr(wrapper, "_pending_seed"):
            wrapper._pending_seed = None

"""The rollout shortcut of transformed envs: step the base env, then transform the steps.

A ``TransformedEnv`` rolling out step by step pays for its transforms at every step
(a few tensordict operations each, for every transform). When every transform of the
chain can transform consecutive steps at once (``Transform.steps_over_time``) and the
rollout takes random actions, ``rollout_over_time`` instead lets the base env run up
to its next done step (on its own shortcut, if it has one: ``EnvBase._steps_until_done``),
transforms that stretch of steps in one call per transform, and lays the stretch out
as the step-by-step loop would. Between stretches, done components are reset through
the transformed env, as in the generic loop; a transform that ends episodes itself
(``StepCounter(max_steps)``) bounds the stretch (``Transform._steps_before_done``).

The result is the generic rollout's, entry for entry (the tests compare them). As with
the gymnasium shortcut, the actions of the whole call are drawn from ``env.rng`` at
the start, so the generator moves on by ``max_steps`` draws even when the rollout stops
early.

Examples:
    >>> from cadence.envs import GymEnv
    >>> from cadence.envs.transforms import Compose, RewardSum, StepCounter, TransformedEnv
    >>> env = TransformedEnv(GymEnv("Pendulum-v1"), Compose(StepCounter(5), RewardSum()))
    >>> data = env.rollout(12, break_when_any_done=False)
    >>> data["next", "step_count"].squeeze(-1).tolist()
    [1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from tensordict import TensorDict, TensorDictBase

if TYPE_CHECKING:  # pragma: no cover - type hints only
    from cadence.envs.transforms.base import TransformedEnv

__all__ = ["rollout_over_time", "shortcut_applies"]


def shortcut_applies(env: TransformedEnv, policy: Callable[..., Any] | None, callback: Any,
                     return_contiguous: bool) -> bool:
    """Whether ``env.rollout`` may take the shortcut: random actions, no callback,
    contiguous output, transforms that work over time and leave the actions alone, one
    action, root done signals, no checks or auto-reset on the way, and a base env that
    reads nothing but its action from each step's input (no state spec: a stateless env
    would read the transformed state).

    Examples:
        >>> from cadence.envs import GymEnv
        >>> from cadence.envs.transforms import StepCounter, TimeMaxPool, TransformedEnv
        >>> shortcut_applies(TransformedEnv(GymEnv("CartPole-v1"), StepCounter()), None, None, True)
        True
        >>> env = TransformedEnv(GymEnv("CartPole-v1"), TimeMaxPool(in_keys=["observation"], T=2))
        >>> shortcut_applies(env, None, None, True)
        False
    """
    base = env.base_env
    return (
        policy is None
        and callback is None
        and return_contiguous
        and env.transform.steps_over_time
        and not (env.run_type_checks or env.auto_reset or base.run_type_checks or base.auto_reset)
        and len(env.action_keys) == 1
        and env.action_keys == base.action_keys
        and env._done_prefixes == [()]
        and base._done_prefixes == [()]
        and not base.full_state_spec.keys()
        and not env._has_dynamic_specs()
    )


def rollout_over_time(
    env: TransformedEnv,
    max_steps: int,
    *,
    policy: Callable[[TensorDictBase], TensorDictBase | None] | None,
    callback: Callable[..., Any] | None,
    auto_reset: bool,
    break_when_any_done: bool,
    break_when_all_done: bool,
    return_contiguous: bool,
    tensordict: TensorDictBase | None,
    set_truncated: bool,
) -> TensorDictBase | None:
    """``env.rollout`` on the shortcut (arguments as there); ``None`` when it does not apply.

    Examples:
        >>> from cadence.envs import GymEnv
        >>> from cadence.envs.transforms import InitTracker, TransformedEnv
        >>> env = TransformedEnv(GymEnv("CartPole-v1"), InitTracker())
        >>> data = rollout_over_time(env, 3, policy=None, callback=None, auto_reset=True,
        ...     break_when_any_done=True, break_when_all_done=False, return_contiguous=True,
        ...     tensordict=None, set_truncated=False)
        >>> data["is_init"].squeeze(-1).tolist()
        [True, False, False]
    """
    if not shortcut_applies(env, policy, callback, return_contiguous):
        return None
    if auto_reset:
        current = env.reset(tensordict)
    elif tensordict is None:
        return None  # the generic loop says what is missing
    else:
        current = tensordict
    action_key = env.action_keys[0]
    time_dim = env.batch_dims
    actions = env.full_action_spec[action_key].rand(torch.Size([max_steps]), generator=env.rng)
    stretches: list[TensorDictBase] = []
    taken = 0
    while True:
        limit = env.transform._steps_before_done(current)
        budget = max_steps - taken if limit is None else max(1, min(max_steps - taken, limit))
        stretch, next_input = _stretch(env, current, actions[taken : taken + budget], action_key, time_dim)
        stretches.append(stretch)
        taken += stretch.batch_size[time_dim]
        if taken >= max_steps:
            break
        done = stretch.get(("next", env.done_key))[(slice(None),) * time_dim + (-1,)]
        if done.any():
            if break_when_any_done or (break_when_all_done and done.all()):
                break
            current, _ = env._reset_done(next_input)
        else:
            current = next_input
    result = stretches[0] if len(stretches) == 1 else torch.cat(stretches, dim=time_dim)
    result.names = [None] * time_dim + ["time"]
    if set_truncated:
        env._mark_truncated(result)
    return result


def _stretch(
    env: TransformedEnv, current: TensorDictBase, actions: torch.Tensor, action_key: Any, time_dim: int
) -> tuple[TensorDictBase, TensorDictBase]:
    """Steps from ``current`` to the base env's next done step (or the end of ``actions``);
    returns the steps, laid out as the generic loop records them, and the next input."""
    data = env.transform.inv(current.copy())
    base_actions = env.transform.inv(
        TensorDict({action_key: actions}, batch_size=actions.shape[: time_dim + 1], device=env.device)
    ).get(action_key)
    next_steps = env.base_env._steps_until_done(data, base_actions)
    next_steps = env.transform._step_over_time(data, next_steps)
    env._complete_done(next_steps)
    steps = next_steps.batch_size[time_dim]
    # the input of step k > 0 is step_mdp of step k - 1: the first input's entries, with
    # the outputs of the step before written over them
    repeated = current.unsqueeze(time_dim).expand(next_steps.batch_size).copy()
    repeated.set("next", next_steps)
    inputs = env._step_mdp(repeated)
    first = current.exclude(action_key, "next").unsqueeze(time_dim)
    try:
        roots = first if steps == 1 else torch.cat([first, inputs[(slice(None),) * time_dim + (slice(0, -1),)]], time_dim)
    except (RuntimeError, KeyError) as err:
        raise ValueError(
            f"The rollout's steps do not stack ({err}); the env's data does not keep to its specs: "
            f"check_env_specs(env) names the entry."
        ) from err
    roots.set(action_key, actions[:steps].movedim(0, time_dim))
    roots.set("next", next_steps)
    return roots, inputs[(slice(None),) * time_dim + (-1,)].clone()

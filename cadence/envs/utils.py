"""Helpers around the environment loop: moving to the next step, reading done signals,
checking specs against real data, random policies and the exploration mode.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from cadence.envs.utils import step_mdp
    >>> data = TensorDict({
    ...     "observation": torch.zeros(3), "action": torch.ones(1),
    ...     "next": {"observation": torch.ones(3), "reward": torch.ones(1)},
    ... }, [])
    >>> sorted(step_mdp(data).keys())
    ['observation']
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch
from tensordict import TensorDict, TensorDictBase

from cadence.data import Composite, Stacked, TensorSpec, Unbounded
from cadence.data.dtypes import cast
from cadence.envs.env_specs import as_tuple_key
from cadence.envs.marl_grouping import MarlGroupMapType, check_marl_grouping  # the reference's home for them too
# TorchRL's users import them from here; they live with the exploration modules, in the policies' layer
from cadence.modules.exploration import ExplorationType, exploration_type, set_exploration_type

if TYPE_CHECKING:  # pragma: no cover - imported for type hints only
    from cadence.envs.common import EnvBase

NestedKey = str | tuple[str, ...]

__all__ = [
    "ExplorationType",
    "MarlGroupMapType",
    "RandomPolicy",
    "SpecCheckError",
    "SpecMismatchError",
    "action_in_spec_dtype",
    "check_marl_grouping",
    "policy_on_device",
    "check_env_specs",
    "exploration_type",
    "make_composite_from_td",
    "set_exploration_type",
    "step_mdp",
    "terminated_or_truncated",
]

def _as_key_list(keys: NestedKey | Sequence[NestedKey] | None) -> list[NestedKey]:
    if keys is None:
        return []
    if isinstance(keys, (str, tuple)):
        return [keys]
    return list(keys)


def step_mdp(
    tensordict: TensorDictBase,
    next_tensordict: TensorDictBase | None = None,
    keep_other: bool = True,
    exclude_reward: bool = True,
    exclude_done: bool = False,
    exclude_action: bool = True,
    reward_keys: NestedKey | Sequence[NestedKey] = "reward",
    done_keys: NestedKey | Sequence[NestedKey] = "done",
    action_keys: NestedKey | Sequence[NestedKey] = "action",
) -> TensorDictBase:
    """Builds the input of the next step from the output of the last one.

    The entries under ``"next"`` move to the root. Rewards (and, if asked, actions
    and done flags) are left out, and other root entries are kept when
    ``keep_other`` is true (the ``"next"`` values win where both exist).

    Args:
        tensordict: a step's data, holding its results under ``"next"``.
        next_tensordict: if given, the result is written into it (in place) too.
        keep_other: keep the root entries that ``"next"`` does not hold.
        exclude_reward: leave the reward keys out.
        exclude_done: leave the done keys out.
        exclude_action: leave the action keys out.
        reward_keys: the reward key(s).
        done_keys: the done key(s) (also ``"terminated"``/``"truncated"`` beside them).
        action_keys: the action key(s).

    Returns:
        The tensordict of the next step.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> data = TensorDict({"obs": torch.zeros(2), "action": torch.ones(1), "hidden": torch.ones(1),
        ...     "next": {"obs": torch.ones(2), "reward": torch.ones(1), "done": torch.zeros(1, dtype=torch.bool)}}, [])
        >>> out = step_mdp(data)
        >>> sorted(out.keys()), out["obs"].tolist()
        (['done', 'hidden', 'obs'], [1.0, 1.0])
    """
    if next_tensordict is None and keep_other:
        fast = _flat_step_mdp(tensordict, exclude_reward, exclude_done, exclude_action, reward_keys, done_keys,
                              action_keys)
        if fast is not None:
            return fast
    return _step_mdp(tensordict, next_tensordict, keep_other, exclude_reward, exclude_done, exclude_action,
                     reward_keys, done_keys, action_keys)


def _step_mdp(
    tensordict: TensorDictBase,
    next_tensordict: TensorDictBase | None,
    keep_other: bool,
    exclude_reward: bool,
    exclude_done: bool,
    exclude_action: bool,
    reward_keys: NestedKey | Sequence[NestedKey],
    done_keys: NestedKey | Sequence[NestedKey],
    action_keys: NestedKey | Sequence[NestedKey],
) -> TensorDictBase:
    """:func:`step_mdp` by tensordict operations: any layout (the reference behaviour)."""
    next_td = tensordict.get("next")
    excluded = _excluded_keys(exclude_reward, exclude_done, reward_keys, done_keys)
    out = next_td.exclude(*excluded) if excluded else next_td.copy()
    _drop_emptied(out, excluded)
    if keep_other:
        root_excluded: list[NestedKey] = ["next"]
        if exclude_action:
            root_excluded += _as_key_list(action_keys)
        root = tensordict.exclude(*root_excluded, *excluded)
        _drop_emptied(root, [*root_excluded, *excluded])
        root.update(out)
        out = root
    if next_tensordict is not None:
        next_tensordict.update(out)
        return next_tensordict
    return out


def exclude_pruned(data: TensorDictBase, keys: Sequence[NestedKey]) -> TensorDictBase:
    """``data.exclude(*keys)`` without the sub-tensordicts that leaving nested keys out
    emptied: a ``("player0", "reward")`` reward leaves no empty ``"player0"`` behind (as in
    the reference's ``step_mdp``), so that the steps of a rollout keep the same keys.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> data = TensorDict({"obs": torch.zeros(1), "player0": {"reward": torch.ones(1)}}, [])
        >>> list(exclude_pruned(data, [("player0", "reward")]).keys())
        ['obs']
    """
    out = data.exclude(*keys)
    _drop_emptied(out, keys)
    return out


def _drop_emptied(data: TensorDictBase, excluded: Sequence[NestedKey]) -> None:
    """Removes, in place, the sub-tensordicts of ``data`` that leaving the nested
    ``excluded`` keys out emptied, deepest first."""
    for key in excluded:
        if not isinstance(key, tuple):
            continue
        for depth in range(len(key) - 1, 0, -1):
            sub = data.get(key[:depth], None)
            if isinstance(sub, TensorDictBase) and not any(True for _ in sub.keys()):
                del data[key[:depth]]


def _excluded_keys(
    exclude_reward: bool, exclude_done: bool, reward_keys: NestedKey | Sequence[NestedKey],
    done_keys: NestedKey | Sequence[NestedKey],
) -> list[NestedKey]:
    """The ``"next"`` entries :func:`step_mdp` leaves out (a done key brings its level's
    ``"terminated"`` and ``"truncated"``)."""
    excluded: list[NestedKey] = []
    if exclude_reward:
        excluded += _as_key_list(reward_keys)
    if exclude_done:
        for key in _as_key_list(done_keys):
            excluded.append(key)
            prefix = key[:-1] if isinstance(key, tuple) else ()
            excluded += [_unwrap(prefix + ("terminated",)), _unwrap(prefix + ("truncated",))]
    return excluded


def _unwrap(key: tuple[str, ...]) -> NestedKey:
    return key[0] if len(key) == 1 else key


def _flat_step_mdp(
    tensordict: TensorDictBase,
    exclude_reward: bool,
    exclude_done: bool,
    exclude_action: bool,
    reward_keys: NestedKey | Sequence[NestedKey],
    done_keys: NestedKey | Sequence[NestedKey],
    action_keys: NestedKey | Sequence[NestedKey],
) -> TensorDictBase | None:
    """:func:`step_mdp` by moving entries between dicts, for the step loop's common layout:
    plain TensorDicts all the way down (nested groups of agents included); ``None`` for
    anything else, such as a lazy stack (the tensordict operations serve it)."""
    if type(tensordict) is not TensorDict:
        return None
    next_td = tensordict.get("next", None)
    if type(next_td) is not TensorDict:
        return None
    next_keys = tuple(_excluded_keys(exclude_reward, exclude_done, reward_keys, done_keys))
    excluded = _by_level(next_keys)
    root_excluded = _by_level(("next", *next_keys, *(_as_key_list(action_keys) if exclude_action else ())))
    entries = _moved_entries(tensordict, next_td, root_excluded, excluded, ())
    if entries is None:
        return None
    names = tensordict.names if tensordict.batch_dims else None
    return TensorDict(entries, batch_size=tensordict.batch_size, device=tensordict.device, names=names)


@functools.lru_cache(maxsize=256)
def _by_level(keys: tuple[NestedKey, ...]) -> dict[tuple[str, ...], frozenset[str]]:
    """Keys grouped by their level, ``{prefix: {names at that level}}`` (cached: an env asks
    with the same keys at every step; the result is not to be changed)."""
    levels: dict[tuple[str, ...], set[str]] = {}
    for key in keys:
        path = as_tuple_key(key)
        levels.setdefault(path[:-1], set()).add(path[-1])
    return {prefix: frozenset(names) for prefix, names in levels.items()}


_NOTHING: frozenset[str] = frozenset()


def _moved_entries(
    root: TensorDict | None,
    nxt: TensorDict | None,
    root_excluded: dict[tuple[str, ...], frozenset[str]],
    next_excluded: dict[tuple[str, ...], frozenset[str]],
    prefix: tuple[str, ...],
) -> dict[str, Any] | None:
    """The entries at ``prefix`` of the next step's input: ``root``'s then ``nxt``'s (which
    win), less the excluded keys (by level); a sub-tensordict that the exclusions emptied
    is left out. ``None`` where the layout is not plain TensorDicts of tensors."""
    entries: dict[str, Any] = {}
    nested: dict[str, list[TensorDict | None]] = {}
    for slot, source, dropped in ((0, root, root_excluded.get(prefix, _NOTHING)),
                                  (1, nxt, next_excluded.get(prefix, _NOTHING))):
        if source is None:
            continue
        for key, value in source.items():
            if key in dropped:
                continue
            if isinstance(value, torch.Tensor):
                entries[key] = value
            elif type(value) is TensorDict:
                nested.setdefault(key, [None, None])[slot] = value
            else:
                return None
    for key, (sub_root, sub_next) in nested.items():
        if key in entries:
            return None  # a tensor in one, a tensordict in the other
        sub = _moved_entries(sub_root, sub_next, root_excluded, next_excluded, prefix + (key,))
        if sub is None:
            return None
        template = sub_next if sub_next is not None else sub_root
        assert template is not None
        had_entries = any(True for _ in template.keys()) or (sub_root is not None and any(True for _ in sub_root.keys()))
        if sub or not had_entries:
            entries[key] = _new_tensordict(sub, template.batch_size, template.device)
    return entries


_new_tensordict = getattr(TensorDict, "_new_unsafe", TensorDict)  # entries taken from valid tensordicts


def terminated_or_truncated(
    data: TensorDictBase,
    full_done_spec: Composite | None = None,
    key: str | None = "_reset",
    write_full_false: bool = False,
) -> bool:
    """Aggregates the done signals of each done level into one mask.

    For every level of ``data`` that holds ``"done"``, ``"terminated"`` or
    ``"truncated"`` (or the levels of ``full_done_spec`` if given), the union of
    the signals is written under ``key`` at that level.

    Args:
        data: the tensordict to read (and write the masks into).
        full_done_spec: the env's done spec, to read the done levels from.
        key: where to write each level's mask; ``None`` writes nothing.
        write_full_false: also write masks that are all ``False``.

    Returns:
        Whether any level has a ``True`` entry.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> data = TensorDict({"terminated": torch.tensor([[False], [True]]),
        ...     "truncated": torch.tensor([[False], [False]])}, [2])
        >>> terminated_or_truncated(data)
        True
        >>> data["_reset"].squeeze(-1).tolist()
        [False, True]
    """
    if full_done_spec is not None:
        leaves = list(full_done_spec.keys(include_nested=True, leaves_only=True))
    else:
        leaves = list(data.keys(include_nested=True, leaves_only=True))
    prefixes: dict[tuple[str, ...], None] = {}
    for leaf in leaves:
        leaf = (leaf,) if isinstance(leaf, str) else leaf
        if leaf[-1] in ("done", "terminated", "truncated"):
            prefixes[leaf[:-1]] = None
    any_true = False
    for prefix in prefixes:
        mask = None
        for name in ("done", "terminated", "truncated"):
            value = data.get(prefix + (name,), None)
            if value is not None:
                mask = value.clone() if mask is None else mask | value
        if mask is None:
            continue
        level_any = bool(mask.any())
        any_true = any_true or level_any
        if key is not None and (level_any or write_full_false):
            data.set(prefix + (key,), mask)
    return any_true


def make_composite_from_td(data: TensorDictBase, unsqueeze_null_shapes: bool = True) -> Composite:
    """Builds a ``Composite`` whose leaves are ``Unbounded`` specs shaped like ``data``.

    Args:
        data: the tensordict to describe.
        unsqueeze_null_shapes: give leaves that have no dimension beyond the batch
            a trailing dimension of one (as rewards and done flags have).

    Returns:
        A Composite with the shape of ``data.batch_size``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> spec = make_composite_from_td(TensorDict({"obs": torch.zeros(4, 3), "n": {"x": torch.zeros(4, dtype=torch.long)}}, [4]))
        >>> spec["obs"].shape, spec["n", "x"].shape, spec["n", "x"].dtype
        (torch.Size([4, 3]), torch.Size([4, 1]), torch.int64)
    """
    children: dict[str, TensorSpec] = {}
    for key, value in data.items():
        if isinstance(value, TensorDictBase):
            children[key] = make_composite_from_td(value, unsqueeze_null_shapes)
        else:
            shape = value.shape
            if unsqueeze_null_shapes and len(shape) == data.batch_dims:
                shape = torch.Size([*shape, 1])
            children[key] = Unbounded(shape=shape, dtype=value.dtype, device=value.device)
    return Composite(children, shape=data.batch_size)


class SpecCheckError(AssertionError):
    """Raised by ``check_env_specs`` when real data disagrees with the specs.

    It is an ``AssertionError``, as the reference documentation promises.

    Examples:
        >>> issubclass(SpecCheckError, AssertionError)
        True
    """


class SpecMismatchError(ValueError):
    """Raised when data does not fit its spec: a value outside its spec under
    ``run_type_checks`` (a NaN action, say), or a backend whose observations do not
    have the shape of its declared space. The message names the key, the spec and
    what came. ``check_env_specs`` reports it as a ``SpecCheckError``.

    Examples:
        >>> issubclass(SpecMismatchError, ValueError)
        True
    """


def action_in_spec_dtype(action: torch.Tensor, spec: TensorSpec, key: Any = "action") -> torch.Tensor:
    """``action`` in its spec's dtype, cast within its kind: a float of another precision
    into a float spec (the env computes in its spec's precision), a bool or integer into a
    discrete one (a policy's int64 one-hot into a bool spec, or the reverse). Envs and
    collectors call it when a policy's action comes in another dtype than the spec's.

    Raises:
        TypeError: a float into a discrete spec (it may hold fractions), or a discrete
            value into a float spec, naming the key and both dtypes.

    Examples:
        >>> import torch
        >>> from cadence.data import Bounded, OneHot
        >>> action_in_spec_dtype(torch.tensor([0, 1]), OneHot(2, dtype=torch.bool)).tolist()
        [False, True]
        >>> action_in_spec_dtype(torch.tensor([0.5]), Bounded(0, 1, shape=(1,), dtype=torch.float64)).dtype
        torch.float64
        >>> action_in_spec_dtype(torch.tensor([1.0, 0.0]), OneHot(2))
        Traceback (most recent call last):
        ...
        TypeError: Action 'action': expected dtype torch.bool (spec OneHot(...)), got torch.float32.
    """
    if action.dtype == spec.dtype:
        return action
    if action.dtype.is_floating_point == spec.dtype.is_floating_point and not action.is_complex():
        return cast(action, spec.dtype)
    raise TypeError(f"Action {key!r}: expected dtype {spec.dtype} (spec {spec}), got {action.dtype}.")


def policy_on_device(policy: Callable[[TensorDictBase], Any], device: torch.device | None) -> Callable[..., Any]:
    """``policy`` as an env on ``device`` calls it: given its input on the device of its
    parameters, its output brought back to ``device``. The policy itself when the two
    devices agree (or it has no parameters), so that nothing is added to its calls.

    Examples:
        >>> import torch
        >>> from tensordict.nn import TensorDictModule
        >>> policy = TensorDictModule(torch.nn.Linear(3, 1), ["observation"], ["action"])
        >>> policy_on_device(policy, torch.device("cpu")) is policy
        True
    """
    module_device = None
    if isinstance(policy, torch.nn.Module):
        tensor = next(itertools.chain(policy.parameters(), policy.buffers()), None)
        module_device = None if tensor is None else tensor.device
    if module_device is None or device is None or module_device == torch.device(device):
        return policy

    def on_its_device(tensordict: TensorDictBase) -> TensorDictBase:
        moved = tensordict.to(module_device)
        out = policy(moved)
        return (moved if out is None else out).to(device)

    return on_its_device


def read_entry(data: TensorDictBase, key: NestedKey, spec: TensorSpec, default: Any = None, *, leading: int = 0) -> Any:
    """``data[key]``, or a list of one tensor per element where ``spec`` stacks elements of
    different shapes (heterogeneous agents, whose values cannot form one tensor).

    The elements are read along the spec's stack dim however the data are stacked (a
    batched env may stack its workers' data lazily along the env dim, say).

    Args:
        data: the TensorDict to read.
        key: the entry.
        spec: the entry's spec.
        default: returned when the entry is absent.
        leading: how many leading dims ``data`` has beyond the spec's (a rollout's time dim).

    Examples:
        >>> import torch
        >>> from tensordict import LazyStackedTensorDict, TensorDict
        >>> from cadence.data import Unbounded
        >>> spec = torch.stack([Unbounded(shape=(3,)), Unbounded(shape=(5,))])
        >>> agents = LazyStackedTensorDict.lazy_stack([TensorDict(o=torch.zeros(3)), TensorDict(o=torch.zeros(5))])
        >>> [v.shape for v in read_entry(agents, "o", spec)]
        [torch.Size([3]), torch.Size([5])]
    """
    if not isinstance(spec, Stacked):
        return data.get(key, default)
    path = (key,) if isinstance(key, str) else tuple(key)
    parent = data if len(path) == 1 else data.get(path[:-1], None)
    if parent is None:
        return default
    values = [part.get(path[-1], None) for part in parent.unbind(leading + spec.stack_dim)]
    return default if any(v is None for v in values) else values


def check_in_spec(spec: TensorSpec, value: Any, what: str) -> None:
    """Raises ``SpecMismatchError`` naming ``what`` (the key), the spec, why and the
    value, if ``value`` is not in ``spec``: another dtype or shape, or a value outside
    the domain (NaN in a ``Bounded`` spec, a masked-out category...). This is the check
    that ``run_type_checks`` runs on every input and output of an env.

    Args:
        spec: the spec of the entry.
        value: what came.
        what: the entry, for the message (``"step() input 'action'"``).

    Examples:
        >>> import torch
        >>> from cadence.data import Bounded
        >>> check_in_spec(Bounded(-1.0, 1.0, shape=(1,)), torch.zeros(1), "'action'")
        >>> check_in_spec(Bounded(-1.0, 1.0, shape=(1,)), torch.full((1,), float("nan")), "'action'")
        Traceback (most recent call last):
        ...
        cadence.envs.utils.SpecMismatchError: 'action' lies outside its spec Bounded(...): ... NaN in 1 of 1 element(s) ...
    """
    if spec.is_in(value):
        return
    if isinstance(value, torch.Tensor) and value.dtype != spec.dtype:
        raise SpecMismatchError(
            f"{what}: its spec {spec!r} has dtype {spec.dtype}, but the value has dtype {value.dtype}: {value}"
        )
    if (
        isinstance(value, torch.Tensor)
        and not spec.is_dynamic
        and (value.ndim < spec.ndim or value.shape[value.ndim - spec.ndim :] != spec.shape)
    ):
        raise SpecMismatchError(
            f"{what}: its spec {spec!r} has shape {tuple(spec.shape)}, but the value has shape "
            f"{tuple(value.shape)}: {value}"
        )
    try:
        spec.assert_is_in(value)
        reason = "it is not in the spec"
    except ValueError as err:
        reason = str(err)
    raise SpecMismatchError(f"{what} lies outside its spec {spec!r}: {reason}. The value: {value}")


def _shapes_agree(spec_shape: torch.Size, shape: torch.Size) -> bool:
    if len(spec_shape) != len(shape):
        return False
    return all(expected in (-1, got) for expected, got in zip(spec_shape, shape))


def _auto_reset_replaced_keys(env: EnvBase) -> set[tuple[str, ...]]:
    """The ``"next"`` observation keys that an auto-resetting env fills with NaN (or
    zero) at done steps, on purpose (``auto_reset_replace``)."""
    if not (env.auto_reset and env.auto_reset_replace):
        return set()
    return {("next", *((key,) if isinstance(key, str) else key)) for key in env.full_observation_spec.keys(True, True)}


def _unmask_auto_reset(env: EnvBase, spec: TensorSpec, value: torch.Tensor, step: TensorDictBase) -> torch.Tensor:
    """``value`` with its auto-reset placeholders (done steps) replaced by a value of
    the spec, so that only the real observations are checked against it."""
    done = step.get(("next", *((env.done_key,) if isinstance(env.done_key, str) else env.done_key)))
    if done.numel() != step.batch_size.numel():  # a done entry below the root: nothing to align with
        return value
    done = done.reshape(*step.batch_size, *([1] * (value.ndim - step.batch_dims))).expand_as(value)
    return torch.where(done, spec.project(torch.zeros_like(value)), value)


def check_env_specs(
    env: EnvBase,
    return_contiguous: bool = True,
    check_dtype: bool = True,
    seed: int | None = None,
    tensordict: TensorDictBase | None = None,
    break_when_any_done: bool | str = False,
    run_type_checks: bool = True,
) -> None:
    """Checks the specs of an env against the data of a short rollout.

    A three-step rollout is compared, key by key, with ``env.fake_tensordict()``:
    the same keys, the same shapes (``-1`` spec dims match any size) and, with
    ``check_dtype``, the same dtypes. Values must also lie in their specs.

    The rollout runs with the env's ``run_type_checks`` on (it is off on the hot path
    of ``step``/``rollout``): every input the env reads and every output it writes is
    checked against its spec as it happens, so that a bad value is reported at the
    step and key where it came, and the generic step-by-step loop is used rather than
    a backend's rollout shortcut. A last rollout, with the env's own setting, checks
    that a contiguous rollout (the shortcut, where there is one) works too.

    Args:
        env: the env to check.
        return_contiguous: also check that a contiguous rollout stacks (skipped
            for dynamic specs).
        check_dtype: compare dtypes too.
        seed: if given, the env is seeded first.
        tensordict: an optional input for the rollout's reset.
        break_when_any_done: passed to ``rollout``.
        run_type_checks: turn the env's ``run_type_checks`` on during the checked
            rollout (restored afterwards).

    Raises:
        SpecCheckError: naming the key, what the specs say and what came; this
            includes the env's own checks (``run_type_checks``: a NaN action or
            observation, say) and a backend whose data does not fit its declared
            spaces (both ``SpecMismatchError`` on the hot path), with their message.

    Examples:
        >>> from cadence.envs.custom import PendulumEnv
        >>> check_env_specs(PendulumEnv(), seed=0)
    """
    if seed is not None:
        env.set_seed(seed)
    fake = env.fake_tensordict()
    checks_before = env.run_type_checks
    env.run_type_checks = checks_before or run_type_checks
    try:
        # Steps are kept apart (a lazy stack) so that a step whose shapes differ from
        # the first one's is reported by key rather than failing to stack.
        rollout = env.rollout(
            3,
            return_contiguous=False,
            tensordict=tensordict,
            break_when_any_done=bool(break_when_any_done),
            auto_reset=True,
        )
    except SpecMismatchError as err:
        raise SpecCheckError(str(err)) from err
    finally:
        env.run_type_checks = checks_before
    specs = env._step_spec()
    replaced = _auto_reset_replaced_keys(env)
    # each action met the mask of legal moves of its own step (run_type_checks checked it
    # then); the mask the specs hold now is the last position's, so it is left out here
    masked_actions = {as_tuple_key(key) for key in env.action_keys if getattr(specs[key], "mask", None) is not None}
    for t in range(rollout.batch_size[-1]):
        step = rollout[..., t]
        real_keys = set(step.keys(include_nested=True, leaves_only=True))
        fake_keys = set(fake.keys(include_nested=True, leaves_only=True))
        if fake_keys != real_keys:
            missing = sorted(map(str, fake_keys - real_keys))
            extra = sorted(map(str, real_keys - fake_keys))
            raise SpecCheckError(
                f"The env's data and specs hold different keys at step {t}: in the specs but not in the "
                f"data: {missing}; in the data but not in the specs: {extra}."
            )
        for key in sorted(fake_keys, key=str):
            spec, got = specs[key], read_entry(step, key, specs[key], leading=step.batch_dims - env.batch_dims)
            if as_tuple_key(key) in masked_actions:
                spec = spec.clone()
                spec.update_mask(None)
            # agents that differ in shape are compared one by one
            if isinstance(spec, Stacked):
                parts = [(s, g, f" (element {i})") for i, (s, g) in enumerate(zip(spec.specs, got))]
            else:
                parts = [(spec, got, "")]
            for part_spec, part, which in parts:
                if not _shapes_agree(part_spec.shape, part.shape):
                    raise SpecCheckError(
                        f"Key {key!r}{which}: the spec has shape {tuple(part_spec.shape)} but the env produced "
                        f"shape {tuple(part.shape)} at step {t}."
                    )
                if check_dtype and part_spec.dtype != part.dtype:
                    raise SpecCheckError(
                        f"Key {key!r}{which}: the spec has dtype {part_spec.dtype} but the env produced dtype "
                        f"{part.dtype} at step {t}."
                    )
            if key in replaced:
                got = _unmask_auto_reset(env, spec, got, step)
            if not spec.is_in(got):
                try:
                    spec.assert_is_in(got)
                    reason = ""
                except ValueError as err:
                    reason = f": {err}"
                raise SpecCheckError(
                    f"Key {key!r}: the env produced values outside its spec {spec!r} at step {t}{reason}."
                )
    if return_contiguous and not env._has_dynamic_specs():
        env.rollout(3, break_when_any_done=bool(break_when_any_done), tensordict=tensordict)


class RandomPolicy:
    """A policy that writes random actions drawn from an action spec.

    Args:
        action_spec: the spec to sample from (a leaf or a Composite of actions).
        action_key: where to write the action when ``action_spec`` is a leaf.
        generator: the random generator to draw with; a fresh one seeded with
            ``0`` if not given, so runs repeat exactly.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from cadence.data import Bounded
        >>> policy = RandomPolicy(Bounded(-1.0, 1.0, shape=(2,)), generator=torch.Generator().manual_seed(0))
        >>> policy(TensorDict({}, []))["action"].shape
        torch.Size([2])
    """

    def __init__(
        self,
        action_spec: TensorSpec,
        action_key: NestedKey = "action",
        generator: torch.Generator | None = None,
    ) -> None:
        self.action_spec = action_spec
        self.action_key = action_key
        self.generator = generator if generator is not None else torch.Generator().manual_seed(0)

    def __call__(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Writes a random action into ``tensordict`` and returns it."""
        if isinstance(self.action_spec, Composite):
            tensordict.update(self.action_spec.rand(generator=self.generator))
        else:
            tensordict.set(self.action_key, self.action_spec.rand(generator=self.generator))
        return tensordict

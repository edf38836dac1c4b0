"""One step's results as a plain dict of tensors, for the step loop's hot path.

A ``TensorDict`` checks and normalises every key and value it is given; on the step path
of a ``TransformedEnv`` (the simulator's outputs, then each transform's reads and writes,
then the done flags completed) that costs more than the arithmetic. :class:`StepValues`
holds the same entries in a ``dict`` and offers the few methods a transform's ``_step``
uses on its ``next_tensordict``: ``get`` (with or without a default), ``set``, ``in``,
``exclude``, ``keys``/``items``, ``batch_size``/``batch_dims``/``device``. The step's
``TensorDict`` is built once at the end (:meth:`StepValues.to_tensordict`).

Keys are stored as TensorDict reads them: a string, or a tuple of strings for a nested
entry (a one-element tuple is the string).

Examples:
    >>> import torch
    >>> values = StepValues({"observation": torch.zeros(3)}, torch.Size([]))
    >>> values.set("reward", torch.ones(1)).get(("reward",)).tolist()
    [1.0]
    >>> values.set(("agent", "done"), torch.zeros(1, dtype=torch.bool))
    StepValues(keys=['observation', 'reward', ('agent', 'done')], batch_size=torch.Size([]))
    >>> td = values.to_tensordict()
    >>> sorted(td.keys(True, True), key=str)
    [('agent', 'done'), 'observation', 'reward']
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterable, KeysView, Sequence
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.utils import NestedKey

from cadence.envs.env_specs import as_tuple_key

__all__ = ["StepValues", "any_done", "entry_key", "keep_preset"]

_REQUIRED = object()


def entry_key(key: NestedKey) -> str | tuple[str, ...]:
    """``key`` as :class:`StepValues` stores it: a string, or a tuple of two or more strings.

    Examples:
        >>> entry_key(("observation",)), entry_key(("agents", "reward"))
        ('observation', ('agents', 'reward'))
    """
    if type(key) is str:
        return key
    if len(key) == 1:
        return key[0]
    return tuple(key)


#: Nested entries with dims of their own after the batch's (a group of agents' agent dim),
#: outer ones first, with those dims (``EnvBase._group_dims``).
GroupDims = Sequence[tuple[tuple[str, ...], torch.Size]]


def shape_groups(data: TensorDictBase, groups: GroupDims) -> TensorDictBase:
    """Gives the nested tensordicts of ``data`` (and of its ``"next"``) the batch size their
    specs give them: ``data``'s batch dims, then the group's own. A TensorDict built from a
    step's entries under tuple keys has the root's batch size at every level; stacking
    ``env.step``'s outputs gives the groups theirs. Returns ``data``.

    Examples:
        >>> data = TensorDict({("agent", "obs"): torch.zeros(5, 3, 2)}, batch_size=[5])
        >>> shape_groups(data, [(("agent",), torch.Size([3]))])["agent"].batch_size
        torch.Size([5, 3])
    """
    for key, dims in groups:
        for part in (data, data.get("next", None)):
            group = None if part is None else part.get(key, None)
            if isinstance(group, TensorDictBase):
                group.batch_size = torch.Size([*data.batch_size, *dims])
    return data


def input_entries(td: TensorDictBase) -> dict[Any, torch.Tensor]:
    """The entries of a step's input ``td`` (``"next"`` left out), nested ones under tuple keys.

    Examples:
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"obs": torch.zeros(1), "agent": {"x": torch.ones(1)}, "next": {"obs": torch.ones(1)}})
        >>> sorted(map(str, input_entries(td)))
        ["('agent', 'x')", 'obs']
    """
    return {key: value for key, value in td.items(True, True)
            if key != "next" and not (type(key) is tuple and key[0] == "next")}


def flat_entries(entries: dict[str, Any]) -> dict[Any, torch.Tensor]:
    """A step's entries as a backend builds them, nested ones in dicts or TensorDicts
    (a group's, say), with the nested ones under tuple keys, as :class:`StepValues` keys them.

    Examples:
        >>> from tensordict import TensorDict
        >>> entries = {"done": torch.zeros(1), "agent": {"obs": torch.ones(2), "info": TensorDict(x=torch.ones(2))}}
        >>> sorted(map(str, flat_entries(entries)))
        ["('agent', 'info', 'x')", "('agent', 'obs')", 'done']
    """
    values: dict[Any, torch.Tensor] = {}
    for key, value in entries.items():
        if isinstance(value, dict):
            values.update(((key, *as_tuple_key(sub)), leaf) for sub, leaf in flat_entries(value).items())
        elif isinstance(value, TensorDictBase):
            values.update(((key, *as_tuple_key(sub)), leaf) for sub, leaf in value.items(True, True))
        else:
            values[key] = value
    return values


def any_done(done: torch.Tensor) -> bool:
    """Whether any entry of a done flag is set (one element read as a bool: the common
    single env, without a reduction per step).

    Examples:
        >>> any_done(torch.tensor([False])), any_done(torch.tensor([[False], [True]]))
        (False, True)
    """
    return bool(done) if done.numel() == 1 else bool(done.any())


class StepValues:
    """The entries of one step, keyed as TensorDict keys them (see the module).

    Args:
        entries: key -> tensor (keys as :func:`entry_key` stores them; not copied).
        batch_size: the env's batch size.
        device: the env's device (``None``: none).

    Examples:
        >>> import torch
        >>> values = StepValues({"reward": torch.ones(1)}, torch.Size([]))
        >>> "reward" in values, values.get("done", None), values.batch_dims
        (True, None, 0)
    """

    __slots__ = ("entries", "batch_size", "device")

    def __init__(
        self, entries: dict[Any, torch.Tensor], batch_size: torch.Size, device: torch.device | None = None
    ) -> None:
        self.entries = entries
        self.batch_size = batch_size
        self.device = device

    @property
    def batch_dims(self) -> int:
        """The number of batch dimensions."""
        return len(self.batch_size)

    def get(self, key: NestedKey, default: Any = _REQUIRED) -> Any:
        """The entry at ``key``; ``default`` if absent (a ``KeyError`` naming it without one).

        Examples:
            >>> StepValues({}, torch.Size([])).get("x")
            Traceback (most recent call last):
            ...
            KeyError: "key 'x' not found in the step's entries []"
        """
        value = self.entries.get(key if type(key) is str else entry_key(key), _REQUIRED)
        if value is _REQUIRED:
            if default is _REQUIRED:
                raise KeyError(f"key {key!r} not found in the step's entries {list(self.entries)}")
            return default
        return value

    def set(self, key: NestedKey, value: torch.Tensor) -> StepValues:
        """Writes ``value`` at ``key``; returns ``self``."""
        self.entries[key if type(key) is str else entry_key(key)] = value
        return self

    def __contains__(self, key: NestedKey) -> bool:
        return entry_key(key) in self.entries

    def exclude(self, *keys: NestedKey) -> StepValues:
        """A new StepValues without ``keys`` (and without what lies under a nested key given).

        Examples:
            >>> values = StepValues({"a": torch.ones(1), ("b", "c"): torch.ones(1)}, torch.Size([]))
            >>> list(values.exclude("b").keys())
            ['a']
        """
        if all(type(key) is str for key in keys):  # the common case: top-level names, a set lookup each
            names = set(keys)
            return StepValues(
                {k: v for k, v in self.entries.items() if (k if type(k) is str else k[0]) not in names},
                self.batch_size, self.device,
            )
        dropped = [(entry_key(key),) if type(entry_key(key)) is str else entry_key(key) for key in keys]

        def kept(key: Any) -> bool:
            path = (key,) if type(key) is str else key
            return not any(path[: len(prefix)] == prefix for prefix in dropped)

        return StepValues({k: v for k, v in self.entries.items() if kept(k)}, self.batch_size, self.device)

    def select(self, *keys: NestedKey, strict: bool = True) -> StepValues:
        """A new StepValues with ``keys`` only (and what lies under a nested key given).

        Raises:
            KeyError: with ``strict``, a key that holds nothing.

        Examples:
            >>> values = StepValues({"a": torch.ones(1), ("b", "c"): torch.ones(1)}, torch.Size([]))
            >>> list(values.select("b", "z", strict=False).keys())
            [('b', 'c')]
        """
        selected = [(entry_key(key),) if type(entry_key(key)) is str else entry_key(key) for key in keys]

        def under(key: Any, prefix: tuple[str, ...]) -> bool:
            path = (key,) if type(key) is str else key
            return path[: len(prefix)] == prefix

        if strict:
            for prefix in selected:
                if not any(under(key, prefix) for key in self.entries):
                    raise KeyError(f"key {prefix!r} not found in the step's entries {list(self.entries)}")
        return StepValues(
            {k: v for k, v in self.entries.items() if any(under(k, prefix) for prefix in selected)},
            self.batch_size, self.device,
        )

    def __delitem__(self, key: NestedKey) -> None:
        """Removes the entry at ``key`` (a ``KeyError`` if there is none)."""
        del self.entries[entry_key(key)]

    def keys(self, include_nested: bool = True, leaves_only: bool = True) -> KeysView[Any]:
        """The keys of the entries: every leaf's full key (TensorDict's ``keys(True, True)``).

        Raises:
            TypeError: asked for another view (sub-tensordicts are not held here).
        """
        if not (include_nested and leaves_only):
            raise TypeError("StepValues.keys() gives the leaves' full keys only (keys(True, True))")
        return self.entries.keys()

    def items(self, include_nested: bool = True, leaves_only: bool = True) -> ItemsView[Any, torch.Tensor]:
        """The entries: every leaf with its full key (TensorDict's ``items(True, True)``).

        Raises:
            TypeError: asked for another view (sub-tensordicts are not held here).
        """
        if not (include_nested and leaves_only):
            raise TypeError("StepValues.items() gives the leaves with their full keys only (items(True, True))")
        return self.entries.items()

    def update(self, other: Iterable[tuple[NestedKey, torch.Tensor]] | dict[Any, torch.Tensor]) -> StepValues:
        """Writes every entry of ``other`` (a dict or pairs); returns ``self``."""
        pairs = other.items() if isinstance(other, dict) else other
        for key, value in pairs:
            self.entries[key if type(key) is str else entry_key(key)] = value
        return self

    def to_tensordict(self, groups: GroupDims = ()) -> TensorDictBase:
        """The entries as a TensorDict of ``batch_size`` (nested keys become sub-tensordicts,
        a group of ``groups`` with its own dims after the batch's: :func:`shape_groups`).

        Examples:
            >>> StepValues({("a", "b"): torch.zeros(2, 1)}, torch.Size([2])).to_tensordict()["a"].batch_size
            torch.Size([2])
            >>> values = StepValues({("a", "b"): torch.zeros(2, 1)}, torch.Size([]))
            >>> values.to_tensordict([(("a",), torch.Size([2]))])["a"].batch_size
            torch.Size([2])
        """
        nested: dict[str, Any] = {}
        for key, value in self.entries.items():
            if type(key) is str:
                nested[key] = value
                continue
            level = nested
            for part in key[:-1]:
                level = level.setdefault(part, {})
            level[key[-1]] = value
        return shape_groups(TensorDict(nested, batch_size=self.batch_size, device=self.device), groups)

    def __repr__(self) -> str:
        return f"StepValues(keys={list(self.entries)}, batch_size={self.batch_size})"


def keep_preset(values: StepValues, tensordict: Any) -> None:
    """Adds what the policy wrote for the next step in the step's input (a recurrent state,
    say: a dict of entries under the input's ``"next"``) to the step's results where the env
    wrote nothing, as ``env.step()`` keeps it.

    Examples:
        >>> results = StepValues({"reward": torch.ones(1)}, torch.Size([]))
        >>> step_input = StepValues({"next": {"hidden": torch.zeros(1), "reward": torch.zeros(1)}}, torch.Size([]))
        >>> keep_preset(results, step_input)
        >>> sorted(results.keys()), results.get("reward").tolist()
        (['hidden', 'reward'], [1.0])
    """
    preset = tensordict.entries.get("next") if isinstance(tensordict, StepValues) else None
    if preset:
        entries = values.entries
        for key, value in preset.items():
            if key not in entries:
                entries[key] = value

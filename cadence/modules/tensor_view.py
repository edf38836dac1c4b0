"""A tensor-level view of tensordict modules, for hot loops (collectors, losses).

A ``TensorDictModule`` of a plain ``torch.nn.Module`` reads tensors at its ``in_keys``,
calls the module and writes its ``out_keys``. Building a tensordict for every step only
to do that costs more than a small network's forward pass; :func:`compile_policy` turns
a policy made of such modules (alone, or in a ``TensorDictSequential``, followed by a
``QValueModule``'s greedy choice or ``OrnsteinUhlenbeckProcessModule`` or
``AdditiveGaussianModule`` exploration) into a
function on a plain ``dict`` of tensors that does the same arithmetic in the same order,
so that its results are the module's, bit for bit (the tests compare them). The dict keys
nested entries by tuples (a group's ``("agents", "observation")``), as the step loop does.
In a sequence, a member that does not compile (a ``ProbabilisticActor``, a user's own
module, one that writes under ``"next"``) is called on one tensordict of the step's entries
and the rest still runs on tensors. Any other policy gives ``None`` and the collector calls
it on tensordicts.

Examples:
    >>> import torch
    >>> from tensordict.nn import TensorDictModule
    >>> policy = TensorDictModule(torch.nn.Linear(3, 1), in_keys=["observation"], out_keys=["action"])
    >>> step = compile_policy(policy)
    >>> values = {"observation": torch.zeros(4, 3)}
    >>> step(values)
    >>> values["action"].shape
    torch.Size([4, 1])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule, TensorDictModuleBase, TensorDictSequential

__all__ = ["TensorStep", "compile_policy", "policy_step", "tensordict_step"]

Values = dict[str, torch.Tensor]
TensorStep = Callable[[Values], None]


def _plain_module(module: Any) -> bool:
    """Whether ``module`` has no hooks that a direct call of its pieces would skip."""
    return not (module._forward_hooks or module._forward_pre_hooks)


def _value_keys(keys: Any) -> list[Any] | None:
    """``keys`` as the step's dict keys them (a string, or a tuple of strings for a nested
    entry: a group's ``("agents", "action")``); ``None`` if any is something else or lies
    under ``"next"`` (what a policy writes for the next step goes through a tensordict)."""
    found = []
    for key in keys:
        if type(key) is tuple and len(key) == 1:
            key = key[0]
        if type(key) is str:
            if key == "next":
                return None
        elif type(key) is not tuple or key[0] == "next" or not all(type(part) is str for part in key):
            return None
        found.append(key)
    return found


def _held(values: Values) -> list[str]:
    """The step's keys, for an error message (nested ones as tuples)."""
    return sorted(map(str, values))


def _compile_module(module: TensorDictModule) -> TensorStep | None:
    from cadence.modules.actors import Actor

    if type(module).forward is not TensorDictModule.forward and not (type(module) is Actor and not module.safe):
        return None
    inner = module.module
    if (
        isinstance(inner, TensorDictModuleBase)
        or module._kwargs is not None
        or module.method is not None
        or module.method_kwargs
        or module.inplace is not True
        or not _plain_module(module)
    ):
        return None
    in_keys, out_keys = _value_keys(module.in_keys), _value_keys(module.out_keys)
    if in_keys is None or out_keys is None:
        return None
    single = len(out_keys) == 1
    out_key = out_keys[0] if single else None

    def step(values: Values) -> None:
        try:
            inputs = [values[key] for key in in_keys]
        except KeyError as err:
            raise KeyError(
                f"The policy module {type(inner).__name__} reads {in_keys}, but the step holds "
                f"{_held(values)}: {err.args[0]!r} is missing."
            ) from None
        out = inner(*inputs)
        if single and isinstance(out, torch.Tensor):
            values[out_key] = out  # type: ignore[index]
            return
        outs = (out,) if isinstance(out, torch.Tensor) else tuple(out)
        for key, value in zip(out_keys, outs):
            values[key] = value

    return step


def _compile_ou(module: Any, batch: torch.Size) -> TensorStep | None:
    """``OrnsteinUhlenbeckProcessModule.forward`` on tensors: its own ``add_noise``."""
    keys = _value_keys([module.action_key, module.noise_key, module.steps_key, module.is_init_key])
    if not _plain_module(module) or keys is None:
        return None
    action_key, noise_key, steps_key, is_init_key = keys

    def step(values: Values) -> None:
        action = values.get(action_key)
        if action is None:
            raise KeyError(
                f"OrnsteinUhlenbeckProcessModule: the step holds no action at {action_key!r} (put the module after "
                f"the policy); it holds {_held(values)}"
            )
        if not module.exploring():
            return
        values[action_key], values[noise_key], values[steps_key] = module.add_noise(
            action, values.get(noise_key), values.get(steps_key), values.get(is_init_key), batch)

    return step


def _compile_tanh(module: Any) -> TensorStep | None:
    """A ``TanhModule`` on a dict: each in key squashed into its out key, by the module's own ops."""
    in_keys, out_keys = _value_keys(module.in_keys), _value_keys(module.out_keys)
    if in_keys is None or out_keys is None:
        return None
    keys = list(zip(in_keys, out_keys))

    def step(values: Values) -> None:
        for index, (in_key, out_key) in enumerate(keys):
            value = values.get(in_key)
            if value is None:
                raise KeyError(f"TanhModule: the step holds nothing at {in_key!r}; it holds {_held(values)}")
            values[out_key] = module.squash(index, value)

    return step


def _compile_gaussian(module: Any) -> TensorStep | None:
    """``AdditiveGaussianModule.forward`` on tensors: its own ``add_noise``."""
    keys = _value_keys([module.action_key])
    if not _plain_module(module) or keys is None:
        return None
    action_key = keys[0]

    def step(values: Values) -> None:
        action = values.get(action_key)
        if action is None:
            raise KeyError(
                f"AdditiveGaussianModule: the step holds no action at {action_key!r}; it holds {_held(values)}"
            )
        if module.exploring():
            values[action_key] = module.add_noise(action)

    return step


def _compile_qvalue(module: Any) -> TensorStep | None:
    """A ``QValueModule`` on a dict: its own :meth:`~cadence.modules.actors.QValueModule.greedy`
    on the action values (and mask), its three out keys written."""
    masked = module.action_mask_key is not None
    keys = _value_keys([module.action_value_key, *module.out_keys,
                        *([module.action_mask_key] if masked else [])])
    if not _plain_module(module) or keys is None:
        return None
    values_key, action_key, out_values_key, chosen_key = keys[:4]
    mask_key = keys[4] if masked else None
    greedy = module.greedy

    def step(values: Values) -> None:
        action_values = values.get(values_key)
        if action_values is None:
            raise KeyError(f"QValueModule: the step holds no action values at {values_key!r}; it holds {_held(values)}")
        mask = None
        if mask_key is not None:
            mask = values.get(mask_key)
            if mask is None:
                raise KeyError(f"QValueModule: the step holds no action mask at {mask_key!r}; it holds {_held(values)}")
        action, chosen = greedy(action_values, mask)
        values[action_key] = action
        values[out_values_key] = action_values
        values[chosen_key] = chosen

    return step


def tensordict_step(policy: Any, batch_size: torch.Size | tuple[int, ...]) -> TensorStep | None:
    """A policy that does not compile to tensors (a ``ProbabilisticActor``, an
    ``EGreedyModule``, a recurrent module, a plain function on tensordicts...) as a step on
    the entries' dict: it is called on one TensorDict of the step's entries, as a tensordict
    loop calls it, and what it writes goes back into the dict, nested entries under tuple
    keys. What it writes under ``"next"`` (a recurrent state for the next step, say) goes
    into the dict's ``"next"`` entry, a dict of those entries, which the loop hands to the
    step's results (the env's own results win, as ``env.step`` has it). ``None`` for what
    cannot be called.

    Examples:
        >>> import torch
        >>> from tensordict.nn import TensorDictModule
        >>> step = tensordict_step(TensorDictModule(torch.nn.Linear(2, 1), ["obs"], ["action"]), torch.Size([]))
        >>> values = {"obs": torch.zeros(2)}
        >>> step(values)
        >>> sorted(values)
        ['action', 'obs']
        >>> step = tensordict_step(lambda td: td.set(("next", "hidden"), torch.ones(1)), torch.Size([]))
        >>> step(values)
        >>> values["next"]["hidden"].tolist()
        [1.0]
    """
    if not callable(policy):
        return None
    batch_size = torch.Size(batch_size)

    def step(values: Values) -> None:
        td = TensorDict(values, batch_size=batch_size)
        out = policy(td)
        for key, value in (td if out is None else out).items(True, True):  # nested ones under tuple keys
            if type(key) is tuple and key[0] == "next":
                written = values.get("next")
                if not isinstance(written, dict):
                    written = values["next"] = {}
                written[key[1] if len(key) == 2 else key[1:]] = value
            elif key == "next":
                raise TypeError(f"the policy {type(policy).__name__} wrote a tensor at 'next', where the step's "
                                "results go")
            elif values.get(key) is not value:
                values[key] = value

    return step


def policy_step(policy: Any, batch_size: torch.Size | tuple[int, ...] = ()) -> TensorStep | None:
    """``policy`` as a step on the entries' dict: compiled to its arithmetic
    (:func:`compile_policy`) where it can be, else called on one TensorDict of the entries
    (:func:`tensordict_step`); ``None`` for what cannot be called.

    Examples:
        >>> import torch
        >>> step = policy_step(lambda td: td.set("action", torch.ones(1)))
        >>> values = {}
        >>> step(values)
        >>> values["action"].tolist()
        [1.0]
    """
    return compile_policy(policy, batch_size) or tensordict_step(policy, batch_size)


def compile_policy(policy: Any, batch_size: torch.Size | tuple[int, ...] = ()) -> TensorStep | None:
    """Turns ``policy`` into a function on a dict of tensors, or ``None`` if it cannot.

    The result reads and writes the same keys as ``policy`` would on a tensordict
    holding the same entries, with the same arithmetic: it calls the wrapped
    ``nn.Module`` of each ``TensorDictModule`` directly, and runs the exploration
    modules' noise from their own generators and buffers (their ``eps``/``sigma``
    annealed by ``.step()`` are read at each call).

    Args:
        policy: a ``TensorDictModule`` of a plain module, a ``TanhModule``, a
            ``QValueModule``, an exploration module, or a ``TensorDictSequential`` of
            those (whose other members run on a tensordict of the step's entries);
            anything else gives ``None``.
        batch_size: the batch size of the tensordicts the policy would be called on
            (the env's); the exploration modules read it.

    Returns:
        A function ``step(values)`` that updates the dict ``values`` in place, or ``None``.

    Examples:
        >>> import torch
        >>> from tensordict.nn import TensorDictModule, TensorDictSequential
        >>> seq = TensorDictSequential(
        ...     TensorDictModule(torch.nn.Linear(2, 2), ["observation"], ["hidden"]),
        ...     TensorDictModule(torch.nn.Tanh(), ["hidden"], ["action"]),
        ... )
        >>> compile_policy(seq) is not None, compile_policy(lambda td: td)
        (True, None)
    """
    from cadence.modules.actors import QValueModule, TanhModule
    from cadence.modules.exploration import AdditiveGaussianModule, OrnsteinUhlenbeckProcessModule

    batch_size = torch.Size(batch_size)
    if type(policy) is TanhModule:
        return _compile_tanh(policy)
    if type(policy) is QValueModule:
        return _compile_qvalue(policy)
    if type(policy) is OrnsteinUhlenbeckProcessModule:
        return _compile_ou(policy, batch_size)
    if type(policy) is AdditiveGaussianModule:
        return _compile_gaussian(policy)
    if isinstance(policy, TensorDictSequential):
        if (
            type(policy).forward is not TensorDictSequential.forward
            or policy.inplace not in (True, None)
            or policy._select_before_return
            or policy.partial_tolerant
            or not _plain_module(policy)
        ):
            return None
        # members that do not compile (a ProbabilisticActor, a user's own module) run on one
        # tensordict of the step's entries; the others on tensors
        steps = [policy_step(module, batch_size) for module in policy.module]
        if any(step is None for step in steps):
            return None
        runnable: list[TensorStep] = steps  # type: ignore[assignment]

        def run_all(values: Values) -> None:
            for step in runnable:
                step(values)

        return run_all
    if isinstance(policy, TensorDictModule):
        return _compile_module(policy)
    return None

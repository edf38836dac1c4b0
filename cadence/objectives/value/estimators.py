"""Value estimators as modules: ``TD0Estimator``, ``TD1Estimator``, ``TDLambdaEstimator``, ``GAE``.

An estimator reads ``[*B, T]`` data (several trajectories one after the other along the
last batch dim, the time dim): the reward and the ``done``/``terminated`` flags under
``"next"``, and the state values, which its ``value_network`` computes on the root data
(``V(s_t)``) and on the ``"next"`` data (``V(s_{t+1})``), or which are already in the data
when ``value_network`` is ``None``. ``forward`` writes the advantage and the value target;
``value_estimate`` returns the value target only (what a loss regresses to).

The network runs on shallow copies of the data and only its value entry is written back:
a value network that also writes other entries (an actor-critic writing ``"action"``)
leaves the data's own entries as they were.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import TensorDictModule
    >>> value_net = TensorDictModule(torch.nn.Linear(3, 1), ["observation"], ["state_value"])
    >>> data = TensorDict({
    ...     "observation": torch.randn(2, 5, 3),
    ...     "next": {"observation": torch.randn(2, 5, 3), "reward": torch.ones(2, 5, 1),
    ...              "done": torch.zeros(2, 5, 1, dtype=torch.bool),
    ...              "terminated": torch.zeros(2, 5, 1, dtype=torch.bool)},
    ... }, [2, 5])
    >>> data = GAE(gamma=0.99, lmbda=0.95, value_network=value_net)(data)
    >>> data["advantage"].shape, data["value_target"].requires_grad
    (torch.Size([2, 5, 1]), False)
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.nn import set_skip_existing
from tensordict.utils import NestedKey

from cadence.objectives.value import functional

__all__ = ["GAE", "TD0Estimator", "TD1Estimator", "TDLambdaEstimator", "ValueEstimatorBase"]


def _standardize(tensor: torch.Tensor) -> torch.Tensor:
    # a floor on the spread: constant data gives zeros instead of a division by zero
    return (tensor - tensor.mean()) / tensor.std().clamp_min(1e-6)


class ValueEstimatorBase(torch.nn.Module):
    """The parent of the value estimators: keys, the value network, running it.

    Args:
        value_network: a ``TensorDictModule``-like network writing the value entry
            (``tensor_keys.value``), or ``None`` when the data holds the values already.
        shifted: run the network once, on the root and the ``"next"`` data concatenated
            along time, instead of twice (with the same parameters for both).
        differentiable: let gradients flow through the values; otherwise the estimate runs
            under ``torch.no_grad()``.
        skip_existing: passed to ``tensordict.nn.set_skip_existing`` while the network runs
            (``True``: entries already in the data are not recomputed); ``None`` leaves it.
        advantage_key, value_target_key, value_key: the names of those entries (also
            ``set_keys(advantage=..., value_target=..., value=...)``).
        device: where ``gamma``/``lmbda`` live.
        time_dim: the time dim of the data (default: its last batch dim).

    Examples:
        >>> TD0Estimator(gamma=0.9, value_network=None).tensor_keys.value
        'state_value'
    """

    @dataclasses.dataclass
    class _AcceptedKeys:
        """The entries an estimator reads and writes, by role."""

        advantage: NestedKey = "advantage"
        value_target: NestedKey = "value_target"
        value: NestedKey = "state_value"
        reward: NestedKey = "reward"
        done: NestedKey = "done"
        terminated: NestedKey = "terminated"

    default_keys = _AcceptedKeys

    def __init__(
        self,
        *,
        value_network: torch.nn.Module | None,
        shifted: bool = False,
        differentiable: bool = False,
        skip_existing: bool | None = None,
        advantage_key: NestedKey | None = None,
        value_target_key: NestedKey | None = None,
        value_key: NestedKey | None = None,
        device: torch.device | str | None = None,
        time_dim: int | None = None,
    ) -> None:
        super().__init__()
        if value_network is not None and not isinstance(value_network, torch.nn.Module):
            raise TypeError(
                f"{type(self).__name__}: value_network must be a torch.nn.Module (a TensorDictModule) or None, "
                f"got {type(value_network).__name__}."
            )
        self.value_network = value_network
        self.shifted = bool(shifted)
        self.differentiable = bool(differentiable)
        self.skip_existing = skip_existing
        self.time_dim = time_dim
        self._device = torch.device(device) if device is not None else None
        self.tensor_keys = self._AcceptedKeys()
        given = {"advantage": advantage_key, "value_target": value_target_key, "value": value_key}
        self.set_keys(**{role: key for role, key in given.items() if key is not None})

    def _register_coefficient(self, name: str, value: float | torch.Tensor) -> None:
        self.register_buffer(name, torch.as_tensor(value, dtype=torch.get_default_dtype(), device=self._device))

    # ------------------------------------------------------------------ keys
    def set_keys(self, **kwargs: NestedKey) -> ValueEstimatorBase:
        """Renames the entries the estimator reads or writes, by role; returns the estimator.

        Raises:
            ValueError: a role the estimator does not have.

        Examples:
            >>> TD0Estimator(gamma=0.9, value_network=None).set_keys(value="state_action_value").tensor_keys.value
            'state_action_value'
        """
        roles = {field.name for field in dataclasses.fields(self.tensor_keys)}
        unknown = sorted(set(kwargs) - roles)
        if unknown:
            raise ValueError(f"{type(self).__name__}.set_keys: unknown roles {unknown}; the roles are {sorted(roles)}.")
        for role, key in kwargs.items():
            if not isinstance(key, (str, tuple)):
                raise TypeError(f"{type(self).__name__}.set_keys: {role} must be a str or a tuple of str, got {key!r}.")
            setattr(self.tensor_keys, role, key)
        return self

    @property
    def advantage_key(self) -> NestedKey:
        """The advantage entry's name."""
        return self.tensor_keys.advantage

    @property
    def value_target_key(self) -> NestedKey:
        """The value target entry's name."""
        return self.tensor_keys.value_target

    @property
    def value_key(self) -> NestedKey:
        """The value entry's name."""
        return self.tensor_keys.value

    @property
    def in_keys(self) -> list[NestedKey]:
        """The entries read: the network's inputs at the root and under ``"next"``, the reward and flags."""
        keys = self.tensor_keys
        network_keys = list(getattr(self.value_network, "in_keys", [])) if self.value_network is not None else [
            keys.value
        ]
        nested = [("next", *k) if isinstance(k, tuple) else ("next", k) for k in network_keys]
        flags = [("next", keys.reward), ("next", keys.done), ("next", keys.terminated)]
        return network_keys + nested + flags

    @property
    def out_keys(self) -> list[NestedKey]:
        """The entries written."""
        return [self.tensor_keys.advantage, self.tensor_keys.value_target]

    # ------------------------------------------------------------------ reading the data
    def _time_dim(self, tensordict: TensorDictBase) -> int:
        if tensordict.batch_dims < 1:
            raise ValueError(
                f"{type(self).__name__} needs data with a time dim (batch size [*B, T]), got batch size "
                f"{list(tensordict.batch_size)}."
            )
        time_dim = tensordict.batch_dims - 1 if self.time_dim is None else self.time_dim
        if not -tensordict.batch_dims <= time_dim < tensordict.batch_dims:
            raise ValueError(
                f"{type(self).__name__}: time_dim={time_dim} is out of range for batch size {list(tensordict.batch_size)}."
            )
        return time_dim % tensordict.batch_dims

    def _get(self, tensordict: TensorDictBase, key: NestedKey, role: str) -> torch.Tensor:
        value = tensordict.get(key, None)
        if value is None:
            raise KeyError(
                f"{type(self).__name__} needs {key!r} ({role}) in its input, which holds "
                f"{sorted(map(str, tensordict.keys(True, True)))}."
            )
        return value

    def _flags(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, torch.Tensor]:
        """(done, terminated) under "next"; either defaults to the other."""
        keys = self.tensor_keys
        done = tensordict.get(("next", keys.done), None)
        terminated = tensordict.get(("next", keys.terminated), None)
        if done is None and terminated is None:
            raise KeyError(
                f"{type(self).__name__} needs {('next', keys.done)!r} or {('next', keys.terminated)!r} in its "
                f"input, which holds {sorted(map(str, tensordict.keys(True, True)))}."
            )
        done = terminated if done is None else done
        terminated = done if terminated is None else terminated
        return done, terminated

    def _reward(self, tensordict: TensorDictBase) -> torch.Tensor:
        reward = self._get(tensordict, ("next", self.tensor_keys.reward), "reward")
        return _standardize(reward) if getattr(self, "average_rewards", False) else reward

    # ------------------------------------------------------------------ running the network
    @contextlib.contextmanager
    def _gradient_mode(self) -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            if not self.differentiable:
                stack.enter_context(torch.no_grad())
            if self.skip_existing is not None:
                stack.enter_context(set_skip_existing(self.skip_existing))
            yield

    def _run_network(self, data: TensorDictBase, params: TensorDictBase | None) -> torch.Tensor:
        """The value the network gives on a shallow copy of ``data`` (the copy takes its
        outputs, so ``data`` keeps its own entries)."""
        assert self.value_network is not None
        work = data.copy()
        with params.to_module(self.value_network) if params is not None else contextlib.nullcontext():
            out = self.value_network(work)
        out = work if out is None else out
        return self._get(out, self.tensor_keys.value, "the value network's output")

    def _values(
        self,
        tensordict: TensorDictBase,
        params: TensorDictBase | None,
        target_params: TensorDictBase | None,
        *,
        need_state_value: bool,
        next_value: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor | None, torch.Tensor]:
        """``(V(s_t) or None, V(s_{t+1}))``, from the network (written into the data) or read."""
        keys = self.tensor_keys
        next_key = ("next", *keys.value) if isinstance(keys.value, tuple) else ("next", keys.value)
        if self.value_network is None:
            state_value = self._get(tensordict, keys.value, "state value") if need_state_value else None
            if next_value is None:
                next_value = self._get(tensordict, next_key, "next state value")
            return state_value, next_value
        next_data = self._get(tensordict, "next", "next step data")
        if self.shifted and need_state_value and next_value is None:
            if target_params is not None:
                raise ValueError(
                    f"{type(self).__name__}(shifted=True) runs the value network once, with params, on the states "
                    f"and the next states: it takes no target_params."
                )
            # one call on [states ; next states] along time, split after
            time_dim = self._time_dim(tensordict)
            in_keys = list(getattr(self.value_network, "in_keys", tensordict.exclude("next").keys(True, True)))
            both = torch.cat([tensordict.select(*in_keys), next_data.select(*in_keys)], time_dim)
            values = self._run_network(both, params)
            length = tensordict.shape[time_dim]
            state_value, next_value = values.split([length, length], dim=time_dim)
        else:
            if target_params is None and params is not None:
                target_params = params.detach()
            state_value = self._run_network(tensordict.exclude("next"), params) if need_state_value else None
            if next_value is None:
                next_value = self._run_network(next_data, target_params)
        if state_value is not None:
            tensordict.set(keys.value, state_value)
        tensordict.set(next_key, next_value)
        return state_value, next_value

    # ------------------------------------------------------------------ the estimate
    def _estimate(
        self, tensordict: TensorDictBase, state_value: torch.Tensor | None, next_value: torch.Tensor
    ) -> tuple[torch.Tensor | None, torch.Tensor]:
        """``(advantage or None, value_target)`` from the values, the reward and the flags."""
        raise TypeError(f"{type(self).__name__} must implement _estimate.")

    def value_estimate(
        self,
        tensordict: TensorDictBase,
        target_params: TensorDictBase | None = None,
        next_value: torch.Tensor | None = None,
        **kwargs: Any,
    ) -> torch.Tensor:
        """The value target of ``tensordict`` (``[*B, T, 1]``), nothing written but the next values.

        Args:
            tensordict: ``[*B, T]`` data.
            target_params: parameters to run the value network with on the next states
                (by default, those it holds).
            next_value: ``V(s_{t+1})`` to use instead of running the network.
            **kwargs: ``params`` for the root states (GAE).

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> data = TensorDict({"next": {"state_value": torch.full((1, 2, 1), 10.0),
            ...     "reward": torch.ones(1, 2, 1), "done": torch.tensor([[[False], [True]]])}}, [1, 2])
            >>> TD0Estimator(gamma=0.5, value_network=None).value_estimate(data).flatten().tolist()
            [6.0, 1.0]
        """
        params = kwargs.pop("params", None)
        if kwargs:
            raise TypeError(f"{type(self).__name__}.value_estimate: unexpected arguments {sorted(kwargs)}.")
        self._time_dim(tensordict)
        with self._gradient_mode():
            state_value, next_value = self._values(
                tensordict, params, target_params, need_state_value=self._needs_state_value, next_value=next_value
            )
            return self._estimate(tensordict, state_value, next_value)[1]

    #: whether ``value_estimate`` needs ``V(s_t)`` (GAE does; the TD returns do not).
    _needs_state_value = False

    def forward(
        self,
        tensordict: TensorDictBase,
        *,
        params: TensorDictBase | None = None,
        target_params: TensorDictBase | None = None,
    ) -> TensorDictBase:
        """Writes the advantage and the value target into ``tensordict`` (and the values the
        network computed) and returns it.

        Args:
            tensordict: ``[*B, T]`` data.
            params: parameters to run the value network with on the root states.
            target_params: parameters for the next states (default: ``params`` detached, or
                the network's own).
        """
        self._time_dim(tensordict)
        with self._gradient_mode():
            state_value, next_value = self._values(tensordict, params, target_params, need_state_value=True)
            assert state_value is not None
            advantage, value_target = self._estimate(tensordict, state_value, next_value)
            if advantage is None:
                advantage = value_target - state_value
            tensordict.set(self.tensor_keys.advantage, self._post_advantage(advantage))
            tensordict.set(self.tensor_keys.value_target, value_target)
        return tensordict

    def _post_advantage(self, advantage: torch.Tensor) -> torch.Tensor:
        return advantage

    def __repr__(self) -> str:
        network = type(self.value_network).__name__ if self.value_network is not None else None
        return f"{type(self).__name__}(value_network={network}, keys={self.tensor_keys})"


class TD0Estimator(ValueEstimatorBase):
    """TD(0): ``value_target = r + gamma * V(s_{t+1})`` (no bootstrap where terminated).

    Args:
        gamma: the discount.
        value_network: the value network, or ``None``.
        average_rewards: standardize the rewards (over the batch) first.
        **kwargs: as ``ValueEstimatorBase`` (``shifted``, ``differentiable``, ``skip_existing``,
            ``advantage_key``, ``value_target_key``, ``value_key``, ``device``, ``time_dim``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> net = TensorDictModule(torch.nn.Linear(2, 1), ["observation"], ["state_value"])
        >>> data = TensorDict({"observation": torch.randn(4, 2), "next": {"observation": torch.randn(4, 2),
        ...     "reward": torch.randn(4, 1), "done": torch.zeros(4, 1, dtype=torch.bool)}}, [4])
        >>> sorted(k for k in TD0Estimator(gamma=0.9, value_network=net)(data).keys() if k != "next")
        ['advantage', 'observation', 'state_value', 'value_target']
    """

    def __init__(
        self, *, gamma: float | torch.Tensor, value_network: torch.nn.Module | None, average_rewards: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(value_network=value_network, **kwargs)
        self.average_rewards = bool(average_rewards)
        self._register_coefficient("gamma", gamma)

    def _estimate(
        self, tensordict: TensorDictBase, state_value: torch.Tensor | None, next_value: torch.Tensor
    ) -> tuple[torch.Tensor | None, torch.Tensor]:
        reward = self._reward(tensordict)
        _, terminated = self._flags(tensordict)
        return None, functional.td0_return_estimate(self.gamma.to(reward.device), next_value, reward, terminated)


class TD1Estimator(ValueEstimatorBase):
    """TD(1): the discounted sum of the rewards to the end of each trajectory, plus
    ``gamma * V`` of the state after it where it was truncated (or cut by the data's end).

    Args:
        gamma: the discount.
        value_network: the value network, or ``None``.
        average_rewards: standardize the rewards (over the batch) first.
        vectorized: use ``vec_td1_return_estimate`` (else the loop over time).
        **kwargs: as ``ValueEstimatorBase``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> data = TensorDict({"next": {"state_value": torch.zeros(1, 3, 1), "reward": torch.ones(1, 3, 1),
        ...     "done": torch.zeros(1, 3, 1, dtype=torch.bool)}}, [1, 3])
        >>> TD1Estimator(gamma=1.0, value_network=None).value_estimate(data).flatten().tolist()
        [3.0, 2.0, 1.0]
    """

    def __init__(
        self, *, gamma: float | torch.Tensor, value_network: torch.nn.Module | None, average_rewards: bool = False,
        vectorized: bool = True, **kwargs: Any,
    ) -> None:
        super().__init__(value_network=value_network, **kwargs)
        self.average_rewards = bool(average_rewards)
        self.vectorized = bool(vectorized)
        self._register_coefficient("gamma", gamma)

    def _estimate(
        self, tensordict: TensorDictBase, state_value: torch.Tensor | None, next_value: torch.Tensor
    ) -> tuple[torch.Tensor | None, torch.Tensor]:
        reward = self._reward(tensordict)
        done, terminated = self._flags(tensordict)
        estimate = functional.vec_td1_return_estimate if self.vectorized else functional.td1_return_estimate
        return None, estimate(
            self.gamma.to(reward.device), next_value, reward, done, terminated,
            time_dim=self._time_dim(tensordict),
        )


class TDLambdaEstimator(ValueEstimatorBase):
    """TD(lambda): ``G_t = r_t + gamma ((1 - lmbda) V(s_{t+1}) + lmbda G_{t+1})`` inside a
    trajectory, ``r_t + gamma V(s_{t+1})`` where truncated, ``r_t`` where terminated.

    Args:
        gamma: the discount.
        lmbda: the trajectory discount.
        value_network: the value network, or ``None``.
        average_rewards: standardize the rewards (over the batch) first.
        vectorized: use ``vec_td_lambda_return_estimate`` (else the loop over time).
        **kwargs: as ``ValueEstimatorBase``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> data = TensorDict({"next": {"state_value": torch.zeros(1, 3, 1), "reward": torch.ones(1, 3, 1),
        ...     "done": torch.zeros(1, 3, 1, dtype=torch.bool)}}, [1, 3])
        >>> TDLambdaEstimator(gamma=1.0, lmbda=0.5, value_network=None).value_estimate(data).flatten().tolist()
        [1.75, 1.5, 1.0]
    """

    def __init__(
        self, *, gamma: float | torch.Tensor, lmbda: float | torch.Tensor, value_network: torch.nn.Module | None,
        average_rewards: bool = False, vectorized: bool = True, **kwargs: Any,
    ) -> None:
        super().__init__(value_network=value_network, **kwargs)
        self.average_rewards = bool(average_rewards)
        self.vectorized = bool(vectorized)
        self._register_coefficient("gamma", gamma)
        self._register_coefficient("lmbda", lmbda)

    def _estimate(
        self, tensordict: TensorDictBase, state_value: torch.Tensor | None, next_value: torch.Tensor
    ) -> tuple[torch.Tensor | None, torch.Tensor]:
        reward = self._reward(tensordict)
        done, terminated = self._flags(tensordict)
        estimate = functional.vec_td_lambda_return_estimate if self.vectorized else functional.td_lambda_return_estimate
        return None, estimate(
            self.gamma.to(reward.device), self.lmbda.to(reward.device), next_value, reward, done, terminated,
            time_dim=self._time_dim(tensordict),
        )


class GAE(ValueEstimatorBase):
    """Generalized advantage estimate: ``A_t = delta_t + gamma lmbda A_{t+1}`` inside a
    trajectory, with ``delta_t = r_t + gamma V(s_{t+1}) - V(s_t)`` (no bootstrap term where
    terminated); ``value_target = A + V(s_t)``.

    Args:
        gamma: the discount.
        lmbda: the trajectory discount.
        value_network: the value network, or ``None``.
        average_gae: standardize the advantage (over the batch) that ``forward`` writes (the
            value target is computed before).
        vectorized: use ``vec_generalized_advantage_estimate`` (else the loop over time).
        **kwargs: as ``ValueEstimatorBase``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> data = TensorDict({"state_value": torch.zeros(1, 2, 1), "next": {"state_value": torch.zeros(1, 2, 1),
        ...     "reward": torch.ones(1, 2, 1), "done": torch.zeros(1, 2, 1, dtype=torch.bool)}}, [1, 2])
        >>> GAE(gamma=1.0, lmbda=1.0, value_network=None)(data)["advantage"].flatten().tolist()
        [2.0, 1.0]
    """

    _needs_state_value = True

    def __init__(
        self, *, gamma: float | torch.Tensor, lmbda: float | torch.Tensor, value_network: torch.nn.Module | None,
        average_gae: bool = False, vectorized: bool = True, **kwargs: Any,
    ) -> None:
        super().__init__(value_network=value_network, **kwargs)
        self.average_gae = bool(average_gae)
        self.vectorized = bool(vectorized)
        self._register_coefficient("gamma", gamma)
        self._register_coefficient("lmbda", lmbda)

    def _estimate(
        self, tensordict: TensorDictBase, state_value: torch.Tensor | None, next_value: torch.Tensor
    ) -> tuple[torch.Tensor | None, torch.Tensor]:
        assert state_value is not None
        reward = self._get(tensordict, ("next", self.tensor_keys.reward), "reward")
        done, terminated = self._flags(tensordict)
        estimate = (
            functional.vec_generalized_advantage_estimate if self.vectorized
            else functional.generalized_advantage_estimate
        )
        return estimate(
            self.gamma.to(reward.device), self.lmbda.to(reward.device), state_value, next_value, reward, done,
            terminated, time_dim=self._time_dim(tensordict),
        )

    def _post_advantage(self, advantage: torch.Tensor) -> torch.Tensor:
        return _standardize(advantage) if self.average_gae else advantage

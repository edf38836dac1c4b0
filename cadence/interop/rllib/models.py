"""RLlib's torch models (old API stack): :class:`ModelV2` and :class:`FullyConnectedNetwork`.

A :class:`ModelV2` is an ``nn.Module`` built as RLlib builds it,
``(obs_space, action_space, num_outputs, model_config, name)``, with a ``view_requirements``
dict that tells the sampler which trajectory views its forward pass needs (the seed's
``{"obs": ViewRequirement(shift=0, space=obs_space)}`` by default; recurrent or
prev-action models add their own). Calling it (``model(input_dict)``) converts the numpy
columns it reads to tensors, lazily and column by column, so that the columns the forward
pass reads are the ones a :class:`~cadence.interop.rllib.sample_batch.SampleBatch` records
as accessed (policy construction prunes views by that record).

:class:`FullyConnectedNetwork` is RLlib's default MLP: policy logits and a value head,
configured by the ``fcnet_hiddens``, ``fcnet_activation``, ``vf_share_layers`` and
``free_log_std`` model-config keys; its weights are drawn from an explicit ``torch.Generator``.

Deliberate differences from RLlib (ray 2.x):

* There is no preprocessor: ``input_dict["obs"]`` is the observation as collected (a tensor,
  or a dict of tensors for a ``Dict`` space) and ``input_dict["obs_flat"]`` is derived from
  it on read (one-hot for discrete parts, ``gymnasium.spaces.flatdim`` wide).
* A subclass must define ``forward``; one that does not is refused when the class is
  defined (``class Base(ModelV2, abstract=True)`` declares a base class).

Examples:
    >>> import gymnasium as gym, numpy as np, torch
    >>> from cadence.interop.rllib.models import FullyConnectedNetwork
    >>> obs_space, act_space = gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2)
    >>> model = FullyConnectedNetwork(obs_space, act_space, 2, {"fcnet_hiddens": [8]}, "fc",
    ...                               generator=torch.Generator().manual_seed(0))
    >>> logits, state = model({"obs": np.zeros((3, 4), np.float32)})
    >>> logits.shape, model.value_function().shape, state
    (torch.Size([3, 2]), torch.Size([3]), [])
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from cadence.interop.rllib.sample_batch import SampleBatch
from cadence.interop.rllib.view_requirement import ViewRequirement

__all__ = ["FullyConnectedNetwork", "ModelV2", "TorchModelV2", "convert_to_torch_tensor", "flatten_obs"]

OBS_FLAT = "obs_flat"


def convert_to_torch_tensor(value: Any) -> Any:
    """``value`` as torch tensors, leaf by leaf (RLlib's conversion for model inputs).

    Numeric and bool numpy arrays become tensors sharing their memory where they can
    (``torch.from_numpy``); float64 becomes float32 as in RLlib, since torch models are
    float32. Tensors pass through; dicts and tuples are converted leaf by leaf; anything else
    (lists of info dicts, object arrays, Python scalars) is returned as it is.

    Args:
        value: An array, a tensor, a dict or tuple of those, or anything else.

    Returns:
        The converted value.

    Examples:
        >>> import numpy as np
        >>> convert_to_torch_tensor(np.zeros(2)).dtype
        torch.float32
        >>> out = convert_to_torch_tensor({"a": np.arange(3), "infos": [{}]})
        >>> out["a"].dtype, out["infos"]
        (torch.int64, [{}])
    """
    if isinstance(value, Mapping):
        return {key: convert_to_torch_tensor(sub) for key, sub in value.items()}
    if isinstance(value, tuple):  # a Tuple space's value
        return tuple(convert_to_torch_tensor(sub) for sub in value)
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biuf":  # strings, objects: no tensor form
            return value
        if not value.flags.writeable:  # torch.from_numpy warns on read-only arrays
            value = value.copy()
        tensor = torch.from_numpy(np.ascontiguousarray(value))
    elif isinstance(value, torch.Tensor):
        tensor = value
    else:
        return value
    return tensor.float() if tensor.dtype == torch.float64 else tensor


def flatten_obs(space: gym.Space, obs: Any) -> torch.Tensor:
    """A batch of observations as a float32 ``[B, flatdim(space)]`` tensor (RLlib's ``obs_flat``).

    ``Discrete``/``MultiDiscrete`` parts are one-hot encoded, ``Box``/``MultiBinary`` parts
    flattened, ``Dict`` parts concatenated in the space's key order and ``Tuple`` parts in
    their order, as ``gymnasium.spaces.flatten`` does for one observation.

    Args:
        space: The observation space of one observation.
        obs: A batch: an array or tensor ``[B, *space.shape]``, or a dict (tuple) of such
            for a ``Dict`` (``Tuple``) space.

    Returns:
        The flattened batch.

    Raises:
        TypeError: A space kind this cannot flatten (e.g. ``Text``), or a dict (tuple)
            observation for a space that is not a ``Dict`` (``Tuple``).

    Examples:
        >>> import gymnasium as gym, numpy as np
        >>> flatten_obs(gym.spaces.Discrete(3), np.array([2, 0])).tolist()
        [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
        >>> space = gym.spaces.Dict(a=gym.spaces.Discrete(2), b=gym.spaces.Box(0, 1, (2,)))
        >>> flatten_obs(space, {"a": np.array([1]), "b": np.ones((1, 2))}).tolist()
        [[0.0, 1.0, 1.0, 1.0]]
        >>> flatten_obs(gym.spaces.Tuple([gym.spaces.Discrete(2), gym.spaces.Box(0, 1, ())]),
        ...             (np.array([0]), np.array([0.5]))).tolist()
        [[1.0, 0.0, 0.5]]
    """
    if isinstance(space, gym.spaces.Dict):
        if not isinstance(obs, Mapping):
            raise TypeError(f"obs_flat: the observation space is a Dict but the obs is a {type(obs).__name__}")
        parts = [flatten_obs(sub_space, obs[key]) for key, sub_space in space.spaces.items()]
        return torch.cat(parts, dim=-1)
    if isinstance(space, gym.spaces.Tuple):
        if not isinstance(obs, (tuple, list)) or len(obs) != len(space.spaces):
            raise TypeError(
                f"obs_flat: the observation space is a Tuple of {len(space.spaces)} but the obs is a {type(obs).__name__}"
            )
        return torch.cat([flatten_obs(sub_space, part) for sub_space, part in zip(space.spaces, obs)], dim=-1)
    if isinstance(obs, (Mapping, tuple)):
        raise TypeError(f"obs_flat: the obs is a {type(obs).__name__} but the observation space is {space!r}")
    tensor = convert_to_torch_tensor(np.asarray(obs) if not isinstance(obs, torch.Tensor) else obs)
    if isinstance(space, gym.spaces.Discrete):
        index = tensor.long().reshape(-1) - int(space.start)
        return nn.functional.one_hot(index, int(space.n)).float()
    if isinstance(space, gym.spaces.MultiDiscrete):
        nvec = np.asarray(space.nvec).reshape(-1)
        flat = tensor.long().reshape(tensor.shape[0], -1)
        hots = [nn.functional.one_hot(flat[:, i], int(n)) for i, n in enumerate(nvec)]
        return torch.cat(hots, dim=-1).float()
    if isinstance(space, (gym.spaces.Box, gym.spaces.MultiBinary)):
        return tensor.reshape(tensor.shape[0], -1).float()
    raise TypeError(
        f"obs_flat: cannot flatten observations of space {space!r}; expected a Box, Discrete, "
        "MultiDiscrete, MultiBinary or a Dict or Tuple of those"
    )


class _ModelInput(SampleBatch):
    """The input dict a forward pass sees: tensors on read, ``obs_flat`` derived from ``obs``.

    It shares its ``accessed_keys`` set with the caller's batch, so that every column the
    forward pass reads is recorded there (what view pruning relies on).
    """

    obs_space: gym.Space | None = None

    def __getitem__(self, key: Any) -> Any:
        if key == OBS_FLAT and not dict.__contains__(self, OBS_FLAT):
            obs = self[SampleBatch.OBS]
            if self.obs_space is None:
                return obs.reshape(obs.shape[0], -1).float()
            return flatten_obs(self.obs_space, obs)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        if key == OBS_FLAT:
            return dict.__contains__(self, SampleBatch.OBS) or dict.__contains__(self, OBS_FLAT)
        return dict.__contains__(self, key)


class ModelV2(nn.Module):
    """RLlib's model base class (torch): an ``nn.Module`` with trajectory-view requirements.

    A subclass defines :meth:`forward` (and, for actor-critic algorithms,
    :meth:`value_function`), and may add views to ``self.view_requirements`` in its
    constructor, as the seed's LSTM wrapper adds ``prev_actions``/``prev_rewards``. Call the
    model, not ``forward``: ``model(input_dict, state, seq_lens)`` converts the columns to
    tensors as they are read and checks what ``forward`` returns. A subclass that does not
    define ``forward`` is refused when it is defined, unless declared
    ``class MyBase(ModelV2, abstract=True)``.

    Args:
        obs_space: The observation space.
        action_space: The action space.
        num_outputs: The width of the policy output (e.g. logits); ``None`` lets the model
            choose (then it sets ``self.num_outputs``).
        model_config: RLlib's model config dict (``fcnet_hiddens``, ``max_seq_len``, ...).
        name: The model's name.

    Attributes:
        view_requirements: View column -> :class:`ViewRequirement` the forward pass needs.

    Examples:
        >>> import gymnasium as gym, numpy as np, torch
        >>> from cadence.interop.rllib import SampleBatch, ViewRequirement
        >>> class PrevActionModel(ModelV2):
        ...     def __init__(self, obs_space, action_space, num_outputs, model_config, name):
        ...         super().__init__(obs_space, action_space, num_outputs, model_config, name)
        ...         self.view_requirements["prev_actions"] = ViewRequirement(
        ...             "actions", space=action_space, shift=-1)
        ...         self.linear = nn.Linear(3, num_outputs)
        ...     def forward(self, input_dict, state, seq_lens):
        ...         prev = input_dict["prev_actions"].float().unsqueeze(-1)
        ...         return self.linear(torch.cat([input_dict["obs"], prev], -1)), state
        >>> model = PrevActionModel(gym.spaces.Box(-1, 1, (2,)), gym.spaces.Discrete(2), 2, {}, "m")
        >>> sorted(model.view_requirements)
        ['obs', 'prev_actions']
        >>> batch = SampleBatch(obs=np.zeros((4, 2), np.float32), prev_actions=np.zeros(4, np.int64),
        ...                     rewards=np.zeros(4))
        >>> model(batch)[0].shape, sorted(batch.accessed_keys)
        (torch.Size([4, 2]), ['obs', 'prev_actions'])
    """

    def __init_subclass__(cls, abstract: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not abstract and cls.forward is ModelV2.forward:
            raise TypeError(
                f"{cls.__name__} must define forward(input_dict, state, seq_lens) -> (outputs, state) "
                f"(ModelV2's contract); declare `class {cls.__name__}(ModelV2, abstract=True)` for a base class"
            )

    def __init__(
        self,
        obs_space: gym.Space,
        action_space: gym.Space,
        num_outputs: int | None,
        model_config: Mapping[str, Any] | None,
        name: str,
    ) -> None:
        nn.Module.__init__(self)
        self.obs_space = obs_space
        self.action_space = action_space
        self.num_outputs = num_outputs
        self.model_config: dict[str, Any] = dict(model_config or {})
        self.name = name
        self.time_major = bool(self.model_config.get("_time_major", False))
        self.view_requirements: dict[str, ViewRequirement] = {
            SampleBatch.OBS: ViewRequirement(shift=0, space=obs_space)
        }
        self._last_output: torch.Tensor | None = None

    def forward(  # type: ignore[override]
        self, input_dict: SampleBatch, state: list[torch.Tensor], seq_lens: torch.Tensor | None
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """The forward pass (the subclass's): ``(outputs [B, num_outputs], new state list)``.

        Args:
            input_dict: The views, as tensors on read (``obs``, ``obs_flat``, ``prev_actions``,
                ...); ``input_dict.is_training`` says whether this is a training pass.
            state: The recurrent state inputs (``[]`` for a feed-forward model).
            seq_lens: The sequence lengths of a recurrent batch, or ``None``.

        Raises:
            NotImplementedError: Always here (unreachable for a concrete subclass).

        Examples:
            >>> import gymnasium as gym
            >>> class Base(ModelV2, abstract=True):
            ...     pass
            >>> Base(gym.spaces.Discrete(2), gym.spaces.Discrete(2), 2, {}, "b").forward({}, [], None)
            Traceback (most recent call last):
            ...
            NotImplementedError: Base.forward() is not defined
        """
        raise NotImplementedError(f"{type(self).__name__}.forward() is not defined")

    def value_function(self) -> torch.Tensor:
        """The value estimates ``[B]`` of the last forward pass (models with a value head).

        Raises:
            NotImplementedError: The model has no value head.

        Examples:
            >>> import gymnasium as gym
            >>> class NoValue(ModelV2):
            ...     def forward(self, input_dict, state, seq_lens):
            ...         return input_dict["obs"], state
            >>> NoValue(gym.spaces.Box(0, 1, (2,)), gym.spaces.Discrete(2), 2, {}, "n").value_function()
            Traceback (most recent call last):
            ...
            NotImplementedError: NoValue has no value function (value_function() is not defined)
        """
        raise NotImplementedError(f"{type(self).__name__} has no value function (value_function() is not defined)")

    def get_initial_state(self) -> list[np.ndarray]:
        """The recurrent state at an episode start, one array per state tensor (``[]``: none).

        Examples:
            >>> import gymnasium as gym
            >>> FullyConnectedNetwork(gym.spaces.Box(0, 1, (2,)), gym.spaces.Discrete(2), 2, {}, "f").get_initial_state()
            []
        """
        return []

    def is_time_major(self) -> bool:
        """Whether recurrent inputs are time-major (``model_config["_time_major"]``).

        Examples:
            >>> import gymnasium as gym
            >>> FullyConnectedNetwork(gym.spaces.Box(0, 1, (2,)), gym.spaces.Discrete(2), 2, {}, "f").is_time_major()
            False
        """
        return self.time_major

    def last_output(self) -> torch.Tensor | None:
        """The outputs of the last call (``None`` before the first).

        Examples:
            >>> import gymnasium as gym, numpy as np
            >>> model = FullyConnectedNetwork(gym.spaces.Box(0, 1, (2,)), gym.spaces.Discrete(2), 2, {}, "f")
            >>> model.last_output() is None, model({"obs": np.zeros((1, 2))})[0] is model.last_output()
            (True, True)
        """
        return self._last_output

    def __call__(  # type: ignore[override]
        self,
        input_dict: SampleBatch | Mapping[str, Any],
        state: Sequence[Any] | None = None,
        seq_lens: Any = None,
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Runs :meth:`forward` on ``input_dict`` with its columns as tensors (RLlib's entry point).

        The forward pass reads a shallow copy whose columns are converted to tensors when
        read (:func:`convert_to_torch_tensor`), with ``obs_flat`` derived from ``obs``; the
        columns it reads are recorded in ``input_dict.accessed_keys`` when ``input_dict``
        is a SampleBatch. Writes in ``forward`` do not reach ``input_dict``.

        Args:
            input_dict: A SampleBatch or a dict of columns with one row per step.
            state: The recurrent state inputs; ``None`` reads the ``state_in_0``,
                ``state_in_1``, ... columns of ``input_dict``.
            seq_lens: The sequence lengths; ``None`` reads ``input_dict["seq_lens"]`` when
                the model is recurrent and the column is there.

        Returns:
            ``(outputs, state_out)``; ``state_out`` is ``state`` when forward returns no state.

        Raises:
            ValueError: ``forward`` returned something other than ``(outputs, state list)``,
                or outputs whose last dimension is not ``num_outputs``.

        Examples:
            >>> import gymnasium as gym, numpy as np
            >>> model = FullyConnectedNetwork(gym.spaces.Discrete(3), gym.spaces.Discrete(2), 2,
            ...                               {"fcnet_hiddens": [4]}, "f")
            >>> model({"obs": np.array([0, 2])})[0].shape
            torch.Size([2, 2])
        """
        source = input_dict if isinstance(input_dict, SampleBatch) else SampleBatch(dict(input_dict))
        restored = _ModelInput(dict(dict.items(source)), **source._flags())
        restored.obs_space = self.obs_space
        # One set for both: the columns forward reads count as read on the caller's batch.
        restored.accessed_keys = source.accessed_keys
        restored.set_get_interceptor(convert_to_torch_tensor)
        if state is None:
            state = []
            while dict.__contains__(source, f"state_in_{len(state)}"):
                state.append(restored[f"state_in_{len(state)}"])
        if seq_lens is None and state and dict.__contains__(source, SampleBatch.SEQ_LENS):
            seq_lens = restored[SampleBatch.SEQ_LENS]
        result = self.forward(restored, list(state), seq_lens)
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            raise ValueError(
                f"{type(self).__name__}.forward() must return a tuple (outputs, state_list), got "
                f"{type(result).__name__}"
            )
        outputs, state_out = result
        if not isinstance(state_out, (list, tuple)):
            raise ValueError(
                f"{type(self).__name__}.forward() returned a state of type {type(state_out).__name__}; "
                "expected a list of tensors ([] for a feed-forward model)"
            )
        if (
            isinstance(self.num_outputs, int)
            and isinstance(outputs, torch.Tensor)
            and (outputs.dim() == 0 or outputs.shape[-1] != self.num_outputs)
        ):
            raise ValueError(
                f"{type(self).__name__}.forward() returned outputs of shape {tuple(outputs.shape)}; "
                f"expected a last dimension of num_outputs={self.num_outputs}"
            )
        self._last_output = outputs
        return outputs, list(state_out) if len(state_out) > 0 else list(state)


#: RLlib's name for the torch flavour of :class:`ModelV2` (here the only one).
TorchModelV2 = ModelV2

_ACTIVATIONS: dict[str | None, Callable[[], nn.Module]] = {
    "tanh": nn.Tanh,
    "relu": nn.ReLU,
    "swish": nn.SiLU,
    "silu": nn.SiLU,
    "elu": nn.ELU,
    "linear": nn.Identity,
    None: nn.Identity,
}


def _normc_linear(in_size: int, out_size: int, std: float, generator: torch.Generator) -> nn.Linear:
    """A Linear layer with RLlib's normc init (each output row of norm ``std``, zero bias)."""
    # skip_init builds the layer without touching the global RNG (nn.Linear's own init does).
    layer = torch.nn.utils.skip_init(nn.Linear, in_size, out_size)
    with torch.no_grad():
        weight = torch.randn(out_size, in_size, generator=generator)
        weight *= std / weight.pow(2).sum(dim=1, keepdim=True).sqrt()
        layer.weight.copy_(weight)
        layer.bias.zero_()
    return layer


def _mlp(in_size: int, hiddens: Sequence[int], activation: Callable[[], nn.Module], generator: torch.Generator) -> nn.Sequential:
    layers: list[nn.Module] = []
    for size in hiddens:
        layers += [_normc_linear(in_size, int(size), 1.0, generator), activation()]
        in_size = int(size)
    return nn.Sequential(*layers)


class FullyConnectedNetwork(ModelV2):
    """RLlib's default MLP (torch): policy outputs from ``obs_flat`` and a value head.

    Model-config keys (RLlib's meaning and defaults): ``fcnet_hiddens`` (``[256, 256]``),
    ``fcnet_activation`` (``"tanh"``; also ``"relu"``, ``"swish"``/``"silu"``, ``"elu"``,
    ``"linear"``), ``vf_share_layers`` (``False``: the value head has its own MLP of the same
    sizes; ``True``: it reads the policy's last hidden layer) and ``free_log_std``
    (``False``; ``True``: the second half of the outputs is a state-independent learned
    log-std, ``num_outputs`` must be even). Other keys are ignored, as RLlib's model config
    serves every model kind. Weights use RLlib's normc init (std 1.0 hidden, 0.01 for the
    output and value layers), drawn from ``generator``.

    Args:
        obs_space, action_space, num_outputs, model_config, name: as :class:`ModelV2`;
            ``num_outputs=None`` makes the outputs the last hidden layer.
        generator: The random generator for the initial weights; default
            ``torch.Generator().manual_seed(model_config.get("seed") or 0)``.

    Raises:
        ValueError: An unknown ``fcnet_activation``, an odd ``num_outputs`` with
            ``free_log_std``, or ``num_outputs=None`` with no hidden layers.

    Examples:
        >>> import gymnasium as gym, numpy as np, torch
        >>> model = FullyConnectedNetwork(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Box(-1, 1, (2,)), 4,
        ...     {"fcnet_hiddens": [16, 16], "fcnet_activation": "relu", "free_log_std": True}, "fc")
        >>> out, _ = model({"obs": np.zeros((5, 3), np.float32)})
        >>> out.shape, model.value_function().shape
        (torch.Size([5, 4]), torch.Size([5]))
    """

    def __init__(
        self,
        obs_space: gym.Space,
        action_space: gym.Space,
        num_outputs: int | None,
        model_config: Mapping[str, Any] | None,
        name: str,
        *,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        config = self.model_config
        hiddens = [int(size) for size in config.get("fcnet_hiddens", [256, 256])]
        activation_name = config.get("fcnet_activation", "tanh")
        if activation_name not in _ACTIVATIONS:
            raise ValueError(
                f"model_config['fcnet_activation']={activation_name!r} is not supported; expected one of "
                f"{sorted(str(k) for k in _ACTIVATIONS if k is not None)}"
            )
        activation = _ACTIVATIONS[activation_name]
        self.vf_share_layers = bool(config.get("vf_share_layers", False))
        self.free_log_std = bool(config.get("free_log_std", False))
        if generator is None:
            generator = torch.Generator().manual_seed(int(config.get("seed") or 0))
        in_size = int(gym.spaces.flatdim(obs_space))

        self._hidden_layers = _mlp(in_size, hiddens, activation, generator)
        features = hiddens[-1] if hiddens else in_size
        if num_outputs is None:
            if not hiddens:
                raise ValueError("FullyConnectedNetwork: num_outputs=None needs at least one fcnet_hiddens layer")
            self.num_outputs = features
            self._logits: nn.Module | None = None
        else:
            if self.free_log_std and num_outputs % 2:
                raise ValueError(
                    f"FullyConnectedNetwork: free_log_std needs an even num_outputs (mean and log-std "
                    f"halves), got {num_outputs}"
                )
            width = num_outputs // 2 if self.free_log_std else num_outputs
            self._logits = _normc_linear(features, width, 0.01, generator)
            if self.free_log_std:
                self._log_std = nn.Parameter(torch.zeros(width))
        if self.vf_share_layers:
            self._value_branch_separate: nn.Module | None = None
            vf_in = features
        else:
            self._value_branch_separate = _mlp(in_size, hiddens, activation, generator)
            vf_in = hiddens[-1] if hiddens else in_size
        self._value_branch = _normc_linear(vf_in, 1, 0.01, generator)
        # Kept from the last forward pass for value_function(), as RLlib does.
        self._features: torch.Tensor | None = None
        self._last_flat_in: torch.Tensor | None = None

    def forward(  # type: ignore[override]
        self, input_dict: SampleBatch, state: list[torch.Tensor], seq_lens: torch.Tensor | None
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Policy outputs ``[B, num_outputs]`` from ``input_dict["obs_flat"]``; the state passes through.

        Examples:
            >>> import gymnasium as gym, numpy as np
            >>> model = FullyConnectedNetwork(gym.spaces.Box(0, 1, (2,)), gym.spaces.Discrete(3), 3, {}, "f")
            >>> model({"obs": np.ones((2, 2))})[0].shape
            torch.Size([2, 3])
        """
        obs = input_dict[OBS_FLAT].float()
        self._last_flat_in = obs.reshape(obs.shape[0], -1)
        self._features = self._hidden_layers(self._last_flat_in)
        logits = self._logits(self._features) if self._logits is not None else self._features
        if self.free_log_std:
            logits = torch.cat([logits, self._log_std.expand_as(logits)], dim=-1)
        return logits, state

    def value_function(self) -> torch.Tensor:
        """Value estimates ``[B]`` for the observations of the last forward pass.

        Raises:
            ValueError: Called before any forward pass.

        Examples:
            >>> import gymnasium as gym, numpy as np
            >>> model = FullyConnectedNetwork(gym.spaces.Box(0, 1, (2,)), gym.spaces.Discrete(3), 3,
            ...                               {"vf_share_layers": True}, "f")
            >>> _ = model({"obs": np.ones((4, 2))})
            >>> model.value_function().shape
            torch.Size([4])
        """
        if self._features is None or self._last_flat_in is None:
            raise ValueError(f"{type(self).__name__}.value_function() called before any forward pass")
        if self._value_branch_separate is None:
            return self._value_branch(self._features).squeeze(1)
        return self._value_branch(self._value_branch_separate(self._last_flat_in)).squeeze(1)

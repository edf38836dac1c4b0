"""A stateless pendulum swing-up environment written entirely in torch.

The physics are those of gymnasium's ``Pendulum-v1``: a rod of length ``l`` and
mass ``m`` hangs from a frictionless pivot, an action applies a torque clipped to
``[-max_torque, max_torque]``, the angular speed is clipped to
``[-max_speed, max_speed]`` and the cost penalises the distance to the upright
position, the speed and the effort. The episode never ends on its own.

"Stateless" means the environment object holds no simulation state: the angle
``"th"``, the angular speed ``"thdot"`` and the physical constants ``"params"``
all travel in the tensordict, so one environment instance can simulate any batch
of pendulums, each with its own constants.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

from cadence.data import Bounded, Composite, Unbounded
from cadence.envs.common import EnvBase

__all__ = ["PendulumEnv"]

#: Names of the physical constants stored under ``"params"``, in a fixed order.
PARAM_KEYS: tuple[str, ...] = ("max_speed", "max_torque", "dt", "g", "m", "l")

_DEFAULT_PARAMS: dict[str, float] = {
    "max_speed": 8.0,
    "max_torque": 2.0,
    "dt": 0.05,
    "g": 10.0,
    "m": 1.0,
    "l": 1.0,
}

#: Half-widths of the uniform distributions of the initial angle and speed.
_RESET_TH_HIGH: float = math.pi
_RESET_THDOT_HIGH: float = 1.0

DeviceLike = torch.device | str | int
BatchSizeLike = Sequence[int] | torch.Size | int


def _as_size(batch_size: BatchSizeLike | None) -> torch.Size:
    if batch_size is None:
        return torch.Size([])
    if isinstance(batch_size, int):
        return torch.Size([batch_size])
    return torch.Size(batch_size)


def angle_normalize(x: torch.Tensor) -> torch.Tensor:
    """Wraps angles into ``[-pi, pi)``.

    Args:
        x: angles in radians, any shape.

    Returns:
        A tensor of the same shape holding the equivalent angles in ``[-pi, pi)``.

    Examples:
        >>> import math, torch
        >>> from cadence.envs.custom.pendulum import angle_normalize
        >>> [round(v, 4) for v in angle_normalize(torch.tensor([3 * math.pi / 2, 0.5])).tolist()]
        [-1.5708, 0.5]
    """
    return torch.remainder(x + math.pi, 2 * math.pi) - math.pi


class PendulumEnv(EnvBase):
    """A stateless, vectorised pendulum swing-up environment.

    The whole simulation state lives in the tensordict: :meth:`reset` writes the
    angle ``"th"``, the angular speed ``"thdot"`` and a ``"params"``
    sub-tensordict holding the physical constants (``max_speed``, ``max_torque``,
    ``dt``, ``g``, ``m``, ``l``, each shaped like the batch); :meth:`step` reads
    them back together with ``"action"`` (a torque of shape ``(*batch, 1)``) and
    writes the next ``"th"``, ``"thdot"``, ``"params"``, ``"reward"``,
    ``"done"`` and ``"terminated"`` (always ``False``: the task never ends on its
    own; bound it with a step count).

    The dynamics and the reward match gymnasium's ``Pendulum-v1``::

        reward = -(angle_normalize(th) ** 2 + 0.1 * thdot ** 2 + 0.001 * u ** 2)

    where ``u`` is the action clipped to ``[-max_torque, max_torque]``. The
    angle written back is wrapped into ``[-pi, pi)``; this does not change the
    dynamics (which depend on ``sin(th)`` only) or the reward, and keeps the
    observation inside its spec.

    The environment is not batch-locked: an unbatched environment accepts a
    batched input tensordict carrying its own ``"params"``, so
    ``env.reset(env.gen_params(batch_size=[10]))`` simulates ten pendulums.
    Initial states are drawn from the environment's own generator
    :attr:`rng` (see :meth:`set_seed`), never from torch's global generator.

    Args:
        td_params: the default physical constants, as returned by
            :meth:`gen_params` (a tensordict with a ``"params"`` entry, or the
            ``"params"`` sub-tensordict itself). They shape the specs and are used
            by :meth:`reset` whenever its input carries no ``"params"``. Defaults
            to ``gen_params()``.
        seed: seed of :attr:`rng`. If ``None``, the generator keeps its fixed
            default seed, so an unseeded env is reproducible too.
        device: the device of the specs and of the data.
        batch_size: the batch size of the environment. Defaults to the batch size
            of ``td_params`` when given, else to ``()``.

    Examples:
        >>> import torch
        >>> from cadence.envs.custom import PendulumEnv
        >>> env = PendulumEnv(seed=0, batch_size=[4])
        >>> td = env.reset()
        >>> td["th"].shape, td["params", "g"].shape
        (torch.Size([4]), torch.Size([4]))
        >>> td["action"] = torch.zeros(4, 1)
        >>> td = env.step(td)
        >>> td["next", "reward"].shape
        torch.Size([4, 1])
        >>> bool(td["next", "done"].any())
        False
        >>> rollout = env.rollout(10)
        >>> rollout.batch_size
        torch.Size([4, 10])

        The stateless trick: an unbatched environment simulating a batch of
        pendulums, each with its own gravity.

        >>> env = PendulumEnv(seed=0)
        >>> env.batch_size
        torch.Size([])
        >>> params = env.gen_params(g=torch.linspace(5.0, 15.0, 3), batch_size=[3])
        >>> td = env.reset(params)
        >>> td["th"].shape
        torch.Size([3])
        >>> td["params", "g"].tolist()
        [5.0, 10.0, 15.0]
    """

    metadata: dict[str, object] = {"render_modes": [], "render_fps": 30}
    #: ``False``, as the env is stateless, so inputs may carry any batch (with their own ``"params"``).
    batch_locked: bool = False

    def __init__(
        self,
        td_params: TensorDictBase | None = None,
        seed: int | None = None,
        device: DeviceLike = "cpu",
        batch_size: BatchSizeLike | None = None,
    ) -> None:
        if td_params is not None and "params" in td_params.keys():
            td_params = td_params.get("params")
        if batch_size is None:
            batch_size = td_params.batch_size if td_params is not None else torch.Size([])
        batch_size = _as_size(batch_size)
        if td_params is None:
            td_params = self.gen_params(batch_size=batch_size, device=device)["params"]
        else:
            td_params = self._check_params(td_params, batch_size).to(device)
        super().__init__(device=device, batch_size=batch_size)
        self._td_params: TensorDictBase = td_params
        self._make_specs(td_params)
        # Initial states are drawn on the env's device, so the generator lives there.
        self.rng = torch.Generator(device=self._rng_device)
        if seed is not None:
            self.set_seed(seed)

    # ------------------------------------------------------------------ params
    @staticmethod
    def gen_params(
        g: float | torch.Tensor = 10.0,
        batch_size: BatchSizeLike | None = None,
        *,
        device: DeviceLike | None = None,
    ) -> TensorDict:
        """Builds the physical constants of a batch of pendulums.

        Args:
            g: the gravitational acceleration, a float or a tensor broadcastable
                to ``batch_size`` (one value per pendulum).
            batch_size: the batch size of the output. Defaults to ``()``.
            device: the device of the output. Defaults to the CPU.

        Returns:
            A tensordict of batch size ``batch_size`` with one entry,
            ``"params"``, itself a tensordict holding ``max_speed``,
            ``max_torque``, ``dt``, ``g``, ``m`` and ``l`` as float32 tensors of
            shape ``batch_size``. Pass it to :meth:`reset` to simulate that batch.

        Examples:
            >>> from cadence.envs.custom import PendulumEnv
            >>> td = PendulumEnv.gen_params(batch_size=[2])
            >>> sorted(td["params"].keys())
            ['dt', 'g', 'l', 'm', 'max_speed', 'max_torque']
            >>> td["params", "max_torque"].tolist()
            [2.0, 2.0]
        """
        size = _as_size(batch_size)
        values = dict(_DEFAULT_PARAMS)
        entries: dict[str, torch.Tensor] = {}
        for key in PARAM_KEYS:
            value = g if key == "g" else values[key]
            tensor = torch.as_tensor(value, dtype=torch.float32, device=device)
            try:
                entries[key] = tensor.expand(size).clone()
            except RuntimeError as err:
                raise ValueError(
                    f"gen_params: {key!r} of shape {tuple(tensor.shape)} cannot be "
                    f"broadcast to batch_size {tuple(size)}"
                ) from err
        params = TensorDict(entries, batch_size=size, device=device)
        return TensorDict({"params": params}, batch_size=size, device=device)

    @staticmethod
    def _check_params(params: TensorDictBase, batch_size: torch.Size) -> TensorDictBase:
        """Validates a ``"params"`` tensordict and expands it to ``batch_size``."""
        missing = [key for key in PARAM_KEYS if key not in params.keys()]
        if missing:
            raise ValueError(
                f"PendulumEnv: td_params lacks the entries {missing}; expected the "
                f"keys {list(PARAM_KEYS)} (see PendulumEnv.gen_params)"
            )
        entries: dict[str, torch.Tensor] = {}
        for key in PARAM_KEYS:
            value = params.get(key)
            if not isinstance(value, torch.Tensor):
                raise TypeError(
                    f"PendulumEnv: td_params[{key!r}] must be a tensor, got {type(value).__name__}"
                )
            try:
                entries[key] = value.to(torch.float32).expand(batch_size).clone()
            except RuntimeError as err:
                raise ValueError(
                    f"PendulumEnv: td_params[{key!r}] of shape {tuple(value.shape)} "
                    f"cannot be broadcast to the batch size {tuple(batch_size)}"
                ) from err
        return TensorDict(entries, batch_size=batch_size, device=params.device)

    # ------------------------------------------------------------------- specs
    def _make_specs(self, params: TensorDictBase) -> None:
        shape = self.batch_size
        device = self.device
        params_spec = Composite(
            {
                key: Unbounded(shape=shape, dtype=torch.float32, device=device)
                for key in PARAM_KEYS
            },
            shape=shape,
            device=device,
        )
        max_speed = params.get("max_speed")
        max_torque = params.get("max_torque")
        self.observation_spec = Composite(
            th=Bounded(
                low=-math.pi,
                high=math.pi,
                shape=shape,
                dtype=torch.float32,
                device=device,
            ),
            thdot=Bounded(
                low=-max_speed,
                high=max_speed,
                shape=shape,
                dtype=torch.float32,
                device=device,
            ),
            params=params_spec,
            shape=shape,
            device=device,
        )
        self.state_spec = self.observation_spec.clone()
        self.action_spec = Bounded(
            low=-max_torque.unsqueeze(-1),
            high=max_torque.unsqueeze(-1),
            shape=(*shape, 1),
            dtype=torch.float32,
            device=device,
        )
        self.reward_spec = Unbounded(shape=(*shape, 1), dtype=torch.float32, device=device)

    # -------------------------------------------------------------------- seed
    @property
    def _rng_device(self) -> torch.device:
        return self.device if self.device is not None else torch.device("cpu")

    def to(self, *args: Any, **kwargs: Any) -> PendulumEnv:
        """Moves the env, its default params and its generator to another device.

        The generator of the new device is seeded from the old one, so a seeded
        env stays reproducible.

        Examples:
            >>> from cadence.envs.custom import PendulumEnv
            >>> env = PendulumEnv(seed=0).to("cpu")
            >>> env.device, env.reset()["th"].device
            (device(type='cpu'), device(type='cpu'))
        """
        super().to(*args, **kwargs)
        if self.device is not None and self._td_params.device != self.device:
            self._td_params = self._td_params.to(self.device)
        if self.rng.device != self._rng_device:
            seed = int(torch.randint(0, 2**62, (), generator=self.rng))
            self.rng = torch.Generator(device=self._rng_device)
            self.rng.manual_seed(seed)
        return self

    # ------------------------------------------------------------------- reset
    def _default_params_for(self, batch_size: torch.Size) -> TensorDictBase:
        params = self._td_params
        if params.batch_size == batch_size:
            return params.clone()
        try:
            return params.expand(batch_size).clone()
        except (RuntimeError, ValueError) as err:
            raise ValueError(
                f"PendulumEnv.reset: the input tensordict has batch size "
                f"{tuple(batch_size)} and no 'params' entry; the default params of "
                f"batch size {tuple(params.batch_size)} cannot be expanded to it. "
                f"Pass params, e.g. env.reset(env.gen_params(batch_size={list(batch_size)}))"
            ) from err

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: object) -> TensorDictBase:
        if tensordict is None:
            batch_size = self.batch_size
            params = self._default_params_for(batch_size)
        else:
            batch_size = tensordict.batch_size
            if "params" in tensordict.keys():
                params = tensordict.get("params")
            else:
                params = self._default_params_for(batch_size)
        device = self.device
        th = torch.rand(batch_size, generator=self.rng, device=device)
        th = th.mul_(2 * _RESET_TH_HIGH).sub_(_RESET_TH_HIGH)
        thdot = torch.rand(batch_size, generator=self.rng, device=device)
        thdot = thdot.mul_(2 * _RESET_THDOT_HIGH).sub_(_RESET_THDOT_HIGH)
        if tensordict is not None and "_reset" in tensordict.keys():
            # Partial reset: keep the sub-environments that are not being reset.
            mask = tensordict.get("_reset").reshape(batch_size)
            if "th" in tensordict.keys():
                th = torch.where(mask, th, tensordict.get("th"))
            if "thdot" in tensordict.keys():
                thdot = torch.where(mask, thdot, tensordict.get("thdot"))
        done = torch.zeros((*batch_size, 1), dtype=torch.bool, device=device)
        return TensorDict(
            {
                "th": th,
                "thdot": thdot,
                "params": params,
                "done": done,
                "terminated": done.clone(),
            },
            batch_size=batch_size,
            device=device,
        )

    # -------------------------------------------------------------------- step
    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        th = tensordict.get("th", None)
        thdot = tensordict.get("thdot", None)
        params = tensordict.get("params", None)
        if th is None or thdot is None or params is None:
            missing = [k for k, v in (("th", th), ("thdot", thdot), ("params", params)) if v is None]
            raise KeyError(
                f"PendulumEnv is stateless: step() needs {missing} in its input (as written by "
                f"reset()); the input holds {sorted(map(str, tensordict.keys(True, True)))}"
            )
        action = tensordict.get("action")

        max_speed = params.get("max_speed")
        max_torque = params.get("max_torque")
        dt = params.get("dt")
        g = params.get("g")
        m = params.get("m")
        length = params.get("l")

        u = action.squeeze(-1)
        u = torch.minimum(torch.maximum(u, -max_torque), max_torque)
        costs = angle_normalize(th).pow(2) + 0.1 * thdot.pow(2) + 0.001 * u.pow(2)

        new_thdot = thdot + (
            3.0 * g / (2.0 * length) * torch.sin(th) + 3.0 / (m * length.pow(2)) * u
        ) * dt
        new_thdot = torch.minimum(torch.maximum(new_thdot, -max_speed), max_speed)
        new_th = angle_normalize(th + new_thdot * dt)

        reward = costs.neg().unsqueeze(-1)
        done = torch.zeros(reward.shape, dtype=torch.bool, device=reward.device)
        return TensorDict(
            {
                "th": new_th,
                "thdot": new_thdot,
                "params": params,
                "reward": reward,
                "done": done,
                "terminated": done.clone(),
            },
            batch_size=tensordict.batch_size,
            device=self.device,
        )

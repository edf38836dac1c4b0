"""Brax (differentiable rigid-body physics in JAX): ``BraxWrapper``, ``BraxEnv``.

A Brax env is a pair of pure functions, ``reset(key) -> state`` and
``step(state, action) -> state``. The wrapper vmaps them over the batch and compiles
each with ``jax.jit`` once per wrapper (``trace_counts`` says how often that happened).

**Data layout.** ``"observation"`` is Brax's observation vector (``[*batch, obs_size]``;
a dict observation gives a nested ``"observation"`` entry); ``"reward"``, ``"done"``,
``"terminated"`` and ``"truncated"`` have shape ``[*batch, 1]``. The env's whole state
(Brax's ``State``: ``pipeline_state``, ``obs``, ``reward``, ``done``, ``metrics``,
``info``) travels in the tensordict as ``"state"``, a nested TensorDict of its leaves, so
the env object holds no simulation state: ``step(td)`` is a function of ``td``. A Brax
env ends an episode by termination (``done``); an env wrapped in Brax's
``EpisodeWrapper`` (``brax.envs.create(..., auto_reset=False)``) also says which ends
are time limits (``info["truncation"]``): those are truncations. Envs that reset
themselves (``AutoResetWrapper``) or are vmapped already (``VmapWrapper``) are refused:
Cadence resets done envs itself, and batches with ``batch_size``.

**Gradients.** With ``requires_grad=True``, a step is a ``torch.autograd.Function``
whose forward runs the jitted step under ``jax.vjp`` and whose backward calls the jitted
VJP: gradients flow from the rewards and observations back to the actions and, through
the floating-point state leaves, to earlier steps, so that a policy can be trained by
backpropagating through a rollout. Each of the two functions compiles once; the VJP's
residuals live in the autograd graph and go with it, nothing is cached across steps.
Where there is nothing to differentiate (under ``torch.no_grad()``, as collectors run, or
when neither the action nor the state requires grad, as with random actions) the plain
step runs.

**Tensors without copies.** Outputs reach torch through DLPack and share JAX's buffers;
inputs reach JAX the same way, with a copy only where JAX cannot use torch's memory as it
is (see ``cadence.envs.libs.jax_utils``). A state leaf that a step leaves unchanged may
come back as the very buffer of the input's: clone an entry before writing into it in
place.

**Seeds.** Resets draw their keys from a JAX PRNG key (``env.key``) that ``set_seed(seed)``
sets to ``jax.random.PRNGKey(seed)`` (a larger seed's high bits folded in); an env that
was never seeded starts from the key of seed 0.

**Batches of processes.** JAX runs threads of its own, so a process that imported it must
not be forked: put Brax envs in ``ParallelEnv(..., start_method="spawn")`` (a
wrapper built in a process forked from one where JAX runs raises ``RuntimeError`` at
once rather than hang). ``batch_size`` (one process, vmapped) is usually the faster way to
many envs.

Brax renders through MuJoCo, which this wrapper does not drive: there is no
``from_pixels`` (the reference library has none either).

The examples below start with a line that skips them where brax is not installed (it
looks brax up rather than importing it: importing brax prints a line of mujoco's, which
Cadence's own import of brax keeps quiet).

Examples:
    >>> import importlib.util, pytest; _ = importlib.util.find_spec("brax") or pytest.skip("needs brax")
    >>> from cadence.envs.libs.brax import BraxEnv
    >>> env = BraxEnv("fast", batch_size=[2])  # a trivial env for tests; "reacher", "ant"... compile longer
    >>> next_seed = env.set_seed(0)
    >>> data = env.rollout(5)
    >>> data["next", "observation"].shape, data["next", "state", "pipeline_state", "x", "pos"].shape
    (torch.Size([2, 5, 2]), torch.Size([2, 5, 3]))
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Sequence
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

from cadence._utils import ClassProperty
from cadence.data import Bounded, Categorical, Composite, Unbounded
from cadence.envs.libs.jax_env import JaxEnvBase
from cadence.envs.libs.jax_utils import PytreeLayout, import_jax, jax_to_torch, torch_to_jax

__all__ = ["BraxEnv", "BraxWrapper"]

_INSTALL_HINT = 'pip install "cadence[brax]"'


def _import_brax(caller: str, device: torch.device | None = None) -> Any:
    """Imports brax and its envs (JAX first, see ``import_jax``), or raises an ImportError
    saying how to install it."""
    import_jax(caller, _INSTALL_HINT, device)
    try:
        # brax imports mujoco.mjx, which prints (to stdout) why its optional warp backend is missing
        with contextlib.redirect_stdout(io.StringIO()):
            import brax
            import brax.envs  # noqa: F401 - loads the registry
    except ImportError as err:
        raise ImportError(f"{caller} needs the brax library, which is not installed: {_INSTALL_HINT}.") from err
    return brax


def _registered_envs() -> list[str]:
    """Brax's registered env names, sorted ([] without brax)."""
    try:
        brax = _import_brax("BraxEnv")
    except ImportError:
        return []
    return sorted(brax.envs._envs)  # the registry get_environment reads; brax has no public listing


class _BraxStepWithGrad(torch.autograd.Function):
    """One step whose backward is the jitted step's VJP (see the module's docstring).

    Inputs: the wrapper, the action, then every state leaf (layout order). Outputs:
    every next state leaf; the floating-point ones carry gradients.
    """

    @staticmethod
    def forward(ctx: Any, env: BraxWrapper, action: torch.Tensor, *state: torch.Tensor) -> tuple[torch.Tensor, ...]:
        import jax

        layout, num_envs, device = env._layout, env.batch_size.numel(), env._jax_device
        leaves = layout.from_tensors(state, num_envs, device)
        floats = [leaves[i] for i in env._float_leaves]
        others = [leaves[i] for i in env._other_leaves]
        outputs = env._grad_forward_fn(floats, others, env._jax_action(action))
        jax.block_until_ready(outputs[:2])
        next_floats, next_others, vjp = outputs
        ctx.env, ctx.vjp, ctx.action_shape = env, vjp, action.shape
        next_leaves: list[Any] = [None] * len(layout)
        for i, leaf in zip(env._float_leaves, next_floats):
            next_leaves[i] = leaf
        for i, leaf in zip(env._other_leaves, next_others):
            next_leaves[i] = leaf
        tensors = layout.to_tensordict(next_leaves, env.batch_size, env.device)
        results = tuple(tensors.get(key) for key in layout.keys)
        ctx.mark_non_differentiable(*(results[i] for i in env._other_leaves))
        return results

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor | None) -> tuple[torch.Tensor | None, ...]:
        env = ctx.env
        layout, num_envs, device = env._layout, env.batch_size.numel(), env._jax_device
        cotangents = []
        for i in env._float_leaves:  # an output that no loss reached gets a zero cotangent
            shape, dtype = (num_envs, *layout.shapes[i]), layout.dtypes[i]
            grad = grads[i] if grads[i] is not None else torch.zeros(shape, dtype=dtype)
            cotangents.append(torch_to_jax(grad.reshape(shape), layout.jax_dtypes[i], device))
        grad_floats, grad_action = env._grad_backward_fn(ctx.vjp, cotangents)
        state_grads: list[torch.Tensor | None] = [None] * len(layout)
        for i, grad in zip(env._float_leaves, grad_floats):
            state_grads[i] = jax_to_torch(grad, env.device).reshape((*env.batch_size, *layout.shapes[i]))
        action_grad = jax_to_torch(grad_action, env.device).reshape(ctx.action_shape)
        return (None, action_grad, *state_grads)


def _any_requires_grad(action: torch.Tensor, leaves: Sequence[torch.Tensor | None]) -> bool:
    """Whether a step has anything to differentiate (random actions and a fresh reset do
    not); a missing leaf leaves it to the plain step, which names it."""
    if any(leaf is None for leaf in leaves):
        return False
    return action.requires_grad or any(leaf.requires_grad for leaf in leaves)


def _leaves_as_tensordict(layout: PytreeLayout, leaves: Sequence[torch.Tensor], batch_size: torch.Size) -> TensorDict:
    """The leaves (layout order) as the nested TensorDict ``from_tensordict`` reads."""
    td = TensorDict({}, batch_size=batch_size)
    for key, leaf in zip(layout.keys, leaves):
        td.set(key, leaf)
    return td


class BraxWrapper(JaxEnvBase):
    """Wraps a built Brax environment (``brax.envs.get_environment(...)``) as a batched Cadence env.

    See the module's docstring for the data layout, gradients, seeding and processes.

    Args:
        env: a ``brax.envs.Env`` (not auto-resetting, not vmapped).
        batch_size: the number of envs simulated together (vmapped), as a shape.
        requires_grad: make steps differentiable (gradients from the outputs back to the
            actions and the state).
        jit: compile reset and step with ``jax.jit`` (``False``: run them op by op, for
            debugging; much slower).
        device: where the data lives (``None``: the CPU, JAX's device).
        allow_done_after_reset, run_type_checks: as in ``EnvBase``.

    Raises:
        ImportError: brax (or JAX) is not installed.
        TypeError: ``env`` is not a Brax env.
        ValueError: ``env`` resets itself or is vmapped already.

    Examples:
        >>> import importlib.util, pytest; _ = importlib.util.find_spec("brax") or pytest.skip("needs brax")
        >>> brax = BraxWrapper.lib  # imports brax (quietly)
        >>> env = BraxWrapper(brax.envs.get_environment("fast"), batch_size=[4])
        >>> env.action_spec.shape, env.observation_spec["observation"].shape
        (torch.Size([4, 1]), torch.Size([4, 2]))
        >>> env.rollout(3)["next", "reward"].shape
        torch.Size([4, 3, 1])
    """

    #: the names ``BraxEnv`` accepts (empty without brax)
    available_envs = ClassProperty(lambda cls: _registered_envs())
    #: the brax module (imported on first access)
    lib = ClassProperty(lambda cls: _import_brax(cls.__name__))

    def __init__(
        self,
        env: Any,
        *,
        batch_size: torch.Size | Sequence[int] | None = None,
        requires_grad: bool = False,
        jit: bool = True,
        device: torch.device | str | None = None,
        allow_done_after_reset: bool = False,
        run_type_checks: bool = False,
    ) -> None:
        brax = _import_brax(type(self).__name__, None if device is None else torch.device(device))
        self._check_env(env, brax)
        super().__init__(
            env,
            traced=("reset", "step", "grad_forward", "grad_backward"),
            device=device,
            batch_size=batch_size,
            allow_done_after_reset=allow_done_after_reset,
            run_type_checks=run_type_checks,
        )
        self.requires_grad = requires_grad
        self._build_layout()
        self._build_specs()
        self.jit = jit

    def _check_env(self, env: Any, brax: Any) -> None:
        from brax.envs.wrappers import training

        if not isinstance(env, brax.envs.Env):
            raise TypeError(
                f"{type(self).__name__} wraps a brax.envs.Env (brax.envs.get_environment(...)); got "
                f"{type(env).__name__}."
            )
        layer = env
        while isinstance(layer, brax.envs.Wrapper):
            if isinstance(layer, training.AutoResetWrapper):
                raise ValueError(
                    f"{type(self).__name__}: the env resets itself (AutoResetWrapper); Cadence resets done envs "
                    "through '_reset': build it with brax.envs.create(..., auto_reset=False)."
                )
            if isinstance(layer, (training.VmapWrapper, training.DomainRandomizationVmapWrapper)):
                raise ValueError(
                    f"{type(self).__name__}: the env is vmapped already ({type(layer).__name__}); build it unbatched "
                    f"and pass batch_size to {type(self).__name__}."
                )
            layer = layer.env

    # ------------------------------------------------------------------ layout, specs
    def _build_layout(self) -> None:
        """The state's layout, read from the shapes of one reset (``jax.eval_shape``:
        traced, not computed)."""
        import jax

        example = jax.eval_shape(self._env.reset, jax.random.PRNGKey(0))
        self._layout = PytreeLayout(example)
        keys = self._layout.keys
        self._float_leaves = [i for i, dtype in enumerate(self._layout.dtypes) if dtype.is_floating_point]
        self._other_leaves = [i for i, dtype in enumerate(self._layout.dtypes) if not dtype.is_floating_point]
        self._obs_keys = [key for key in keys if key[0] == "obs"]
        self._has_truncation = ("info", "truncation") in keys
        missing = [name for name in ("reward", "done") if (name,) not in keys]
        if missing or not self._obs_keys:
            raise TypeError(
                f"{type(self).__name__}: the env's state lacks {missing or ['obs']}; expected a brax.envs.State "
                f"with obs, reward and done; its leaves are {keys}."
            )

    def _build_specs(self) -> None:
        batch, device = self.batch_size, self.device
        state = self._layout.spec(batch, device)
        observation = Composite(shape=batch, device=device)
        for key in self._obs_keys:
            observation[("observation", *key[1:])] = state[key].clone()
        observation["state"] = state
        self.observation_spec = observation
        self.state_spec = Composite(state=state.clone(), shape=batch, device=device)
        self.action_spec = Bounded(-1.0, 1.0, shape=(*batch, self._env.action_size), dtype=torch.float32, device=device)
        self.reward_spec = Unbounded(shape=(*batch, 1), dtype=state["reward"].dtype, device=device)
        flag = Categorical(2, shape=(*batch, 1), dtype=torch.bool, device=device)
        self.full_done_spec = Composite(
            done=flag, terminated=flag.clone(), truncated=flag.clone(), shape=batch, device=device
        )

    # ------------------------------------------------------------------ the jitted functions
    @property
    def jit(self) -> bool:
        """Whether reset and step run compiled (``jax.jit``); setting it rebuilds them."""
        return self._jit

    @jit.setter
    def jit(self, value: bool) -> None:
        import jax

        self._jit = bool(value)
        compile_ = jax.jit if value else (lambda fn, **kwargs: fn)
        self._reset_fn = compile_(self._batched_reset, static_argnums=1)
        self._step_fn = compile_(self._batched_step)
        self._grad_forward_fn = compile_(self._grad_forward)
        self._grad_backward_fn = compile_(self._grad_backward)

    @property
    def trace_counts(self) -> dict[str, int]:
        """How many times each function was traced, i.e. compiled with ``jit``: reset,
        step, and with ``requires_grad`` the step's forward and backward (every call
        without ``jit``).

        Examples:
            >>> import importlib.util, pytest; _ = importlib.util.find_spec("brax") or pytest.skip("needs brax")
            >>> env = BraxEnv("fast", batch_size=[2])
            >>> _ = env.rollout(3); _ = env.rollout(3)
            >>> env.trace_counts
            {'reset': 1, 'step': 1, 'grad_forward': 0, 'grad_backward': 0}
        """
        return super().trace_counts

    def _batched_reset(self, key: Any, num_envs: int) -> tuple[Any, list[Any]]:
        """``num_envs`` resets from ``key``: the next key and the states' leaves."""
        import jax

        self._count_trace("reset")
        key, subkey = jax.random.split(key)
        state = jax.vmap(self._env.reset)(jax.random.split(subkey, num_envs))
        return key, self._layout.flatten(state)

    def _vmapped_step(self, leaves: list[Any], action: Any) -> list[Any]:
        import jax

        state = jax.vmap(self._env.step)(self._layout.unflatten(leaves), action)
        return self._layout.flatten(state)

    def _batched_step(self, leaves: list[Any], action: Any) -> list[Any]:
        self._count_trace("step")
        return self._vmapped_step(leaves, action)

    def _grad_forward(self, floats: list[Any], others: list[Any], action: Any) -> tuple[list[Any], list[Any], Any]:
        """The step, differentiated in its floating-point leaves and the action: the next
        floating-point leaves, the next other leaves and the VJP (a pytree of residuals)."""
        import jax

        self._count_trace("grad_forward")

        def step(floats: list[Any], action: Any) -> tuple[list[Any], list[Any]]:
            leaves: list[Any] = [None] * len(self._layout)
            for i, leaf in zip(self._float_leaves, floats):
                leaves[i] = leaf
            for i, leaf in zip(self._other_leaves, others):
                leaves[i] = leaf
            out = self._vmapped_step(leaves, action)
            return [out[i] for i in self._float_leaves], [out[i] for i in self._other_leaves]

        next_floats, vjp, next_others = jax.vjp(step, floats, action, has_aux=True)
        return next_floats, next_others, vjp

    def _grad_backward(self, vjp: Any, cotangents: list[Any]) -> tuple[list[Any], Any]:
        """The gradients of the floating-point state leaves and of the action."""
        self._count_trace("grad_backward")
        return vjp(cotangents)

    # ------------------------------------------------------------------ reset, step
    def _jax_action(self, action: torch.Tensor) -> Any:
        shape = (self.batch_size.numel(), self._env.action_size)
        return torch_to_jax(action.reshape(shape), torch.float32, self._jax_device)

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
        import jax

        outputs = self._reset_fn(self._key, self.batch_size.numel())
        jax.block_until_ready(outputs)
        self._key, leaves = outputs
        state = self._layout.to_tensordict(leaves, self.batch_size, self.device)
        out = TensorDict({"state": state}, batch_size=self.batch_size, device=self.device)
        self._write_observation(out, state)
        return out

    def _write_observation(self, out: TensorDictBase, state: TensorDictBase) -> None:
        for key in self._obs_keys:
            out.set(("observation", *key[1:]), state.get(key))

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        state = tensordict.get("state", None)
        if state is None:
            raise KeyError(
                f"{type(self).__name__} is stateless: step() needs the 'state' entry that reset() and step() write "
                f"(spec {self.state_spec['state']}); the input holds {sorted(map(str, tensordict.keys()))}."
            )
        action = tensordict.get("action")
        leaves = [state.get(key, None) for key in self._layout.keys]
        if self.requires_grad and torch.is_grad_enabled() and _any_requires_grad(action, leaves):
            next_leaves = _BraxStepWithGrad.apply(self, action, *leaves)
            next_state = _leaves_as_tensordict(self._layout, next_leaves, self.batch_size)
        else:
            next_state = self._step_without_grad(state, action)
        batch = self.batch_size
        out = TensorDict({"state": next_state}, batch_size=batch, device=self.device)
        self._write_observation(out, next_state)
        out.set("reward", next_state.get("reward").reshape(*batch, 1))
        done = next_state.get("done").reshape(*batch, 1) != 0
        if self._has_truncation:
            truncated = next_state.get(("info", "truncation")).reshape(*batch, 1) != 0
            out.set("terminated", done & ~truncated)
            out.set("truncated", truncated)
        else:
            out.set("terminated", done)
            out.set("truncated", torch.zeros_like(done))
        return out

    def _step_without_grad(self, state: TensorDictBase, action: torch.Tensor) -> TensorDictBase:
        import jax

        leaves = self._layout.from_tensordict(state, self.batch_size.numel(), self._jax_device)
        next_leaves = self._step_fn(leaves, self._jax_action(action))
        jax.block_until_ready(next_leaves)
        return self._layout.to_tensordict(next_leaves, self.batch_size, self.device)

class BraxEnv(BraxWrapper):
    """A Brax env built from its registered name (``brax.envs.get_environment``).

    Args:
        env_name: the name, one of :attr:`available_envs` (``"reacher"``, ``"ant"``...).
        backend: Brax's physics pipeline (``"generalized"``, the default, ``"spring"``,
            ``"positional"``, ``"mjx"``); ``None``: the env's default.
        env_kwargs: other keyword arguments of the env's constructor.
        **kwargs: the wrapper's options (``batch_size``, ``requires_grad``, ``device``...;
            see ``BraxWrapper``).

    Raises:
        ImportError: brax is not installed (the message says how to install it).
        ValueError: an unknown name (the message lists the valid ones).

    Examples:
        >>> import importlib.util, pytest; _ = importlib.util.find_spec("brax") or pytest.skip("needs brax")
        >>> env = BraxEnv("fast")
        >>> env.batch_size, env.reward_spec.shape
        (torch.Size([]), torch.Size([1]))
        >>> "reacher" in BraxEnv.available_envs
        True
    """

    def __init__(
        self,
        env_name: str,
        *,
        backend: str | None = None,
        env_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        device = kwargs.get("device")
        brax = _import_brax(type(self).__name__, None if device is None else torch.device(device))
        names = _registered_envs()
        if env_name not in names:
            raise ValueError(f"{type(self).__name__}: unknown Brax env {env_name!r}; valid names: {', '.join(names)}.")
        self.env_name = env_name
        env_kwargs = dict(env_kwargs or {})
        if backend is not None:
            env_kwargs["backend"] = backend
        super().__init__(brax.envs.get_environment(env_name, **env_kwargs), **kwargs)

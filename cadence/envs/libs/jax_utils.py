"""JAX data as torch tensors and back, for the wrappers of JAX simulators (Jumanji, Brax).

A JAX simulator keeps its state in a *pytree* (nested dataclasses, named tuples, dicts
of ``jax.Array``). :class:`PytreeLayout` records where each leaf of such a tree goes in
a ``TensorDict`` (its attribute or dict-key path becomes a nested key) and turns a
batch of trees into a TensorDict and back, leaf by leaf, through DLPack: on the CPU a
leaf crosses without a copy in either direction (see :func:`jax_to_torch` and
:func:`torch_to_jax` for when a copy is unavoidable).

:func:`import_jax` imports JAX for a wrapper. When nothing chose JAX's platform yet
(``JAX_PLATFORMS``/``JAX_PLATFORM_NAME`` unset and JAX not imported) and the wrapper's
data lives on the CPU, it sets ``JAX_PLATFORMS=cpu`` first: with a CUDA build of jaxlib,
JAX would otherwise claim the GPU (and, by default, 75% of its memory) for a simulator
whose every output is wanted on the CPU, and each step would cross devices twice. For a
wrapper on a CUDA device it sets ``XLA_PYTHON_CLIENT_PREALLOCATE=false`` instead (when
unset), so that JAX and torch share the GPU. A variable that is already set is left
alone, and nothing is changed once JAX is imported (it has read them by then).

JAX runs threads of its own, which a fork does not copy: JAX hangs in a process forked
from one where it runs. Once a wrapper has started JAX here (:func:`note_jax_started`),
:func:`import_jax` raises ``RuntimeError`` in a forked child, naming the way out
(``ParallelEnv(..., start_method="spawn")``), rather than let the child hang.

Examples:
    >>> import pytest; jax = pytest.importorskip("jax")  # skips without jax
    >>> import jax.numpy as jnp
    >>> from cadence.envs.libs.jax_utils import PytreeLayout
    >>> tree = {"pos": jnp.zeros((4, 3)), "inner": {"count": jnp.ones(4, dtype=jnp.int32)}}
    >>> layout = PytreeLayout(tree, batch_dims=1)
    >>> layout.keys
    [('inner', 'count'), ('pos',)]
    >>> td = layout.to_tensordict(jax.tree_util.tree_leaves(tree), batch_size=(2, 2))
    >>> td["pos"].shape, td["inner", "count"].dtype
    (torch.Size([2, 2, 3]), torch.int32)
    >>> back = layout.from_tensordict(td, num_envs=4)
    >>> [leaf.shape for leaf in back]
    [(4,), (4, 3)]
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

from cadence.data import Composite, Unbounded

__all__ = [
    "PytreeLayout",
    "import_jax",
    "jax_device_for",
    "jax_to_torch",
    "note_jax_started",
    "prng_key_from_seed",
    "tensordict_dtype",
    "torch_dtype",
    "torch_to_jax",
]

#: torch has these unsigned dtypes but few operations on them (no ``torch.where``, no
#: sums): their leaves are shown as the signed dtype of the same width, bit for bit, and
#: given back to JAX as the unsigned dtype they were (JAX's PRNG keys are uint32).
_SIGNED_VIEW: dict[torch.dtype, torch.dtype] = {
    torch.uint16: torch.int16,
    torch.uint32: torch.int32,
    torch.uint64: torch.int64,
}


#: set in a process forked from one whose wrappers had started JAX (see ``note_jax_started``)
_forked_after_jax_started = False
_fork_hook_registered = False


def _mark_forked_child() -> None:
    global _forked_after_jax_started
    _forked_after_jax_started = True


def note_jax_started() -> None:
    """Records that this process runs JAX (a wrapper built its functions), so that a
    process forked from it refuses to use JAX (:func:`import_jax` raises there): JAX runs
    threads, and a forked copy of them hangs at its first computation.

    Examples:
        >>> note_jax_started()  # once per process; later calls do nothing
    """
    global _fork_hook_registered
    if not _fork_hook_registered and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_mark_forked_child)
        _fork_hook_registered = True


def import_jax(caller: str, install_hint: str, device: torch.device | None = None) -> ModuleType:
    """Imports JAX for a wrapper, choosing its platform first when nothing chose it.

    See the module's docstring for the environment variables set and why.

    Args:
        caller: the class importing it, for the error message.
        install_hint: how to install what is missing, for the error message.
        device: the torch device the wrapper's data lives on (``None``: the CPU).

    Returns:
        The ``jax`` module.

    Raises:
        ImportError: JAX is not installed (the message says how to install it).
        RuntimeError: this process was forked from one where JAX runs (a ``ParallelEnv``
            with the ``"fork"`` start method, say), where JAX would hang.

    Examples:
        >>> import pytest; _ = pytest.importorskip("jax")  # skips without jax
        >>> import_jax("MyEnv", "pip install jax").__name__
        'jax'
    """
    if _forked_after_jax_started:
        raise RuntimeError(
            f"{caller} cannot run JAX in a process forked from one where JAX runs (JAX's threads do not survive "
            "a fork: it would hang). Start the process with 'spawn', e.g. ParallelEnv(..., start_method=\"spawn\")."
        )
    if "jax" not in sys.modules:
        on_cpu = device is None or torch.device(device).type == "cpu"
        if on_cpu and "JAX_PLATFORMS" not in os.environ and "JAX_PLATFORM_NAME" not in os.environ:
            os.environ["JAX_PLATFORMS"] = "cpu"
        elif not on_cpu:
            os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    try:
        import jax
    except ImportError as err:
        raise ImportError(f"{caller} needs JAX, which is not installed: {install_hint}.") from err
    return jax


def jax_device_for(device: torch.device | None) -> Any:
    """The JAX device that matches a torch device: the same GPU where JAX has one, else
    JAX's first CPU device.

    Examples:
        >>> import pytest; _ = pytest.importorskip("jax")  # skips without jax
        >>> jax_device_for(None).platform
        'cpu'
    """
    import jax

    if device is not None and torch.device(device).type == "cuda":
        try:
            gpus = jax.devices("gpu")
        except RuntimeError:  # no GPU backend in this jaxlib, or JAX_PLATFORMS=cpu
            gpus = []
        index = torch.device(device).index or 0
        if index < len(gpus):
            return gpus[index]
    return jax.devices("cpu")[0]


def jax_to_torch(array: Any, device: torch.device | None = None) -> torch.Tensor:
    """A JAX array as a torch tensor, through DLPack.

    The tensor shares the array's memory (no copy) unless ``device`` differs from the
    array's device (a copy to ``device`` then). Unsigned 16/32/64-bit arrays come as the
    signed dtype of the same width, bit for bit (torch has few operations on unsigned
    dtypes). JAX arrays are immutable: the caller must not write into the tensor in place
    while JAX may still read the array (the wrappers hand out arrays that JAX dropped).

    Args:
        array: a ``jax.Array`` (computed: DLPack waits for it).
        device: where the tensor must live (``None``: where the array is).

    Examples:
        >>> import pytest; _ = pytest.importorskip("jax")  # skips without jax
        >>> import jax.numpy as jnp
        >>> array = jnp.arange(4.0)
        >>> tensor = jax_to_torch(array)
        >>> tensor.tolist(), tensor.data_ptr() == array.unsafe_buffer_pointer()
        ([0.0, 1.0, 2.0, 3.0], True)
        >>> jax_to_torch(jnp.zeros(2, dtype=jnp.uint32)).dtype
        torch.int32
    """
    tensor = torch.from_dlpack(array)
    signed = _SIGNED_VIEW.get(tensor.dtype)
    if signed is not None:
        tensor = tensor.view(signed)
    if device is not None and tensor.device != device:
        tensor = tensor.to(device)
    return tensor


def torch_to_jax(tensor: torch.Tensor, dtype: torch.dtype | None = None, jax_device: Any = None) -> Any:
    """A torch tensor as a JAX array, through DLPack.

    On the CPU, a contiguous tensor whose memory JAX accepts as it is (aligned: torch's
    own allocations are) crosses without a copy; a view that starts inside another
    tensor's memory (``x[1:]``) is copied by JAX, a non-contiguous one is made contiguous
    first. A tensor on a device JAX does not use here goes through the CPU. A tensor that
    requires grad is detached (use an autograd function to carry gradients).

    Args:
        tensor: the tensor.
        dtype: the dtype JAX must see (the tensor is cast, or reinterpreted bit for bit
            from the signed to the unsigned dtype of the same width); ``None``: its own.
        jax_device: the JAX device the array must live on (``None``: the tensor's).

    Examples:
        >>> import pytest; _ = pytest.importorskip("jax")  # skips without jax
        >>> import torch
        >>> tensor = torch.arange(4, dtype=torch.float32)
        >>> array = torch_to_jax(tensor)
        >>> array.unsafe_buffer_pointer() == tensor.data_ptr()
        True
        >>> torch_to_jax(torch.tensor([-1], dtype=torch.int32), dtype=torch.uint32).tolist()
        [4294967295]
    """
    import jax

    tensor = tensor.detach()
    if dtype is not None and tensor.dtype != dtype:
        if _SIGNED_VIEW.get(dtype) == tensor.dtype:
            tensor = tensor.view(dtype)
        else:
            tensor = tensor.to(dtype)
    if jax_device is not None and jax_device.platform == "cpu" and tensor.device.type != "cpu":
        tensor = tensor.cpu()
    array = jax.dlpack.from_dlpack(tensor.contiguous())
    if jax_device is not None and array.devices() != {jax_device}:
        array = jax.device_put(array, jax_device)
    return array


def prng_key_from_seed(seed: int) -> Any:
    """The JAX PRNG key of a Cadence seed (an int with ``0 <= seed < 2**63``).

    Seeds below ``2**32`` give ``jax.random.PRNGKey(seed)``; the high 32 bits of a larger
    seed are folded into the key of its low 32 bits, so that every seed gives its own key.

    Examples:
        >>> import pytest; jax = pytest.importorskip("jax")  # skips without jax
        >>> bool((prng_key_from_seed(7) == jax.random.PRNGKey(7)).all())
        True
        >>> bool((prng_key_from_seed(2**40 + 7) == prng_key_from_seed(7)).all())
        False
    """
    import jax

    key = jax.random.PRNGKey(seed & 0xFFFFFFFF)
    high = seed >> 32
    if high:
        key = jax.random.fold_in(key, high)
    return key


def torch_dtype(dtype: Any) -> torch.dtype:
    """The torch dtype of a JAX (numpy) dtype, bfloat16 included.

    Raises:
        TypeError: a dtype torch has no match for (JAX's typed PRNG keys, strings...).

    Examples:
        >>> import numpy as np
        >>> torch_dtype(np.float32), torch_dtype(np.uint32)
        (torch.float32, torch.uint32)
    """
    np_dtype = np.dtype(dtype)
    if np_dtype.name == "bfloat16":
        return torch.bfloat16
    if np_dtype.kind not in "biuf":
        raise TypeError(f"torch has no dtype for {np_dtype}")
    return torch.from_numpy(np.empty(0, dtype=np_dtype)).dtype


def tensordict_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype a JAX array of torch dtype ``dtype`` has in a TensorDict: unsigned 16/32/64-bit
    ones are shown as the signed dtype of the same width (see :func:`jax_to_torch`).

    Examples:
        >>> tensordict_dtype(torch.uint32), tensordict_dtype(torch.uint8), tensordict_dtype(torch.float32)
        (torch.int32, torch.uint8, torch.float32)
    """
    return _SIGNED_VIEW.get(dtype, dtype)


def _path_name(entry: Any) -> str:
    """The TensorDict key of one step of a pytree path (an attribute, a dict key, an index)."""
    for attribute in ("name", "key", "idx"):
        if hasattr(entry, attribute):
            return str(getattr(entry, attribute))
    return str(entry)


class PytreeLayout:
    """Where each leaf of a batch of JAX pytrees goes in a TensorDict, and back.

    Built once from an example batch (arrays or ``jax.ShapeDtypeStruct`` leaves, e.g.
    from ``jax.eval_shape``), it keeps the tree's structure, each leaf's nested key (the
    attribute names, dict keys and indices on its path), shape and dtype. Leaves are
    handed over as flat lists in the order of ``jax.tree_util.tree_leaves``, which is
    what jitted functions take and return cheaply; :meth:`flatten` and
    :meth:`unflatten` switch between the tree and the list (inside a jitted function,
    say).

    Args:
        example: the example tree; its leaves' first ``batch_dims`` dims are the batch.
        batch_dims: how many leading dims of the example's leaves are batch dims.
        bare_leaf_key: the key of the leaf when the tree is one bare array.

    Raises:
        TypeError: a leaf whose dtype torch cannot hold (JAX's typed PRNG keys, say).
        ValueError: two leaves that would get the same key.

    Examples:
        >>> import pytest; jax = pytest.importorskip("jax")  # skips without jax
        >>> import jax.numpy as jnp
        >>> layout = PytreeLayout(jnp.zeros((3, 2)), batch_dims=1, bare_leaf_key="observation")
        >>> layout.keys, layout.shapes
        ([('observation',)], [(2,)])
    """

    def __init__(self, example: Any, batch_dims: int = 0, bare_leaf_key: str = "value") -> None:
        import jax

        paths_and_leaves, self.treedef = jax.tree_util.tree_flatten_with_path(example)
        self.keys: list[tuple[str, ...]] = []
        self.shapes: list[tuple[int, ...]] = []
        self.jax_dtypes: list[torch.dtype] = []  # the dtype on JAX's side
        self.dtypes: list[torch.dtype] = []  # the dtype in the TensorDict
        for path, leaf in paths_and_leaves:
            key = tuple(_path_name(entry) for entry in path) or (bare_leaf_key,)
            try:
                jax_dtype = torch_dtype(leaf.dtype)
            except TypeError as err:
                raise TypeError(
                    f"PytreeLayout: leaf {key!r} has dtype {leaf.dtype}, which torch cannot hold; expected a "
                    "boolean, integer or floating dtype (raw uint32 PRNG keys rather than typed jax.random.key)."
                ) from err
            self.keys.append(key)
            self.shapes.append(tuple(leaf.shape[batch_dims:]))
            self.jax_dtypes.append(jax_dtype)
            self.dtypes.append(tensordict_dtype(jax_dtype))
        for i, key in enumerate(self.keys):
            clash = next((other for other in self.keys[:i] if _prefix_of(other, key) or _prefix_of(key, other)), None)
            if clash is not None:
                raise ValueError(f"PytreeLayout: leaves {clash!r} and {key!r} would share a TensorDict entry.")

    def __len__(self) -> int:
        return len(self.keys)

    def flatten(self, tree: Any) -> list[Any]:
        """The tree's leaves, in layout order (works inside a jitted function)."""
        import jax

        return jax.tree_util.tree_leaves(tree)

    def unflatten(self, leaves: Sequence[Any]) -> Any:
        """The tree of these leaves (works inside a jitted function)."""
        import jax

        return jax.tree_util.tree_unflatten(self.treedef, list(leaves))

    def spec(self, batch_size: torch.Size, device: torch.device | None = None) -> Composite:
        """An ``Unbounded`` spec per leaf, nested as the keys are, with the batch dims in front.

        Examples:
            >>> import pytest; jax = pytest.importorskip("jax")  # skips without jax
            >>> import jax.numpy as jnp
            >>> layout = PytreeLayout({"a": {"b": jnp.zeros(2, dtype=jnp.uint32)}})
            >>> layout.spec(torch.Size([5]))["a", "b"].shape, layout.spec(torch.Size([5]))["a", "b"].dtype
            (torch.Size([5, 2]), torch.int32)
        """
        spec = Composite(shape=batch_size, device=device)
        for key, shape, dtype in zip(self.keys, self.shapes, self.dtypes):
            spec[key] = Unbounded(shape=(*batch_size, *shape), dtype=dtype, device=device)  # makes the parents
        return spec

    def to_tensordict(
        self, leaves: Sequence[Any], batch_size: Sequence[int], device: torch.device | None = None
    ) -> TensorDictBase:
        """A TensorDict of these leaves (each ``[num_envs, *shape]``), reshaped to ``batch_size``.

        No leaf is copied on the CPU (see :func:`jax_to_torch`).

        Args:
            leaves: the leaves, in layout order, batched on one leading dim.
            batch_size: the TensorDict's batch size (its product is the leaves' first dim).
            device: where the tensors must live (``None``: where the arrays are).
        """
        batch_size = torch.Size(batch_size)
        nested: dict[str, Any] = {}
        for key, shape, leaf in zip(self.keys, self.shapes, leaves):
            node = nested
            for name in key[:-1]:
                node = node.setdefault(name, {})
            node[key[-1]] = jax_to_torch(leaf, device).reshape((*batch_size, *shape))
        return TensorDict(nested, batch_size=batch_size, device=device)

    def from_tensordict(self, tensordict: TensorDictBase, num_envs: int | None, jax_device: Any = None) -> list[Any]:
        """The leaves held in ``tensordict`` (as :meth:`to_tensordict` wrote them), each
        reshaped to ``[num_envs, *shape]`` (``num_envs=None``: to ``shape``, one env's
        tree) and given JAX's dtype, as JAX arrays.

        Raises:
            KeyError: a leaf is missing (the message names it and what is there).
            ValueError: a leaf of the wrong shape.
        """
        tensors = []
        for key, shape in zip(self.keys, self.shapes):
            value = tensordict.get(key, None)
            if value is None:
                expected = "[*batch" + "".join(f", {size}" for size in shape) + "]"
                raise KeyError(
                    f"The state entry {key!r} is missing: expected a tensor of shape {expected} holding the "
                    f"simulator's state; the state holds {sorted(map(str, tensordict.keys(True, True)))}."
                )
            tensors.append(value)
        return self.from_tensors(tensors, num_envs, jax_device)

    def from_tensors(self, tensors: Sequence[torch.Tensor], num_envs: int | None, jax_device: Any = None) -> list[Any]:
        """As :meth:`from_tensordict`, from the leaves' tensors in layout order.

        Raises:
            ValueError: a leaf of the wrong shape.
        """
        leaves = []
        for key, shape, jax_dtype, value in zip(self.keys, self.shapes, self.jax_dtypes, tensors):
            try:
                value = value.reshape(shape if num_envs is None else (num_envs, *shape))
            except RuntimeError as err:
                raise ValueError(
                    f"The state entry {key!r} has shape {tuple(value.shape)}; expected "
                    f"{'one env' if num_envs is None else f'{num_envs} envs'} of shape {shape}."
                ) from err
            leaves.append(torch_to_jax(value, jax_dtype, jax_device))
        return leaves


def _prefix_of(short: tuple[str, ...], long: tuple[str, ...]) -> bool:
    return len(short) <= len(long) and long[: len(short)] == short



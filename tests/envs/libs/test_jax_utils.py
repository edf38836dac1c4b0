"""jax_utils: JAX pytrees as TensorDicts and back (DLPack), PRNG keys from seeds, importing JAX."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import NamedTuple

import pytest
import torch

jax = pytest.importorskip("jax", reason="jax is not installed (pip install \"cadence[jumanji]\" or \"cadence[brax]\")")
import jax.numpy as jnp  # noqa: E402

from cadence.data import Composite, Unbounded  # noqa: E402
from cadence.envs.libs.jax_utils import (  # noqa: E402
    PytreeLayout,
    jax_to_torch,
    prng_key_from_seed,
    torch_to_jax,
)


class Position(NamedTuple):
    row: jax.Array
    col: jax.Array


class Board(NamedTuple):
    cells: jax.Array
    head: Position
    extras: dict
    key: jax.Array


def board_batch(num_envs: int) -> Board:
    return Board(
        cells=jnp.arange(num_envs * 6, dtype=jnp.float32).reshape(num_envs, 2, 3),
        head=Position(jnp.arange(num_envs, dtype=jnp.int32), -jnp.arange(num_envs, dtype=jnp.int32)),
        extras={"alive": jnp.ones(num_envs, dtype=bool), "score": jnp.zeros((num_envs, 1), dtype=jnp.bfloat16)},
        key=jnp.full((num_envs, 2), 2**32 - 1, dtype=jnp.uint32),
    )


# ---------------------------------------------------------------- DLPack, both ways
def test_jax_to_torch_shares_memory_and_shows_unsigned_as_signed() -> None:
    array = jnp.arange(6.0).reshape(2, 3)
    tensor = jax_to_torch(array)
    assert tensor.data_ptr() == array.unsafe_buffer_pointer() and tensor.shape == (2, 3)
    key = jax_to_torch(jnp.array([0, 2**32 - 1], dtype=jnp.uint32))
    assert key.dtype == torch.int32 and key.tolist() == [0, -1]  # the same bits


def test_torch_to_jax_without_copies_where_jax_accepts_the_memory() -> None:
    tensor = torch.arange(8, dtype=torch.float32)
    assert torch_to_jax(tensor).unsafe_buffer_pointer() == tensor.data_ptr()
    offset = tensor[1:]  # starts 4 bytes into torch's allocation: JAX copies it
    assert torch_to_jax(offset).tolist() == offset.tolist()
    strided = torch.arange(12.0).reshape(3, 4).T  # not contiguous: made so first
    assert torch_to_jax(strided).tolist() == strided.tolist()
    with_grad = torch.ones(3, requires_grad=True)
    assert torch_to_jax(with_grad).tolist() == [1.0, 1.0, 1.0]


def test_torch_to_jax_gives_jax_its_dtype() -> None:
    signed = torch.tensor([-1, 5], dtype=torch.int32)
    unsigned = torch_to_jax(signed, torch.uint32)
    assert unsigned.dtype == jnp.uint32 and unsigned.tolist() == [2**32 - 1, 5]
    assert torch_to_jax(torch.ones(2, dtype=torch.float64), torch.float32).dtype == jnp.float32


# ---------------------------------------------------------------- layouts
def test_layout_round_trip_keeps_every_leaf_and_the_batch_shape() -> None:
    batch = board_batch(6)
    layout = PytreeLayout(batch, batch_dims=1)
    assert layout.keys == [
        ("cells",), ("head", "row"), ("head", "col"), ("extras", "alive"), ("extras", "score"), ("key",)
    ]
    td = layout.to_tensordict(jax.tree_util.tree_leaves(batch), batch_size=(2, 3))
    assert td.batch_size == (2, 3) and td["cells"].shape == (2, 3, 2, 3)
    assert td["key"].dtype == torch.int32 and td["extras", "score"].dtype == torch.bfloat16
    assert td["head", "col"].tolist() == [[0, -1, -2], [-3, -4, -5]]
    back = layout.unflatten(layout.from_tensordict(td, num_envs=6))
    assert jax.tree_util.tree_structure(back) == jax.tree_util.tree_structure(batch)
    for got, expected in zip(jax.tree_util.tree_leaves(back), jax.tree_util.tree_leaves(batch)):
        assert got.dtype == expected.dtype and got.shape == expected.shape and bool((got == expected).all())
    one = layout.unflatten(layout.from_tensordict(td[1, 2], num_envs=None))  # one env: no batch dim
    assert one.cells.shape == (2, 3) and int(one.head.row) == 5


def test_layout_spec_matches_its_tensordicts() -> None:
    layout = PytreeLayout(board_batch(4), batch_dims=1)
    spec = layout.spec(torch.Size([4]))
    assert isinstance(spec, Composite) and isinstance(spec["head", "row"], Unbounded)
    td = layout.to_tensordict(jax.tree_util.tree_leaves(board_batch(4)), batch_size=(4,))
    assert spec.is_in(td)
    assert spec["key"].dtype == torch.int32 and spec["cells"].shape == (4, 2, 3)


def test_layout_names_what_is_missing_or_misshapen() -> None:
    layout = PytreeLayout(board_batch(2), batch_dims=1)
    td = layout.to_tensordict(jax.tree_util.tree_leaves(board_batch(2)), batch_size=(2,))
    with pytest.raises(KeyError) as missing:
        layout.from_tensordict(td.exclude(("head", "col")), num_envs=2)
    assert "('head', 'col') is missing: expected a tensor of shape [*batch]" in missing.value.args[0]
    td["cells"] = torch.zeros(2, 5)
    with pytest.raises(ValueError, match=r"'cells',\) has shape \(2, 5\); expected 2 envs of shape \(2, 3\)"):
        layout.from_tensordict(td, num_envs=2)


def test_layout_refuses_leaves_torch_cannot_hold() -> None:
    with pytest.raises(TypeError, match="raw uint32 PRNG keys"):
        PytreeLayout({"key": jax.random.key(0)})


def test_layout_of_a_bare_array() -> None:
    layout = PytreeLayout(jnp.zeros((5, 3)), batch_dims=1, bare_leaf_key="observation")
    assert layout.keys == [("observation",)] and layout.shapes == [(3,)]


# ---------------------------------------------------------------- seeds
def test_prng_keys_from_seeds() -> None:
    assert bool((prng_key_from_seed(123) == jax.random.PRNGKey(123)).all())
    assert bool((prng_key_from_seed(2**32 - 1) == jax.random.PRNGKey(2**32 - 1)).all())
    keys = {tuple(prng_key_from_seed(seed).tolist()) for seed in (0, 1, 2**32, 2**32 + 1, 2**62 + 7)}
    assert len(keys) == 5
    assert prng_key_from_seed(2**62 + 7).tolist() == prng_key_from_seed(2**62 + 7).tolist()


# ---------------------------------------------------------------- importing JAX
def _run(code: str, **env_vars: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_PLATFORMS", "JAX_PLATFORM_NAME",
                                                             "XLA_PYTHON_CLIENT_PREALLOCATE")}
    env.update(env_vars)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=180, env=env)


def test_wrappers_import_jax_lazily_and_choose_the_cpu_when_nobody_did() -> None:
    _run(
        "import os, sys\n"
        "import cadence.envs.libs.jax_utils as u, cadence.envs.libs.jax_env\n"
        "import cadence.envs.libs.jumanji, cadence.envs.libs.brax\n"
        "assert not {'jax', 'jumanji', 'brax'} & set(sys.modules), 'imported too early'\n"
        "u.import_jax('Test', 'pip install jax')\n"
        "assert os.environ['JAX_PLATFORMS'] == 'cpu' and 'XLA_PYTHON_CLIENT_PREALLOCATE' not in os.environ\n"
        "import jax; assert jax.devices()[0].platform == 'cpu'\n"
    )


def test_variables_already_set_or_read_are_left_alone() -> None:
    # set by the user: kept; a GPU wrapper: JAX may take its platform, without grabbing the GPU's memory
    _run(
        "import os, cadence.envs.libs.jax_utils as u\n"
        "u.import_jax('Test', 'pip install jax', device='cuda')\n"
        "assert os.environ['JAX_PLATFORMS'] == 'cpu' and os.environ['XLA_PYTHON_CLIENT_PREALLOCATE'] == 'false'\n",
        JAX_PLATFORMS="cpu",
    )
    # JAX imported already: it has read them, nothing is set
    _run(
        "import os, jax, cadence.envs.libs.jax_utils as u\n"
        "u.import_jax('Test', 'pip install jax')\n"
        "assert 'JAX_PLATFORMS' not in os.environ\n"
    )

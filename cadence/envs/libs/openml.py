"""``OpenMLEnv``: a contextual bandit built from an OpenML classification dataset.

Each reset draws a batch of rows from the dataset: the row's features are the
``"observation"`` (float32), its class index is ``"y"``. The action names a class (an
index, ``Categorical``, or a one-hot vector); the reward is ``1.0`` where it is the
row's class and ``0.0`` elsewhere, and every episode is one step long: the step is done
(and terminated) right away, and the next reset draws new rows.

``"y"`` is part of the observation spec, as in torchrl, and of the state spec: ``step``
reads the label (and the features, which the step's output repeats) back from its input,
as the reset wrote them; the env keeps no per-episode state of its own. A policy should
read ``"observation"`` only.

Rows are drawn without replacement: the env walks through a random permutation of the
dataset, one batch at a time, and draws a new permutation when fewer rows than a batch
are left (the leftover rows are skipped, like a sampler that drops its last, incomplete
batch). The permutations come from the env's own generator ``env.rng``: seeding
(``env.set_seed(seed)``) restarts the walk, so that the same seed and the same actions
give the same data.

The data is read from openml's local cache and nothing is downloaded here (see
:mod:`cadence.envs.libs.openml_cache`): cache a dataset once with
``openml.datasets.get_dataset(id, download_data=True)`` where the network is reachable.
``OpenMLEnv`` takes either an OpenML dataset id (an ``int``) or one of the names in
:data:`OPENML_DATASETS`, which are torchrl's: ``"adult_num"``, ``"adult_onehot"``,
``"mushroom_num"``, ``"mushroom_onehot"``, ``"covertype"``, ``"shuttle"`` and ``"magic"``.
The features are encoded as :mod:`cadence.envs.libs.openml_features` describes: numeric
columns standardised, nominal ones one-hot (``"onehot"``, the default for an id) or as
standardised codes (``"codes"``, the ``*_num`` names).

Examples:
    >>> import pytest; openml = pytest.importorskip("openml")  # skips without openml
    >>> from cadence.envs.libs.openml import OpenMLEnv
    >>> OpenMLEnv.available_envs
    ['adult_num', 'adult_onehot', 'mushroom_num', 'mushroom_onehot', 'covertype', 'shuttle', 'magic']
    >>> OpenMLEnv("magic", cache_directory="/nonexistent")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    FileNotFoundError: OpenML dataset 1120 is not in the local cache: ...
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

from cadence.data import Categorical, Composite, OneHot, Unbounded
from cadence.envs.common import EnvBase
from cadence.envs.libs.openml_cache import read_cached_dataset, validate_dataset_id
from cadence.envs.libs.openml_features import (
    CATEGORICAL_ENCODINGS,
    CategoricalEncoding,
    EncodedClassification,
    encode_classification,
)

__all__ = ["OPENML_DATASETS", "OpenMLDatasetRecipe", "OpenMLEnv", "load_openml_classification"]


@dataclass(frozen=True)
class OpenMLDatasetRecipe:
    """How one of :data:`OPENML_DATASETS` is made from an OpenML dataset.

    Attributes:
        dataset_id: the OpenML dataset id.
        target: the column holding the classes; ``None`` takes the dataset's default
            target.
        categorical_encoding: ``"onehot"`` or ``"codes"`` for the nominal features.
        drop_incomplete_rows: leave out every row that has a missing value.
        drop_default_target: with another ``target``, the dataset's default target is
            not a feature either.

    Examples:
        >>> from cadence.envs.libs.openml import OPENML_DATASETS
        >>> OPENML_DATASETS["magic"].dataset_id
        1120
    """

    dataset_id: int
    target: str | None = None
    categorical_encoding: CategoricalEncoding = "onehot"
    drop_incomplete_rows: bool = False
    drop_default_target: bool = False


#: torchrl's dataset names and the OpenML data they are made of. The ids are those of the
#: versions torchrl fetches by name (``adult`` v1, ``mushroom`` v1, ``shuttle`` v1,
#: ``MagicTelescope`` v1); for ``covertype``, the dataset torchrl's code links (d/150, the
#: 7-class forest cover table; every feature is standardised, so its scaling does not
#: matter). As in torchrl, the adult bandit is the occupation-guessing one of
#: the contextual bandit literature: the target is ``occupation``, the income class (the
#: dataset's default target) is left out, and so are the rows with a missing value.
OPENML_DATASETS: Mapping[str, OpenMLDatasetRecipe] = MappingProxyType(
    {
        "adult_num": OpenMLDatasetRecipe(
            179, "occupation", "codes", drop_incomplete_rows=True, drop_default_target=True
        ),
        "adult_onehot": OpenMLDatasetRecipe(
            179, "occupation", "onehot", drop_incomplete_rows=True, drop_default_target=True
        ),
        "mushroom_num": OpenMLDatasetRecipe(24, None, "codes"),
        "mushroom_onehot": OpenMLDatasetRecipe(24, None, "onehot"),
        "covertype": OpenMLDatasetRecipe(150),
        "shuttle": OpenMLDatasetRecipe(40685),
        "magic": OpenMLDatasetRecipe(1120),
    }
)


def _recipe_for(
    dataset: str | int, target: str | None, categorical_encoding: CategoricalEncoding | None
) -> OpenMLDatasetRecipe:
    """The recipe of a known name, or one built for an id; a name never makes a path."""
    if isinstance(dataset, str):
        recipe = OPENML_DATASETS.get(dataset)
        if recipe is None:
            raise ValueError(
                f"OpenMLEnv: unknown dataset name {dataset!r}; expected one of {list(OPENML_DATASETS)} "
                "or an OpenML dataset id (an int)."
            )
        if target is not None or categorical_encoding is not None:
            raise ValueError(
                f"OpenMLEnv: {dataset!r} fixes its target and encoding (target={recipe.target!r}, "
                f"categorical_encoding={recipe.categorical_encoding!r}); target and categorical_encoding can "
                f"only be given with a dataset id, got target={target!r}, "
                f"categorical_encoding={categorical_encoding!r}."
            )
        return recipe
    return OpenMLDatasetRecipe(validate_dataset_id(dataset), target, categorical_encoding or "onehot")


def load_openml_classification(
    dataset: str | int,
    *,
    cache_directory: str | os.PathLike[str] | None = None,
    target: str | None = None,
    categorical_encoding: CategoricalEncoding | None = None,
) -> EncodedClassification:
    """Reads a classification dataset from openml's local cache and encodes it as tensors.

    This is the whole data side of :class:`OpenMLEnv`: offline reading
    (:func:`~cadence.envs.libs.openml_cache.read_cached_dataset`), then encoding
    (:func:`~cadence.envs.libs.openml_features.encode_classification`).

    Args:
        dataset: one of the names of :data:`OPENML_DATASETS`, or an OpenML dataset id
            (a positive ``int``).
        cache_directory: the folder holding openml's ``datasets/`` cache; ``None`` takes
            ``openml.config.get_cache_directory()``.
        target: with an id, the class column (default: the dataset's default target).
        categorical_encoding: with an id, ``"onehot"`` (default) or ``"codes"``.

    Returns:
        The observation matrix, the labels and the names of the columns and classes.

    Raises:
        ValueError: an unknown name, ``target``/``categorical_encoding`` given with a
            name, a dataset with no default target (pass ``target``), and the errors of
            the reading and encoding.
        TypeError: a dataset that is neither a name nor an int.
        FileNotFoundError: the dataset is not in the local cache.
        ImportError: openml is not installed.

    Examples:
        >>> import pytest; openml = pytest.importorskip("openml")  # skips without openml
        >>> from cadence.envs.libs.openml import load_openml_classification
        >>> load_openml_classification("iris")
        Traceback (most recent call last):
        ...
        ValueError: OpenMLEnv: unknown dataset name 'iris'; expected one of ['adult_num', 'adult_onehot', \
'mushroom_num', 'mushroom_onehot', 'covertype', 'shuttle', 'magic'] or an OpenML dataset id (an int).
    """
    recipe = _recipe_for(dataset, target, categorical_encoding)
    if recipe.categorical_encoding not in CATEGORICAL_ENCODINGS:
        raise ValueError(
            f"OpenMLEnv: categorical_encoding must be one of {list(CATEGORICAL_ENCODINGS)}, "
            f"got {recipe.categorical_encoding!r}."
        )
    table = read_cached_dataset(recipe.dataset_id, cache_directory)
    column = recipe.target or table.default_target
    if column is None or "," in column:
        raise ValueError(
            f"OpenML dataset {table.dataset_id} ({table.name!r}) has {'no' if column is None else 'several'} default "
            f"target ({column!r}); pass target= one of its columns: {list(table.columns)}."
        )
    excluded = [table.default_target] if recipe.drop_default_target and table.default_target else []
    return encode_classification(
        table, column, recipe.categorical_encoding, recipe.drop_incomplete_rows, exclude=excluded
    )


class OpenMLEnv(EnvBase):
    """A contextual bandit on an OpenML classification dataset (see the module).

    Each :meth:`reset` draws ``batch_size`` rows: ``"observation"`` holds their features
    (float32, shape ``(*batch_size, num_features)``) and ``"y"`` their class index
    (int64, shape ``batch_size``). :meth:`step` reads the ``"action"`` (a class index of
    shape ``batch_size``, or one-hot of shape ``(*batch_size, num_classes)`` with
    ``categorical_action_encoding=False``) and ``"y"``, and writes ``"reward"`` (``1.0``
    where the action is the class, else ``0.0``, shape ``(*batch_size, 1)``), ``"done"``
    and ``"terminated"`` (always true: one-step episodes), with the same observation.

    Args:
        dataset: one of :attr:`available_envs` (torchrl's names, :data:`OPENML_DATASETS`)
            or an OpenML dataset id (an ``int``). Only these make a path: nothing the
            caller passes is joined to the cache folder unchecked.
        batch_size: how many rows each reset draws, as a shape (default ``()``: one).
            Its number of elements must not exceed the number of rows.
        device: where the data and the specs live (default: the CPU).
        categorical_action_encoding: actions are class indices (``Categorical``, as
            torchrl); ``False`` takes one-hot actions (``OneHot``).
        cache_directory: the folder holding openml's ``datasets/`` cache (``None``:
            ``openml.config.get_cache_directory()``).
        target: with a dataset id, the class column (default: the dataset's default
            target).
        categorical_encoding: with a dataset id, how nominal features become numbers:
            ``"onehot"`` (default) or ``"codes"``.

    Attributes:
        available_envs: the dataset names this class knows.
        feature_names: one name per observation column.
        class_names: the class of each label index.
        num_rows: the number of rows (samples) of the dataset.

    Raises:
        ValueError: an unknown name, a batch larger than the dataset, and the errors of
            :func:`load_openml_classification`.
        FileNotFoundError: the dataset is not in openml's local cache.
        ImportError: openml is not installed.

    Examples:
        >>> import pytest; openml = pytest.importorskip("openml")  # skips without openml
        >>> import tempfile, torch
        >>> from pathlib import Path
        >>> from cadence.envs.libs.openml import OpenMLEnv
        >>> cache = Path(tempfile.mkdtemp())  # a two-class dataset, id 42, in openml's layout
        >>> folder = cache / "datasets" / "42"
        >>> folder.mkdir(parents=True)
        >>> _ = (folder / "description.xml").write_text(
        ...     '<oml:data_set_description xmlns:oml="http://openml.org/openml">'
        ...     "<oml:id>42</oml:id><oml:name>toy</oml:name><oml:format>ARFF</oml:format>"
        ...     "<oml:default_target_attribute>class</oml:default_target_attribute>"
        ...     "</oml:data_set_description>")
        >>> _ = (folder / "dataset.arff").write_text(
        ...     "@RELATION toy\\n@ATTRIBUTE size REAL\\n@ATTRIBUTE colour {red,blue}\\n"
        ...     "@ATTRIBUTE class {no,yes}\\n@DATA\\n1,red,yes\\n2,blue,no\\n3,red,yes\\n4,blue,no\\n")
        >>> env = OpenMLEnv(42, batch_size=[2], cache_directory=cache)
        >>> env.feature_names, env.class_names
        (('size', 'colour=blue', 'colour=red'), ('no', 'yes'))
        >>> _ = env.set_seed(0)
        >>> data = env.reset()
        >>> data["observation"].shape, data["y"].shape
        (torch.Size([2, 3]), torch.Size([2]))
        >>> data["action"] = data["y"]  # the right answers
        >>> out = env.step(data)["next"]
        >>> out["reward"].squeeze(-1).tolist(), out["done"].squeeze(-1).tolist()
        ([1.0, 1.0], [True, True])
    """

    #: The dataset names this class knows (torchrl's), besides plain OpenML ids.
    available_envs: list[str] = list(OPENML_DATASETS)

    def __init__(
        self,
        dataset: str | int,
        *,
        batch_size: torch.Size | Sequence[int] | int | None = None,
        device: torch.device | str | None = None,
        categorical_action_encoding: bool = True,
        cache_directory: str | os.PathLike[str] | None = None,
        target: str | None = None,
        categorical_encoding: CategoricalEncoding | None = None,
    ) -> None:
        if isinstance(batch_size, int):
            batch_size = (batch_size,)
        super().__init__(device=device, batch_size=batch_size)
        data = load_openml_classification(
            dataset, cache_directory=cache_directory, target=target, categorical_encoding=categorical_encoding
        )
        self.dataset = dataset
        self.feature_names = data.feature_names
        self.class_names = data.class_names
        self.num_rows = data.num_rows
        self.categorical_action_encoding = categorical_action_encoding
        num_draws = self.batch_size.numel()
        if num_draws > data.num_rows:
            raise ValueError(
                f"OpenMLEnv({dataset!r}): batch_size {tuple(self.batch_size)} draws {num_draws} distinct rows per "
                f"reset, but the dataset has {data.num_rows} rows."
            )
        # buffers, so that env.to(device) moves the data with the specs
        data_device = self.device if self.device is not None else torch.device("cpu")
        self.register_buffer("_observations", data.observation.to(data_device), persistent=False)
        self._observations: torch.Tensor
        self.register_buffer("_labels", data.labels.to(data_device), persistent=False)
        self._labels: torch.Tensor
        self._order: torch.Tensor | None = None  # the permutation being walked through, on the CPU
        self._cursor = 0
        self._make_specs(len(data.feature_names), data.num_classes)

    def _make_specs(self, num_features: int, num_classes: int) -> None:
        shape = self.batch_size
        device = self.device
        self.observation_spec = Composite(
            observation=Unbounded(shape=(*shape, num_features), dtype=torch.float32, device=device),
            y=Categorical(num_classes, shape=shape, dtype=torch.int64, device=device),
            shape=shape,
            device=device,
        )
        # step() reads the label (and echoes the features) from its input: they are state,
        # which batched envs then hand to their workers with the action
        self.state_spec = self.observation_spec.clone()
        if self.categorical_action_encoding:
            self.action_spec = Categorical(num_classes, shape=shape, dtype=torch.int64, device=device)
        else:
            self.action_spec = OneHot(num_classes, shape=(*shape, num_classes), device=device)
        self.reward_spec = Unbounded(shape=(*shape, 1), dtype=torch.float32, device=device)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(dataset={self.dataset!r}, rows={self.num_rows}, "
            f"features={len(self.feature_names)}, classes={len(self.class_names)}, "
            f"batch_size={self.batch_size}, device={self.device})"
        )

    # ------------------------------------------------------------------ seeding
    def _set_seed(self, seed: int | None) -> None:
        # ``self.rng`` was just seeded by set_seed: start a new walk through the data from it
        if seed is not None:
            self._order = None
            self._cursor = 0

    def _draw_rows(self, count: int) -> torch.Tensor:
        """``count`` row indices, distinct, the next ones of the current permutation."""
        if self._order is None or self._cursor + count > self._order.numel():
            self._order = torch.randperm(self.num_rows, generator=self.rng)
            self._cursor = 0
        rows = self._order[self._cursor : self._cursor + count]
        self._cursor += count
        return rows.to(self._labels.device)

    # ------------------------------------------------------------------ reset and step
    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
        shape = self.batch_size
        reset_mask = None if tensordict is None else tensordict.get("_reset", None)
        if reset_mask is None or bool(reset_mask.all()):
            rows = self._draw_rows(shape.numel()).reshape(shape)
        else:
            # a partial reset: draw only for the parts being reset (EnvBase keeps the others)
            mask = reset_mask.reshape(shape).to(self._labels.device)
            rows = torch.zeros(shape, dtype=torch.int64, device=self._labels.device)
            rows[mask] = self._draw_rows(int(mask.sum()))
        done = torch.zeros((*shape, 1), dtype=torch.bool, device=self.device)
        return TensorDict(
            {
                "observation": self._observations[rows],
                "y": self._labels[rows],
                "done": done,
                "terminated": done.clone(),
            },
            batch_size=shape,
            device=self.device,
        )

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        labels = tensordict.get("y", None)
        observation = tensordict.get("observation", None)
        if labels is None or observation is None:
            missing = [key for key, value in (("y", labels), ("observation", observation)) if value is None]
            raise KeyError(
                f"OpenMLEnv.step() needs {missing} in its input, as written by reset() (the label 'y' decides the "
                f"reward); the input holds {sorted(map(str, tensordict.keys(True, True)))}."
            )
        action = tensordict.get("action")
        if not self.categorical_action_encoding:
            action = action.to(torch.int64).argmax(-1)
        if action.shape != labels.shape:
            raise ValueError(
                f"OpenMLEnv.step(): the action {'index' if self.categorical_action_encoding else 'argmax'} has shape "
                f"{tuple(action.shape)}, expected the shape of 'y', {tuple(labels.shape)}."
            )
        reward = (action == labels).to(torch.float32).unsqueeze(-1)
        done = torch.ones(reward.shape, dtype=torch.bool, device=reward.device)
        return TensorDict(
            {
                "observation": observation,
                "y": labels,
                "reward": reward,
                "done": done,
                "terminated": done.clone(),
            },
            batch_size=tensordict.batch_size,
            device=self.device,
        )

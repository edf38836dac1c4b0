"""Turning a classification table into tensors: :func:`encode_classification`.

A contextual bandit built from a classification dataset sees each row's features as a
float vector and is rewarded for naming the row's class. This module makes those
numbers from a :class:`~cadence.envs.libs.openml_cache.CachedDataset`:

* the **label** is the index of the row's class among the classes present, sorted
  (so a nominal target ``{"b", "a"}`` gives ``a -> 0``, ``b -> 1``; an integer-valued
  numeric target is sorted by value);
* a **numeric** feature is standardised: ``(x - mean) / std`` over the rows kept
  (population std; a constant column is only centred);
* a **nominal** feature becomes numbers in one of two ways, ``categorical_encoding``:

  - ``"onehot"``: one 0/1 column per category present (sorted), plus one for
    "missing" where values are missing. Nominal values have no order, and one-hot
    keeps it that way: no category is "between" two others for a linear or neural
    policy. The one-hot columns come after all the numeric ones and are not
    standardised.
  - ``"codes"``: the category's index (sorted, "missing" last), a single column in
    the table's order, standardised like a numeric column. Compact (one column per
    feature, whatever the number of categories), at the price of an arbitrary order.

This follows what torchrl's OpenML datasets do (scikit-learn's ``LabelEncoder``,
``OneHotEncoder`` and ``StandardScaler``, which sort categories the same way and
standardise with the population std), written here with numpy alone.

Rows whose label is missing are left out, as are rows with a missing numeric feature
(no number stands for it); a missing nominal value is a category of its own. With
``drop_incomplete_rows`` every row with a missing value is left out.

Examples:
    >>> import numpy as np
    >>> from pathlib import Path
    >>> from cadence.envs.libs.openml_cache import CachedColumn, CachedDataset
    >>> from cadence.envs.libs.openml_features import encode_classification
    >>> columns = {
    ...     "size": CachedColumn("size", np.array([1.0, 3.0, 2.0]), None),
    ...     "colour": CachedColumn("colour", np.array(["red", "blue", "red"], dtype=object), ("red", "blue")),
    ...     "class": CachedColumn("class", np.array(["yes", "no", "no"], dtype=object), ("no", "yes")),
    ... }
    >>> table = CachedDataset(1, "toy", "class", columns, Path("dataset.arff"))
    >>> encoded = encode_classification(table, "class")
    >>> encoded.feature_names, encoded.class_names, encoded.labels.tolist()
    (('size', 'colour=blue', 'colour=red'), ('no', 'yes'), [1, 0, 0])
    >>> encoded.observation[:, 1:].tolist()
    [[0.0, 1.0], [1.0, 0.0], [0.0, 1.0]]
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from cadence.envs.libs.openml_cache import CachedColumn, CachedDataset

__all__ = ["CATEGORICAL_ENCODINGS", "CategoricalEncoding", "EncodedClassification", "encode_classification"]

CategoricalEncoding = Literal["onehot", "codes"]
#: The ways a nominal feature becomes numbers (see the module).
CATEGORICAL_ENCODINGS: tuple[str, ...] = ("onehot", "codes")

#: The name of the category that stands for a missing nominal value.
MISSING = "<missing>"


@dataclass(frozen=True)
class EncodedClassification:
    """A classification table as tensors.

    Attributes:
        observation: the features, float32, shape ``(rows, features)``.
        labels: the class indices, int64, shape ``(rows,)``.
        feature_names: one name per observation column (``"colour=red"`` for a one-hot
            column).
        class_names: the class of each label index.

    Examples:
        >>> import torch
        >>> from cadence.envs.libs.openml_features import EncodedClassification
        >>> data = EncodedClassification(torch.zeros(2, 1), torch.tensor([0, 1]), ("x",), ("a", "b"))
        >>> data.num_rows, data.num_classes
        (2, 2)
    """

    observation: torch.Tensor
    labels: torch.Tensor
    feature_names: tuple[str, ...]
    class_names: tuple[str, ...]

    @property
    def num_rows(self) -> int:
        """The number of rows (samples)."""
        return int(self.labels.shape[0])

    @property
    def num_classes(self) -> int:
        """The number of classes."""
        return len(self.class_names)


def _standardise(values: np.ndarray) -> np.ndarray:
    std = values.std()
    return (values - values.mean()) / (std if std > 0 else 1.0)


def _categories(column: CachedColumn, rows: np.ndarray) -> list[str]:
    """The categories present in the kept rows, sorted, "missing" last if present."""
    values = column.values[rows]
    present = sorted({value for value in values if value is not None})
    if any(value is None for value in values):
        present.append(MISSING)
    return present


def _labels(column: CachedColumn, rows: np.ndarray) -> tuple[np.ndarray, tuple[str, ...]]:
    values = column.values[rows]
    if column.is_nominal:
        classes = sorted(set(values.tolist()))
        index = {name: i for i, name in enumerate(classes)}
        return np.array([index[value] for value in values], dtype=np.int64), tuple(classes)
    if not np.all(values == np.round(values)):
        raise ValueError(
            f"encode_classification: the target {column.name!r} holds non-integer numbers (e.g. "
            f"{values[values != np.round(values)][0]!r}): a regression target; expected classes (a nominal "
            "column, or integer class numbers)."
        )
    classes_numeric, labels = np.unique(values, return_inverse=True)
    return labels.astype(np.int64), tuple(str(int(value)) for value in classes_numeric)


def encode_classification(
    dataset: CachedDataset,
    target: str,
    categorical_encoding: CategoricalEncoding = "onehot",
    drop_incomplete_rows: bool = False,
    exclude: Collection[str] = (),
) -> EncodedClassification:
    """Encodes a table's features and labels as tensors (rules in the module's doc).

    Args:
        dataset: the table.
        target: the column holding the classes; every other column is a feature,
            but those in ``exclude``.
        categorical_encoding: ``"onehot"`` or ``"codes"``, for the nominal features.
        drop_incomplete_rows: leave out every row that has a missing value in the
            target or a feature (else only those missing the label or a numeric
            feature).
        exclude: columns that are neither target nor feature (missing ones are
            ignored).

    Returns:
        The observation matrix (float32), the labels (int64) and the names of the
        columns and classes.

    Raises:
        KeyError: ``target`` is not a column (the message lists them).
        ValueError: an unknown ``categorical_encoding``; a numeric target that is not
            integer-valued; no row left, or no feature.

    Examples:
        >>> import numpy as np
        >>> from pathlib import Path
        >>> from cadence.envs.libs.openml_cache import CachedColumn, CachedDataset
        >>> from cadence.envs.libs.openml_features import encode_classification
        >>> colour = np.array(["red", None, "blue", "red"], dtype=object)
        >>> columns = {
        ...     "colour": CachedColumn("colour", colour, ("red", "blue")),
        ...     "label": CachedColumn("label", np.array([3.0, 1.0, 3.0, 1.0]), None),
        ... }
        >>> table = CachedDataset(1, "toy", "label", columns, Path("dataset.arff"))
        >>> codes = encode_classification(table, "label", categorical_encoding="codes")
        >>> codes.class_names, codes.labels.tolist()
        (('1', '3'), [1, 0, 1, 0])
        >>> [round(x, 3) for x in codes.observation[:, 0].tolist()]  # blue 0, red 1, missing 2
        [0.0, 1.414, -1.414, 0.0]
        >>> encode_classification(table, "label", drop_incomplete_rows=True).feature_names
        ('colour=blue', 'colour=red')
    """
    if categorical_encoding not in CATEGORICAL_ENCODINGS:
        raise ValueError(
            f"encode_classification: categorical_encoding must be one of {list(CATEGORICAL_ENCODINGS)}, "
            f"got {categorical_encoding!r}."
        )
    if target not in dataset.columns:
        raise KeyError(
            f"OpenML dataset {dataset.dataset_id} ({dataset.name!r}) has no column {target!r} to use as the target; "
            f"its columns are {list(dataset.columns)}."
        )
    target_column = dataset.columns[target]
    features = [column for name, column in dataset.columns.items() if name != target and name not in exclude]
    if not features:
        raise ValueError(f"OpenML dataset {dataset.dataset_id}: no feature column besides the target {target!r}.")
    drop = target_column.missing.copy()
    for column in features:
        if drop_incomplete_rows or not column.is_nominal:
            drop |= column.missing
    rows = np.flatnonzero(~drop)
    if rows.size == 0:
        raise ValueError(
            f"OpenML dataset {dataset.dataset_id}: no row left once the rows with missing values are left out "
            f"(target {target!r}, drop_incomplete_rows={drop_incomplete_rows})."
        )
    labels, class_names = _labels(target_column, rows)

    blocks: list[np.ndarray] = []
    names: list[str] = []
    one_hot_blocks: list[np.ndarray] = []
    one_hot_names: list[str] = []
    for column in features:
        if not column.is_nominal:
            blocks.append(_standardise(column.values[rows]))
            names.append(column.name)
            continue
        categories = _categories(column, rows)
        index = {name: i for i, name in enumerate(categories)}
        codes = np.array([index[MISSING if value is None else value] for value in column.values[rows]])
        if categorical_encoding == "codes":
            blocks.append(_standardise(codes.astype(np.float64)))
            names.append(column.name)
        else:
            one_hot_blocks.append(np.eye(len(categories), dtype=np.float64)[codes].T)
            one_hot_names.extend(f"{column.name}={category}" for category in categories)
    matrix = np.vstack(
        [block.reshape(1, -1) if block.ndim == 1 else block for block in blocks + one_hot_blocks]
    ).T
    return EncodedClassification(
        observation=torch.from_numpy(np.ascontiguousarray(matrix, dtype=np.float32)),
        labels=torch.from_numpy(labels),
        feature_names=tuple(names + one_hot_names),
        class_names=class_names,
    )

"""Reading a dataset from OpenML's local cache, offline: :func:`read_cached_dataset`.

openml-python keeps what it downloaded under its cache directory
(:func:`openml.config.get_cache_directory`, ``<root>/org/openml/www`` for the public
server, the root being set by ``openml.config.set_root_cache_directory``), one folder per
dataset::

    <cache>/datasets/<id>/description.xml     the dataset's description (name, target...)
    <cache>/datasets/<id>/dataset_<id>.pq     the data as parquet (newer servers), or
    <cache>/datasets/<id>/dataset.arff        the data as ARFF

This module reads those files and nothing else: it never calls the network. It does not
go through ``openml.datasets.get_dataset`` because, in openml 0.15.1, that function
silently downloads whatever it does not find in the cache (the description, the data),
deletes the dataset's cache folder when such a download fails, and its
``OpenMLDataset.get_data`` writes and loads ``pickle`` files next to the data. The
files are read with the parsers openml itself uses for them: ``xmltodict`` for the
description, ``liac-arff`` for ARFF and pandas (pyarrow) for parquet; all three come
with the ``openml`` extra.

The cached files are data: the dataset id is checked to be a positive int before it
names a folder, and the paths written in the description (its download URLs) are never
followed. A dataset's ``row_id_attribute`` and ``ignore_attribute`` columns are left
out, as openml does by default.

Examples:
    >>> import pytest; openml = pytest.importorskip("openml")  # skips without openml
    >>> from cadence.envs.libs.openml_cache import read_cached_dataset
    >>> read_cached_dataset(61, cache_directory="/nonexistent")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    FileNotFoundError: OpenML dataset 61 is not in the local cache: ...
"""

from __future__ import annotations

import math
import operator
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "CachedColumn",
    "CachedDataset",
    "OPENML_INSTALL_HINT",
    "openml_cache_directory",
    "read_cached_dataset",
    "validate_dataset_id",
]

OPENML_INSTALL_HINT = 'pip install "cadence[openml]"'

#: ARFF attribute types read as numbers (liac-arff writes them upper case).
_ARFF_NUMERIC_TYPES = frozenset({"NUMERIC", "REAL", "INTEGER"})


def _import_openml(caller: str) -> Any:
    """Imports openml, or raises an ImportError that says how to install it."""
    try:
        import openml
    except ImportError as err:
        raise ImportError(f"{caller} needs the openml library, which is not installed: {OPENML_INSTALL_HINT}.") from err
    return openml


@dataclass(frozen=True)
class CachedColumn:
    """One column of a cached dataset, as read from its file.

    Attributes:
        name: the column's name.
        values: float64 numbers (NaN where missing) for a numeric column; an object
            array of ``str`` (``None`` where missing) for a nominal one.
        categories: the categories a nominal column declares (its file's order), or
            ``None`` for a numeric column.

    Examples:
        >>> import numpy as np
        >>> from cadence.envs.libs.openml_cache import CachedColumn
        >>> column = CachedColumn("colour", np.array(["red", None], dtype=object), ("red", "blue"))
        >>> column.is_nominal, column.missing.tolist()
        (True, [False, True])
    """

    name: str
    values: np.ndarray
    categories: tuple[str, ...] | None

    @property
    def is_nominal(self) -> bool:
        """Whether the column holds categories (rather than numbers)."""
        return self.categories is not None

    @property
    def missing(self) -> np.ndarray:
        """A boolean array, true where the value is missing."""
        if self.is_nominal:
            return np.array([value is None for value in self.values], dtype=bool)
        return np.isnan(self.values)


@dataclass(frozen=True)
class CachedDataset:
    """A dataset read from OpenML's local cache.

    Attributes:
        dataset_id: its OpenML id.
        name: its name on OpenML.
        default_target: the description's ``default_target_attribute`` (``None`` if
            it has none).
        columns: the columns, in the file's order, by name (without the row-id and
            ignored columns).
        data_file: the file the rows were read from.

    Examples:
        >>> import numpy as np
        >>> from pathlib import Path
        >>> from cadence.envs.libs.openml_cache import CachedColumn, CachedDataset
        >>> column = CachedColumn("x", np.array([1.0, 2.0]), None)
        >>> CachedDataset(1, "toy", None, {"x": column}, Path("dataset.arff")).num_rows
        2
    """

    dataset_id: int
    name: str
    default_target: str | None
    columns: Mapping[str, CachedColumn]
    data_file: Path

    @property
    def num_rows(self) -> int:
        """The number of rows."""
        return len(next(iter(self.columns.values())).values) if self.columns else 0


def validate_dataset_id(dataset_id: Any) -> int:
    """Checks that ``dataset_id`` is an OpenML dataset id: a positive int.

    Only such an id names a folder of the cache, so that no value coming from a user
    (``"../x"``, ``"61/../../etc"``) can make a path.

    Args:
        dataset_id: the value to check (an ``int``, or an integer like ``numpy.int64``;
            ``bool`` and strings are refused).

    Returns:
        The id as an ``int``.

    Raises:
        TypeError: not an integer.
        ValueError: not positive.

    Examples:
        >>> from cadence.envs.libs.openml_cache import validate_dataset_id
        >>> validate_dataset_id(61)
        61
        >>> validate_dataset_id("../61")
        Traceback (most recent call last):
        ...
        TypeError: OpenML dataset id: expected a positive int, got str '../61'.
    """
    if isinstance(dataset_id, bool) or isinstance(dataset_id, (str, bytes)):
        raise TypeError(f"OpenML dataset id: expected a positive int, got {type(dataset_id).__name__} {dataset_id!r}.")
    try:
        value = operator.index(dataset_id)
    except TypeError:
        raise TypeError(
            f"OpenML dataset id: expected a positive int, got {type(dataset_id).__name__} {dataset_id!r}."
        ) from None
    if value <= 0:
        raise ValueError(f"OpenML dataset id: expected a positive int, got {value}.")
    return value


def openml_cache_directory(cache_directory: str | os.PathLike[str] | None = None) -> Path:
    """The folder that holds OpenML's ``datasets/`` cache.

    Args:
        cache_directory: that folder; ``None`` takes openml's configured one,
            :func:`openml.config.get_cache_directory` (``<root>/org/openml/www`` for the
            public server, ``<root>`` being set by ``openml.config.set_root_cache_directory``
            or the ``OPENML_CACHE_DIR`` environment variable).

    Returns:
        The folder, as a ``Path``.

    Examples:
        >>> import pytest; openml = pytest.importorskip("openml")  # skips without openml
        >>> from cadence.envs.libs.openml_cache import openml_cache_directory
        >>> openml_cache_directory("/data/openml")
        PosixPath('/data/openml')
        >>> openml_cache_directory() == Path(openml.config.get_cache_directory())
        True
    """
    if cache_directory is not None:
        return Path(cache_directory)
    openml = _import_openml("openml_cache_directory")
    return Path(openml.config.get_cache_directory())


def _text(description: Mapping[str, Any], field: str) -> str | None:
    value = description.get(f"oml:{field}")
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"OpenML description: expected text in <oml:{field}>, got {value!r}.")
    return value.strip() or None


def _names(description: Mapping[str, Any], field: str) -> set[str]:
    """A field that may hold one name, a comma-separated list, or repeat (``ignore_attribute``)."""
    value = description.get(f"oml:{field}")
    values = value if isinstance(value, list) else [value]
    return {name.strip() for item in values if isinstance(item, str) for name in item.split(",") if name.strip()}


def _read_description(path: Path, dataset_id: int) -> Mapping[str, Any]:
    import xmltodict

    try:
        parsed = xmltodict.parse(path.read_text(encoding="utf8"))
    except Exception as err:  # expat errors, decoding errors: a broken cache file
        raise ValueError(f"OpenML dataset {dataset_id}: cannot parse {path}: {err}") from err
    description = parsed.get("oml:data_set_description") if isinstance(parsed, dict) else None
    if not isinstance(description, dict):
        raise ValueError(f"OpenML dataset {dataset_id}: {path} holds no <oml:data_set_description>.")
    found = _text(description, "id")
    if found != str(dataset_id):
        raise ValueError(f"OpenML dataset {dataset_id}: {path} describes dataset {found!r}, expected {dataset_id}.")
    return description


def _arff_column(name: str, kind: Any, raw: list[Any], dataset_id: int) -> CachedColumn:
    if isinstance(kind, (list, tuple)):
        values = np.array([None if value is None else str(value) for value in raw], dtype=object)
        return CachedColumn(name, values, tuple(str(category) for category in kind))
    if str(kind).upper() in _ARFF_NUMERIC_TYPES:
        return CachedColumn(name, np.array([math.nan if v is None else v for v in raw], dtype=np.float64), None)
    raise ValueError(
        f"OpenML dataset {dataset_id}: column {name!r} has ARFF type {kind!r}; expected a numeric column "
        f"({', '.join(sorted(_ARFF_NUMERIC_TYPES))}) or a nominal one ({{...}})."
    )


def _read_arff(path: Path, dataset_id: int, dropped: set[str]) -> dict[str, CachedColumn]:
    import arff

    try:
        with path.open(encoding="utf8") as file:
            decoded = arff.load(file, return_type=arff.DENSE)
    except Exception as err:  # liac-arff raises its own ArffException family, and ValueError
        raise ValueError(f"OpenML dataset {dataset_id}: cannot parse {path}: {err}") from err
    rows = decoded["data"]
    columns: dict[str, CachedColumn] = {}
    for index, (name, kind) in enumerate(decoded["attributes"]):
        if name in dropped:
            continue
        columns[name] = _arff_column(name, kind, [row[index] for row in rows], dataset_id)
    return columns


def _parquet_column(name: str, series: Any, dataset_id: int) -> CachedColumn:
    import pandas as pd

    dtype = series.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        values = np.array([None if pd.isna(v) else str(v) for v in series.astype(object)], dtype=object)
        return CachedColumn(name, values, tuple(str(category) for category in dtype.categories))
    if pd.api.types.is_bool_dtype(dtype):
        values = np.array([None if pd.isna(v) else str(bool(v)) for v in series.astype(object)], dtype=object)
        return CachedColumn(name, values, ("False", "True"))
    if pd.api.types.is_numeric_dtype(dtype):
        return CachedColumn(name, series.to_numpy(dtype=np.float64, na_value=np.nan), None)
    if pd.api.types.is_object_dtype(dtype) or pd.api.types.is_string_dtype(dtype):
        values = np.array([None if pd.isna(v) else str(v) for v in series.astype(object)], dtype=object)
        return CachedColumn(name, values, tuple(sorted({v for v in values if v is not None})))
    raise ValueError(
        f"OpenML dataset {dataset_id}: column {name!r} has dtype {dtype}; expected a numeric, categorical, "
        "bool or string column."
    )


def _read_parquet(path: Path, dataset_id: int, dropped: set[str]) -> dict[str, CachedColumn]:
    import pandas as pd

    try:
        frame = pd.read_parquet(path)
    except Exception as err:  # pyarrow's errors for a broken file
        raise ValueError(f"OpenML dataset {dataset_id}: cannot read {path}: {err}") from err
    return {
        str(name): _parquet_column(str(name), frame[name], dataset_id)
        for name in frame.columns
        if str(name) not in dropped
    }


def read_cached_dataset(
    dataset_id: int, cache_directory: str | os.PathLike[str] | None = None
) -> CachedDataset:
    """Reads an OpenML dataset from the local cache, without any network access.

    The parquet file is read where there is one (as openml does), else the ARFF file.

    Args:
        dataset_id: the dataset's OpenML id (a positive int; see
            :func:`validate_dataset_id`).
        cache_directory: the folder holding ``datasets/``; ``None`` takes openml's
            configured cache (see :func:`openml_cache_directory`).

    Returns:
        The dataset's name, default target and columns.

    Raises:
        TypeError, ValueError: a bad id; a description or data file that cannot be
            read, or that describes another dataset; a sparse ARFF dataset; a column
            that is neither numeric nor nominal (a string or date column).
        FileNotFoundError: the dataset's description or data is not in the cache
            (the message says how to cache it).
        ImportError: openml (and so its parsers) is not installed.

    Examples:
        >>> import pytest; openml = pytest.importorskip("openml")  # skips without openml
        >>> import tempfile
        >>> from cadence.envs.libs.openml_cache import read_cached_dataset
        >>> cache = Path(tempfile.mkdtemp())
        >>> folder = cache / "datasets" / "7"
        >>> folder.mkdir(parents=True)
        >>> _ = (folder / "description.xml").write_text(
        ...     '<oml:data_set_description xmlns:oml="http://openml.org/openml">'
        ...     "<oml:id>7</oml:id><oml:name>toy</oml:name><oml:format>ARFF</oml:format>"
        ...     "<oml:default_target_attribute>class</oml:default_target_attribute>"
        ...     "</oml:data_set_description>")
        >>> _ = (folder / "dataset.arff").write_text(
        ...     "@RELATION toy\\n@ATTRIBUTE size REAL\\n@ATTRIBUTE class {a,b}\\n@DATA\\n1.5,a\\n?,b\\n")
        >>> dataset = read_cached_dataset(7, cache_directory=cache)
        >>> dataset.name, dataset.default_target, dataset.num_rows
        ('toy', 'class', 2)
        >>> dataset.columns["size"].values.tolist(), dataset.columns["class"].categories
        ([1.5, nan], ('a', 'b'))
    """
    dataset_id = validate_dataset_id(dataset_id)
    _import_openml("read_cached_dataset")  # the parsers below come with openml
    folder = openml_cache_directory(cache_directory) / "datasets" / str(dataset_id)
    description_file = folder / "description.xml"
    how_to_cache = (
        f"cache it once, where the network is reachable, with openml.datasets.get_dataset({dataset_id}, "
        "download_data=True) (with the same cache directory)"
    )
    if not description_file.is_file():
        raise FileNotFoundError(
            f"OpenML dataset {dataset_id} is not in the local cache: {description_file} does not exist; {how_to_cache}."
        )
    description = _read_description(description_file, dataset_id)
    data_format = (_text(description, "format") or "ARFF").lower()
    if data_format != "arff":
        raise ValueError(
            f"OpenML dataset {dataset_id}: format {data_format!r} is not supported; expected 'arff' (dense data)."
        )
    dropped = _names(description, "row_id_attribute") | _names(description, "ignore_attribute")
    parquet_files = [folder / f"dataset_{dataset_id}.pq", folder / "dataset.pq"]  # the second: older openml
    parquet_file = next((path for path in parquet_files if path.is_file()), None)
    arff_file = folder / "dataset.arff"
    if parquet_file is not None:
        data_file, columns = parquet_file, _read_parquet(parquet_file, dataset_id, dropped)
    elif arff_file.is_file():
        data_file, columns = arff_file, _read_arff(arff_file, dataset_id, dropped)
    else:
        raise FileNotFoundError(
            f"OpenML dataset {dataset_id}: its description is cached but not its data (expected {parquet_files[0]} "
            f"or {arff_file}); {how_to_cache}."
        )
    if not columns:
        raise ValueError(f"OpenML dataset {dataset_id}: {data_file} holds no columns.")
    return CachedDataset(
        dataset_id=dataset_id,
        name=_text(description, "name") or str(dataset_id),
        default_target=_text(description, "default_target_attribute"),
        columns=columns,
        data_file=data_file,
    )

"""OpenMLEnv: a contextual bandit on an OpenML dataset read from openml's local cache.

Every dataset here is written by the test into a temporary cache directory, in the
layout openml-python 0.15 uses (``<cache>/datasets/<id>/description.xml`` and
``dataset.arff`` or ``dataset_<id>.pq``); the network is blocked for the whole module.
"""

from __future__ import annotations

import socket

import numpy as np
import pytest
import torch

openml = pytest.importorskip("openml", reason="needs the openml extra: pip install 'cadence[openml]'")

import arff  # noqa: E402 - liac-arff, an openml dependency: writes the cached ARFF files
import pandas as pd  # noqa: E402 - an openml dependency: writes the cached parquet files

from cadence.data import Categorical, OneHot  # noqa: E402
from cadence.envs.batched import SerialEnv  # noqa: E402
from cadence.envs.libs.openml import OPENML_DATASETS, OpenMLEnv, load_openml_classification  # noqa: E402
from cadence.envs.libs.openml_cache import read_cached_dataset  # noqa: E402
from cadence.envs.parallel import ParallelEnv  # noqa: E402
from cadence.envs.utils import check_env_specs, step_mdp  # noqa: E402

IRIS_ID = 61
NUM_ROWS = 30


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Any attempt to reach a host fails the test (local pipes stay allowed)."""

    def refuse(self, address, *args, **kwargs):
        if isinstance(address, tuple):
            raise AssertionError(f"network access attempted: {address}")
        return real_connect(self, address, *args, **kwargs)

    real_connect = socket.socket.connect
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: refuse(None, ("blocked", 0)))


# ------------------------------------------------------------------ writing openml's cache layout
def write_description(folder, dataset_id, name, target, *, fmt="ARFF", extra=""):
    folder.mkdir(parents=True, exist_ok=True)
    target_xml = f"<oml:default_target_attribute>{target}</oml:default_target_attribute>" if target else ""
    (folder / "description.xml").write_text(
        '<oml:data_set_description xmlns:oml="http://openml.org/openml">\n'
        f"  <oml:id>{dataset_id}</oml:id>\n  <oml:name>{name}</oml:name>\n  <oml:version>1</oml:version>\n"
        f"  <oml:format>{fmt}</oml:format>\n"
        # URLs that must never be followed (the network is blocked anyway)
        "  <oml:url>http://unreachable.invalid/data/download/1/dataset.arff</oml:url>\n"
        "  <oml:parquet_url>http://unreachable.invalid/dataset.pq</oml:parquet_url>\n"
        f"  {target_xml}{extra}\n  <oml:status>active</oml:status>\n"
        "</oml:data_set_description>\n",
        encoding="utf8",
    )


def write_cached_dataset(cache, dataset_id, name, attributes, rows, target, *, fmt="arff", extra=""):
    """Writes a dataset (ARFF attributes: name -> 'REAL' or a list of categories) the way
    openml caches it; ``fmt="parquet"`` writes the parquet file instead of the ARFF one."""
    folder = cache / "datasets" / str(dataset_id)
    write_description(folder, dataset_id, name, target, extra=extra)
    if fmt == "arff":
        text = arff.dumps({"relation": name, "attributes": list(attributes.items()), "data": rows})
        (folder / "dataset.arff").write_text(text, encoding="utf8")
    else:
        columns = {}
        for index, (column, kind) in enumerate(attributes.items()):
            values = [row[index] for row in rows]
            if isinstance(kind, list):
                columns[column] = pd.Categorical(values, categories=kind)
            else:
                columns[column] = np.array([np.nan if v is None else v for v in values], dtype=np.float64)
        pd.DataFrame(columns).to_parquet(folder / f"dataset_{dataset_id}.pq")
    return folder


IRIS_ATTRIBUTES = {
    "row": "REAL",  # distinct per row: identifies the row drawn
    "petal": "REAL",
    "colour": ["red", "green", "blue"],
    "class": ["setosa", "versicolor", "virginica"],
}


def iris_rows(num_rows=NUM_ROWS):
    generator = np.random.default_rng(0)
    classes = IRIS_ATTRIBUTES["class"]
    rows = []
    for i in range(num_rows):
        label = classes[i % 3]
        colour = None if i % 7 == 3 else ["red", "green", "blue"][int(generator.integers(3))]
        rows.append([float(i), round(float(generator.normal(i % 3, 0.3)), 3), colour, label])
    return rows


@pytest.fixture
def cache(tmp_path):
    write_cached_dataset(tmp_path, IRIS_ID, "iris-like", IRIS_ATTRIBUTES, iris_rows(), "class")
    return tmp_path


@pytest.fixture
def openml_cache(cache):
    """Points openml's own configuration at the temporary cache, and restores it."""
    previous_root = openml.config.get_config_as_dict()["cachedir"]
    openml.config.set_root_cache_directory(cache / "root")
    try:
        server_folder = type(cache)(openml.config.get_cache_directory())  # <root>/org/openml/www
        server_folder.mkdir(parents=True)
        (cache / "datasets").rename(server_folder / "datasets")
        yield server_folder
    finally:
        openml.config.set_root_cache_directory(previous_root)


def make_env(cache, **kwargs):
    return OpenMLEnv(IRIS_ID, cache_directory=cache, **kwargs)


def row_ids(data):
    """The ``row`` feature, unstandardised: which rows were drawn (it is the first column)."""
    observation = data["observation"][..., 0]
    rows = np.arange(NUM_ROWS, dtype=np.float64)
    return torch.round(observation * rows.std() + rows.mean()).to(torch.int64)


def assert_same(a, b):
    assert set(a.keys(True, True)) == set(b.keys(True, True))
    for key in a.keys(True, True):
        torch.testing.assert_close(a.get(key), b.get(key), rtol=0, atol=0, msg=lambda m: f"{key}: {m}")


# ------------------------------------------------------------------ reading the cache
def test_it_reads_openml_configured_cache_offline(openml_cache):
    env = OpenMLEnv(IRIS_ID)  # no cache_directory: openml.config's
    assert env.num_rows == NUM_ROWS
    assert env.class_names == ("setosa", "versicolor", "virginica")
    assert env.feature_names == ("row", "petal", "colour=blue", "colour=green", "colour=red", "colour=<missing>")


def test_arff_and_parquet_give_the_same_data(cache):
    write_cached_dataset(cache, 62, "iris-like", IRIS_ATTRIBUTES, iris_rows(), "class", fmt="parquet")
    from_arff = load_openml_classification(IRIS_ID, cache_directory=cache)
    from_parquet = load_openml_classification(62, cache_directory=cache)
    assert read_cached_dataset(62, cache).data_file.name == "dataset_62.pq"
    assert from_arff.feature_names == from_parquet.feature_names
    assert from_arff.class_names == from_parquet.class_names
    torch.testing.assert_close(from_arff.observation, from_parquet.observation, rtol=0, atol=0)
    assert torch.equal(from_arff.labels, from_parquet.labels)


def test_the_encoding_is_standardised_numbers_and_one_hot_categories(cache):
    data = load_openml_classification(IRIS_ID, cache_directory=cache)
    rows = iris_rows()
    assert data.observation.dtype == torch.float32 and data.labels.dtype == torch.int64
    petal = np.array([row[1] for row in rows])
    np.testing.assert_allclose(data.observation[:, 1].numpy(), (petal - petal.mean()) / petal.std(), rtol=1e-6)
    colours = [row[2] for row in rows]
    one_hot = data.observation[:, 2:].numpy()
    for i, colour in enumerate(colours):
        expected = ["blue", "green", "red", None].index(colour)
        assert one_hot[i].tolist() == [float(j == expected) for j in range(4)]
    assert data.labels.tolist() == [i % 3 for i in range(NUM_ROWS)]

    codes = load_openml_classification(IRIS_ID, cache_directory=cache, categorical_encoding="codes")
    assert codes.feature_names == ("row", "petal", "colour")
    raw = np.array([["blue", "green", "red", None].index(c) for c in colours], dtype=np.float64)
    np.testing.assert_allclose(codes.observation[:, 2].numpy(), (raw - raw.mean()) / raw.std(), rtol=1e-6)


def test_row_id_and_ignored_columns_are_left_out(tmp_path):
    attributes = {"id": "REAL", "note": ["a", "b"], "x": "REAL", "class": ["n", "y"]}
    rows = [[float(i), "a", float(i % 4), "ny"[i % 2]] for i in range(8)]
    extra = "<oml:row_id_attribute>id</oml:row_id_attribute><oml:ignore_attribute>note</oml:ignore_attribute>"
    write_cached_dataset(tmp_path, 5, "ids", attributes, rows, "class", extra=extra)
    assert OpenMLEnv(5, cache_directory=tmp_path).feature_names == ("x",)


def test_an_explicit_target_and_a_numeric_class_column(tmp_path):
    attributes = {"x": "REAL", "colour": ["r", "g"], "grade": "REAL"}
    rows = [[float(i), "rg"[i % 2], float(3 + i % 3)] for i in range(9)]
    write_cached_dataset(tmp_path, 8, "grades", attributes, rows, None)
    with pytest.raises(ValueError, match="has no default target.*pass target="):
        OpenMLEnv(8, cache_directory=tmp_path)
    env = OpenMLEnv(8, cache_directory=tmp_path, target="grade")
    assert env.class_names == ("3", "4", "5") and env.feature_names == ("x", "colour=g", "colour=r")
    by_colour = OpenMLEnv(8, cache_directory=tmp_path, target="colour")
    assert by_colour.class_names == ("g", "r") and by_colour.feature_names == ("x", "grade")


# ------------------------------------------------------------------ torchrl's named datasets
ADULT_ATTRIBUTES = {
    "age": "REAL",
    "workclass": ["Private", "State-gov", "Self-emp"],
    "education": ["Bachelors", "HS-grad", "Masters"],
    "occupation": ["Sales", "Tech-support", "Craft-repair", "Exec-managerial"],
    "hoursperweek": "REAL",
    "class": [">50K", "<=50K"],
}


def adult_rows(num_rows=40):
    generator = np.random.default_rng(1)
    rows = []
    for i in range(num_rows):
        workclass = None if i % 9 == 4 else ADULT_ATTRIBUTES["workclass"][int(generator.integers(3))]
        occupation = None if i % 11 == 5 else ADULT_ATTRIBUTES["occupation"][i % 4]
        rows.append(
            [
                float(generator.integers(18, 70)),
                workclass,
                ADULT_ATTRIBUTES["education"][int(generator.integers(3))],
                occupation,
                float(generator.integers(10, 60)),
                ADULT_ATTRIBUTES["class"][int(generator.integers(2))],
            ]
        )
    return rows


def torchrl_adult_pipeline(rows, onehot):
    """What torchrl's OpenML dataset does with adult, on the same table (scikit-learn)."""
    preprocessing = pytest.importorskip("sklearn.preprocessing")
    columns = list(ADULT_ATTRIBUTES)
    frame = pd.DataFrame(rows, columns=columns)
    for name, kind in ADULT_ATTRIBUTES.items():
        frame[name] = pd.Categorical(frame[name], categories=kind) if isinstance(kind, list) else frame[name]
    x = frame.drop(columns=["class"])  # return_X_y: the default target is not a feature
    x = x[~x.isna().any(axis=1)]
    y = x["occupation"]
    x = x.drop(columns=["occupation"])
    categorical = x.select_dtypes(include=["category"]).columns
    numeric = x.select_dtypes(include=["float64"]).columns
    encoder = preprocessing.LabelEncoder()
    for name in categorical:
        x[name] = encoder.fit_transform(x[name])
    y = encoder.fit_transform(y)
    if onehot:
        one_hot = preprocessing.OneHotEncoder(sparse_output=False).fit_transform(x[categorical])
        x = np.concatenate((preprocessing.StandardScaler().fit_transform(x[numeric]), one_hot), axis=1)
    else:
        x = preprocessing.StandardScaler().fit_transform(x)
    return x, y


@pytest.mark.parametrize("name", ["adult_num", "adult_onehot"])
def test_adult_matches_torchrl_preprocessing(tmp_path, name):
    rows = adult_rows()
    write_cached_dataset(tmp_path, OPENML_DATASETS[name].dataset_id, "adult", ADULT_ATTRIBUTES, rows, "class")
    env = OpenMLEnv(name, cache_directory=tmp_path)
    data = load_openml_classification(name, cache_directory=tmp_path)
    expected_x, expected_y = torchrl_adult_pipeline(rows, onehot=name.endswith("onehot"))
    np.testing.assert_allclose(data.observation.numpy(), expected_x, rtol=1e-5, atol=1e-6)
    assert data.labels.tolist() == expected_y.tolist()
    assert env.class_names == tuple(sorted(ADULT_ATTRIBUTES["occupation"]))
    assert not [f for f in env.feature_names if f.split("=")[0] == "class"]  # the income class is no feature
    assert env.observation_spec["observation"].shape == (expected_x.shape[1],)
    check_env_specs(env, seed=0)


@pytest.mark.parametrize("name", ["magic", "shuttle", "covertype", "mushroom_onehot"])
def test_every_name_reads_its_id(tmp_path, name):
    recipe = OPENML_DATASETS[name]
    write_cached_dataset(tmp_path, recipe.dataset_id, name, IRIS_ATTRIBUTES, iris_rows(), "class")
    env = OpenMLEnv(name, batch_size=[3], cache_directory=tmp_path)
    assert env.num_rows == NUM_ROWS and env.class_names == ("setosa", "versicolor", "virginica")
    assert set(OpenMLEnv.available_envs) == set(OPENML_DATASETS)


# ------------------------------------------------------------------ specs and the bandit
@pytest.mark.parametrize("batch_size", [(), (4,), (2, 3)])
@pytest.mark.parametrize("categorical", [True, False])
def test_specs(cache, batch_size, categorical):
    env = make_env(cache, batch_size=batch_size, categorical_action_encoding=categorical)
    assert env.observation_spec["observation"].shape == (*batch_size, 6)
    assert env.observation_spec["observation"].dtype == torch.float32
    assert env.observation_spec["y"] == Categorical(3, shape=batch_size, dtype=torch.int64)
    if categorical:
        assert env.action_spec == Categorical(3, shape=batch_size, dtype=torch.int64)
    else:
        assert env.action_spec == OneHot(3, shape=(*batch_size, 3))
    assert env.reward_spec.shape == (*batch_size, 1) and env.reward_spec.dtype == torch.float32
    assert env.done_keys == ["done", "terminated"]
    check_env_specs(env, seed=0)


@pytest.mark.parametrize("categorical", [True, False])
def test_the_reward_is_one_for_the_right_class_and_episodes_last_one_step(cache, categorical):
    env = make_env(cache, batch_size=[6], categorical_action_encoding=categorical)
    data = env.reset()
    assert not data["done"].any() and not data["terminated"].any()
    right = data["y"].clone()
    for guess, reward in ((right, 1.0), ((right + 1) % 3, 0.0)):
        data["action"] = guess if categorical else torch.nn.functional.one_hot(guess, 3).bool()
        out = env.step(data.clone())["next"]
        assert out["reward"].shape == (6, 1)
        assert out["reward"].eq(reward).all()
        assert out["done"].all() and out["terminated"].all()
        assert torch.equal(out["y"], right) and torch.equal(out["observation"], data["observation"])
    mixed = right.clone()
    mixed[::2] = (mixed[::2] + 2) % 3
    data["action"] = mixed if categorical else torch.nn.functional.one_hot(mixed, 3).bool()
    assert env.step(data)["next", "reward"].squeeze(-1).tolist() == [0.0, 1.0] * 3


def test_the_observation_is_the_row_and_y_its_label(cache):
    env = make_env(cache, batch_size=[5])
    data = env.reset()
    ids = row_ids(data)
    assert data["y"].tolist() == [int(i) % 3 for i in ids]  # iris_rows: label i % 3


def test_rollouts(cache):
    env = make_env(cache, batch_size=[4])
    env.set_seed(0)
    data = env.rollout(5)
    assert data.batch_size == (4, 1)  # the first step is done: the rollout stops there
    data = env.rollout(6, break_when_any_done=False)
    assert data.batch_size == (4, 6)
    assert data["next", "done"].all()
    assert set(data["next", "reward"].unique().tolist()) <= {0.0, 1.0}
    # each step is a new context, drawn at the reset that follows the done step
    ids = row_ids(data)
    assert len(set(ids.flatten().tolist())) == 24


def test_rows_are_drawn_without_replacement(cache):
    env = make_env(cache, batch_size=[7])
    env.set_seed(3)
    epoch = [row_ids(env.reset()) for _ in range(4)]  # 28 of the 30 rows, then a new permutation
    drawn = torch.cat(epoch).tolist()
    assert len(set(drawn)) == 28
    next_epoch = torch.cat([row_ids(env.reset()) for _ in range(4)]).tolist()
    assert len(set(next_epoch)) == 28 and next_epoch != drawn


def test_seeding_reproduces(cache):
    env = make_env(cache, batch_size=[3])
    actions = torch.randint(3, (3, 8), generator=torch.Generator().manual_seed(0))

    def run(seed):
        env.set_seed(seed)
        data = env.reset()
        steps = []
        for t in range(actions.shape[-1]):
            data["action"] = actions[:, t]
            stepped = env.step(data)
            steps.append(stepped.clone())
            data = step_mdp(stepped)
            data["_reset"] = data["done"].clone()
            data = env.reset(data)
        return torch.stack(steps, 1)

    first, again, other = run(7), run(7), run(8)
    assert_same(first, again)
    assert not torch.equal(first["observation"], other["observation"])
    assert_same(make_env(cache, batch_size=[3]).rollout(4), make_env(cache, batch_size=[3]).rollout(4))


def test_the_array_simulator_path_matches_the_generic_one(cache):
    env = make_env(cache, batch_size=[2])
    env.set_seed(1)
    generic = env.rollout(5, break_when_any_done=False)  # gradients on: the generic loop
    env.set_seed(1)
    with torch.no_grad():
        fast = env.rollout(5, break_when_any_done=False)
    assert_same(generic, fast)


def test_a_partial_reset_draws_only_the_parts_reset(cache):
    env = make_env(cache, batch_size=[4])
    env.set_seed(0)
    data = env.reset()
    before = row_ids(data)
    data["_reset"] = torch.tensor([[True], [False], [True], [False]])
    out = env.reset(data)
    after = row_ids(out)
    assert torch.equal(after[[1, 3]], before[[1, 3]])
    assert not set(after[[0, 2]].tolist()) & set(before.tolist())  # no replacement within the walk
    assert "_reset" not in data.keys()


@pytest.mark.parametrize("batched", [SerialEnv, ParallelEnv])
def test_batched(cache, batched):
    env = batched(2, lambda: make_env(cache, batch_size=[3]))
    try:
        env.set_seed(0)
        check_env_specs(env, seed=0)
        env.set_seed(0)
        data = env.rollout(4, break_when_any_done=False)
        assert data.batch_size == (2, 3, 4)
        assert data["next", "done"].all()
        env.set_seed(0)
        assert_same(data, env.rollout(4, break_when_any_done=False))
        reference = SerialEnv(2, lambda: make_env(cache, batch_size=[3]))
        reference.set_seed(0)
        assert_same(data, reference.rollout(4, break_when_any_done=False))
    finally:
        env.close()


# ------------------------------------------------------------------ errors and untrusted input
@pytest.mark.parametrize(
    ("dataset", "error", "match"),
    [
        ("../../etc/passwd", ValueError, "unknown dataset name '../../etc/passwd'"),
        ("61", ValueError, "unknown dataset name '61'"),
        ("iris", ValueError, "unknown dataset name"),
        (True, TypeError, "expected a positive int, got bool"),
        (1.5, TypeError, "expected a positive int, got float"),
        (-61, ValueError, "expected a positive int, got -61"),
        (0, ValueError, "expected a positive int, got 0"),
        (b"61", TypeError, "got bytes"),
    ],
)
def test_only_ids_and_known_names_make_a_path(cache, dataset, error, match):
    before = sorted(str(p) for p in cache.rglob("*"))
    with pytest.raises(error, match=match):
        OpenMLEnv(dataset, cache_directory=cache)
    assert sorted(str(p) for p in cache.rglob("*")) == before


def test_a_name_fixes_its_target_and_encoding(cache):
    with pytest.raises(ValueError, match="'magic' fixes its target and encoding"):
        OpenMLEnv("magic", cache_directory=cache, categorical_encoding="codes")
    with pytest.raises(ValueError, match="categorical_encoding must be one of"):
        make_env(cache, categorical_encoding="ordinal")


def test_a_dataset_missing_from_the_cache_says_how_to_cache_it(cache):
    with pytest.raises(FileNotFoundError, match=r"dataset 99 is not in the local cache.*get_dataset\(99"):
        OpenMLEnv(99, cache_directory=cache)
    write_description(cache / "datasets" / "98", 98, "no-data", "class")
    with pytest.raises(FileNotFoundError, match="its description is cached but not its data"):
        OpenMLEnv(98, cache_directory=cache)


def test_broken_cache_files_are_reported(cache):
    folder = cache / "datasets" / "97"
    write_description(folder, 96, "wrong", "class")
    with pytest.raises(ValueError, match="describes dataset '96', expected 97"):
        OpenMLEnv(97, cache_directory=cache)
    write_description(folder, 97, "sparse", "class", fmt="Sparse_ARFF")
    with pytest.raises(ValueError, match="format 'sparse_arff' is not supported"):
        OpenMLEnv(97, cache_directory=cache)
    (folder / "description.xml").write_text("<oml:data_set_description><oml:id>97")
    with pytest.raises(ValueError, match="cannot parse"):
        OpenMLEnv(97, cache_directory=cache)
    write_description(folder, 97, "bad-arff", "class")
    (folder / "dataset.arff").write_text("@RELATION x\n@ATTRIBUTE a REAL\n@DATA\nnot-a-number\n")
    with pytest.raises(ValueError, match="cannot parse"):
        OpenMLEnv(97, cache_directory=cache)
    (folder / "dataset.arff").write_text("@RELATION x\n@ATTRIBUTE a STRING\n@ATTRIBUTE class {n,y}\n@DATA\nhi,n\n")
    with pytest.raises(ValueError, match="column 'a' has ARFF type 'STRING'"):
        OpenMLEnv(97, cache_directory=cache)


def test_other_errors_name_what_was_expected(cache):
    with pytest.raises(ValueError, match=r"draws 31 distinct rows per reset, but the dataset has 30 rows"):
        make_env(cache, batch_size=[31])
    with pytest.raises(KeyError, match="no column 'label' to use as the target"):
        make_env(cache, target="label")
    with pytest.raises(ValueError, match="the target 'petal' holds non-integer numbers"):
        make_env(cache, target="petal")
    env = make_env(cache, batch_size=[2])
    data = env.rand_action(env.reset()).exclude("y")
    with pytest.raises(KeyError, match=r"needs \['y'\] in its input"):
        env.step(data)

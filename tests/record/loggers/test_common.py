"""The Logger base class and its conversions."""

from __future__ import annotations

import argparse
import dataclasses
import sys

import numpy as np
import pytest
import torch

from cadence.record.loggers.common import Logger, flatten_dict, hparams_to_dict, import_optional, to_scalar


class ListLogger(Logger):
    def _create_experiment(self) -> list:
        return []

    def log_scalar(self, name, value, step=None):
        self.experiment.append((name, self._step(name, step), to_scalar(name, value)))


def test_experiment_is_created_once_and_repr_names_the_arguments(tmp_path):
    logger = ListLogger("exp", tmp_path)
    assert logger.experiment == []
    assert logger.log_dir == str(tmp_path)
    assert repr(logger) == f"ListLogger(exp_name='exp', log_dir={str(tmp_path)!r})"


def test_steps_default_to_one_after_the_last_step_of_each_name():
    logger = ListLogger("exp", None)
    logger.log_scalar("a", 1.0)
    logger.log_scalar("a", 2.0)
    logger.log_scalar("b", 3.0)
    logger.log_scalar("a", 4.0, step=np.int64(10))
    logger.log_scalar("a", 5.0)
    assert [(n, s) for n, s, _ in logger.experiment] == [("a", 0), ("a", 1), ("b", 0), ("a", 10), ("a", 11)]


def test_log_metrics_logs_each_at_the_same_step():
    logger = ListLogger("exp", None)
    logger.log_metrics({"x": torch.tensor(1.0), "y": np.float32(2.0)}, step=3)
    assert logger.experiment == [("x", 3, 1.0), ("y", 3, 2.0)]


@pytest.mark.parametrize("step", [1.5, "3", True, torch.zeros(2)])
def test_bad_steps_are_rejected_with_what_came(step):
    with pytest.raises(TypeError, match="integer step"):
        ListLogger("exp", None).log_scalar("a", 1.0, step=step)


def test_unimplemented_methods_name_the_class():
    logger = ListLogger("exp", None)
    with pytest.raises(NotImplementedError, match="ListLogger does not log videos"):
        logger.log_video("v", torch.zeros(1, 3, 2, 2))
    with pytest.raises(NotImplementedError, match="ListLogger does not log hyper-parameters"):
        logger.log_hparams({})
    with pytest.raises(NotImplementedError, match="ListLogger does not log histograms"):
        logger.log_histogram("h", torch.zeros(3))
    with pytest.raises(NotImplementedError, match="must implement _create_experiment"):
        Logger("exp", None)


def test_bad_names_and_dirs():
    with pytest.raises(TypeError, match="exp_name: expected a non-empty str, got str: ''"):
        ListLogger("", None)
    with pytest.raises(TypeError, match="log_dir: expected a path"):
        ListLogger("exp", 3)


def test_context_manager_closes():
    closed = []

    class Closing(ListLogger):
        def close(self):
            closed.append(True)

    with Closing("exp", None) as logger:
        logger.log_scalar("a", 1)
    assert closed == [True]


@pytest.mark.parametrize(
    "value, expected",
    [(1, 1), (2.5, 2.5), (True, 1), (np.float64(0.5), 0.5), (np.int32(7), 7), (torch.tensor([[3]]), 3),
     (np.array([0.25]), 0.25)],
)
def test_to_scalar_accepts_numbers_and_one_element_tensors(value, expected):
    result = to_scalar("x", value)
    assert result == expected and type(result) is type(expected)


@pytest.mark.parametrize("value", ["1.0", None, np.zeros(3), torch.zeros(0)])
def test_to_scalar_rejects_the_rest(value):
    with pytest.raises(TypeError, match="scalar 'x': expected a number"):
        to_scalar("x", value)


def test_hparams_to_dict_converts_nested_configs():
    @dataclasses.dataclass
    class Optim:
        lr: float = 0.1
        betas: tuple = (0.9, 0.99)

    cfg = argparse.Namespace(optim=Optim(), seed=np.int64(3), env={"name": "Pendulum-v1"}, t=torch.tensor(2.0))
    assert hparams_to_dict(cfg) == {
        "optim": {"lr": 0.1, "betas": [0.9, 0.99]},
        "seed": 3,
        "env": {"name": "Pendulum-v1"},
        "t": 2.0,
    }
    expected = "hparams: expected a mapping, a dataclass instance or an argparse.Namespace, got list"
    with pytest.raises(TypeError, match=expected):
        hparams_to_dict([1, 2])


def test_flatten_dict():
    assert flatten_dict({"a": {"b": {"c": 1}}, "d": 2}, sep="/") == {"a/b/c": 1, "d": 2}


def test_import_optional_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "json", None)
    with pytest.raises(ImportError, match=r'reading needs the \'json\' package.*pip install "cadence\[extra\]"'):
        import_optional("json", feature="reading", extra="extra")

"""Tests for cadence/trainers/resources.py: what a run will allocate, checked before its
folder is made."""

from __future__ import annotations

import io
import shutil
from collections import namedtuple
from pathlib import Path

import pytest
import torch

from cadence.cli import main
from cadence.envs import GymEnv
from cadence.trainers import resources
from cadence.trainers.config import ConfigError, TrainConfig
from cadence.trainers.resources import check_footprint, run_footprint
from cadence.trainers.training import TrainingRun


def test_the_estimate_grows_with_each_field() -> None:
    env = GymEnv("Pendulum-v1")
    base = run_footprint(TrainConfig(), env)
    assert base.frame_bytes == 38  # observation and next observation (3 float32 each), action, reward, flags
    assert run_footprint(TrainConfig(hidden_sizes=[512, 512]), env).memory["networks"] > 3 * base.memory["networks"]
    assert run_footprint(TrainConfig(batch_size=512), env).memory["update"] == 2 * base.memory["update"]
    assert run_footprint(TrainConfig(buffer_size=200_000), env).disk == 2 * base.disk
    assert run_footprint(TrainConfig(algorithm="td3"), env).parameters > base.parameters  # two critics


def test_a_run_that_cannot_fit_is_refused_naming_the_field(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = GymEnv("Pendulum-v1")
    check_footprint(TrainConfig(), env, tmp_path)  # the defaults fit
    with pytest.raises(ConfigError, match=r"^frames_per_batch=50 needs about 3\.8 KB of memory for the collector"):
        monkeypatch.setattr(resources, "memory_limit", lambda: 1000)
        check_footprint(TrainConfig(hidden_sizes=[1], batch_size=1), env, tmp_path)
    monkeypatch.undo()
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10**6, 10**6 - 10**5, 10**5))
    with pytest.raises(ConfigError, match=r"^buffer_size=100000 needs 11\.4 MB of disk .* 100\.0 KB are free under "):
        check_footprint(TrainConfig(), env, tmp_path / "runs" / "not-yet")
    check_footprint(TrainConfig(), env, None)  # what cadence eval checks: the networks only, no buffer


def test_a_handed_run_folder_asking_for_too_much_is_refused_before_anything_is_written(tmp_path: Path,
                                                                                      capsys) -> None:
    TrainingRun.create(TrainConfig(name="handed"), runs_dir=tmp_path, out=io.StringIO())
    folder = tmp_path / "handed"
    config = (folder / "config.toml").read_text()
    (folder / "config.toml").write_text(config.replace("hidden_sizes = [256, 256]", "hidden_sizes = [100000000000]"))
    torch.save({"config": {}, "policy": {"w": torch.zeros(1)}}, folder / "policy.pt")
    before = sorted(p.relative_to(folder) for p in folder.rglob("*"))
    for argv in (["train", "--resume", str(folder)], ["eval", str(folder)]):
        assert main(argv) == 2
        assert "hidden_sizes=[100000000000] needs about" in capsys.readouterr().err
    assert sorted(p.relative_to(folder) for p in folder.rglob("*")) == before

"""Learning results of ``cadence train`` (slow: a minute or two each on 2 cores).

Each algorithm runs its ``TrainConfig`` defaults on Pendulum-v1 (a random policy scores
about -1,200 per episode; a good one better than -200) with a fixed seed; the numbers
repeat exactly for a seed, so these are not flaky.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from cadence.trainers.config import TrainConfig
from cadence.trainers.reporting import read_csv
from cadence.trainers.training import TrainingRun

pytestmark = pytest.mark.slow

QUIET = {"progress": False, "video": False, "plot": False, "tensorboard": False}


def evaluations(folder: Path) -> list[float]:
    return [row["eval_return"] for row in read_csv(folder / "metrics.csv") if row["eval_return"] is not None]


def test_cadence_train_ddpg_solves_pendulum(tmp_path: Path) -> None:
    # what `make demo` runs: the defaults
    summary = TrainingRun.create(TrainConfig(name="ddpg", **QUIET), runs_dir=tmp_path, out=io.StringIO()).run()
    returns = evaluations(tmp_path / "ddpg")
    assert returns[0] < -900  # the first evaluation, after the random frames: not solved yet
    assert summary["best_eval_return"] >= -200 and summary["final_eval_return"] >= -200


@pytest.mark.parametrize("algorithm", ["td3", "sac"])
def test_td3_and_sac_learn_pendulum(tmp_path: Path, algorithm: str) -> None:
    config = TrainConfig(algorithm=algorithm, name=algorithm, total_frames=10_000, **QUIET)
    summary = TrainingRun.create(config, runs_dir=tmp_path, out=io.StringIO()).run()
    assert evaluations(tmp_path / algorithm)[0] < -900
    assert summary["best_eval_return"] >= -250

"""Tests for cadence/trainers/reporting.py: CSV and TensorBoard logs, plot, progress."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from cadence.trainers.reporting import MetricsLog, ProgressDisplay, plot_returns, read_csv


def test_truncate_forgets_what_came_after_a_checkpoint(tmp_path: Path) -> None:
    log = MetricsLog(tmp_path, tensorboard=False)
    log.episode(200, -1000.0, 200)
    log.row({"frames": 1000, "eval_return": -900.0, "loss_actor": 1.5})
    sizes = log.sizes()
    log.episode(400, -800.0, 200)
    log.row({"frames": 2000, "eval_return": -700.0})
    log.close()
    resumed = MetricsLog(tmp_path, tensorboard=False)  # a new process opens the same files
    resumed.truncate(sizes)
    resumed.row({"frames": 2000, "eval_return": -650.0})
    resumed.close()
    assert [row["eval_return"] for row in read_csv(tmp_path / "metrics.csv")] == [-900.0, -650.0]
    assert [row["return"] for row in read_csv(tmp_path / "episodes.csv")] == [-1000.0]
    assert read_csv(tmp_path / "metrics.csv")[0]["loss_actor"] == 1.5


def test_unknown_columns_are_named(tmp_path: Path) -> None:
    log = MetricsLog(tmp_path, tensorboard=False)
    with pytest.raises(KeyError, match=r"metrics.csv has no columns \['reward'\]; its columns are \['frames'"):
        log.row({"frames": 1, "reward": 2.0})
    log.close()


def test_tensorboard_events_after_the_checkpoint_are_purged(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard", reason="needs the tensorboard extra")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    log = MetricsLog(tmp_path, tensorboard=True)
    for frames in (1000, 2000, 3000):
        log.row({"frames": frames, "eval_return": -float(frames)})
    log.close()
    resumed = MetricsLog(tmp_path, tensorboard=True, purge_after=2000)
    resumed.row({"frames": 3000, "eval_return": -1.0})
    resumed.close()
    events = EventAccumulator(str(tmp_path / "tensorboard")).Reload()
    assert [(e.step, e.value) for e in events.Scalars("eval/eval_return")] == [
        (1000, -1000.0), (2000, -2000.0), (3000, -1.0)
    ]


def test_plot_with_and_without_evaluations(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="plots need the train extra")
    log = MetricsLog(tmp_path, tensorboard=False)
    log.episode(200, -1000.0, 200)
    log.close()
    plot_returns(tmp_path, tmp_path / "only_training.png", "title")
    assert (tmp_path / "only_training.png").read_bytes()[:4] == b"\x89PNG"


def test_progress_lines_without_a_bar() -> None:
    out = io.StringIO()
    display = ProgressDisplay(total=3000, initial=1000, enabled=False, out=out)
    display.update(2000, fps=900.0, train_return=None, eval_return=None)
    display.evaluated(2000, -512.25)
    display.update(3000, fps=950.0, train_return=-300.0, eval_return=None)
    display.evaluated(3000, -150.0)
    display.close()
    assert out.getvalue().splitlines() == [
        "frames     2000/3000  fps   900  train return        -  eval return   -512.2",
        "frames     3000/3000  fps   950  train return   -300.0  eval return   -150.0",
    ]


def test_progress_bar(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("tqdm", reason="the bar needs the train extra")
    display = ProgressDisplay(total=100, initial=0, enabled=True)
    display.update(50, fps=10.0, train_return=-3.0, eval_return=None)
    display.evaluated(50, -2.0)
    display.update(100, fps=10.0, train_return=None, eval_return=None)
    display.close()
    err = capsys.readouterr().err
    assert "100/100" in err and "train -3.0 eval -2.0" in err

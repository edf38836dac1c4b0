"""Tests for cadence/trainers/training.py: the run folder, checkpoints and resuming."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from cadence.data.replay_buffers.checkpoint import latest_checkpoint
from cadence.trainers.config import ConfigError, TrainConfig
from cadence.trainers.reporting import TIMING_COLUMNS, read_csv
from cadence.trainers.training import EpisodeTracker, TrainingRun, is_run_folder, load_policy

QUIET = {"progress": False, "video": False, "plot": False, "tensorboard": False}


def small_config(**fields) -> TrainConfig:
    """A run that takes a second or two: tiny networks and batches."""
    values = dict(
        total_frames=400, init_random_frames=100, frames_per_batch=50, eval_interval=100, checkpoint_interval=200,
        hidden_sizes=[16, 16], batch_size=16, eval_episodes=1, **QUIET,
    )
    values.update(fields)
    return TrainConfig(**values)


def logged(folder: Path) -> tuple[list[dict], list[dict]]:
    """The run's CSV rows without the clock columns (which differ between runs)."""
    metrics = [{k: v for k, v in row.items() if k not in TIMING_COLUMNS} for row in read_csv(folder / "metrics.csv")]
    return metrics, read_csv(folder / "episodes.csv")


def policy_weights(folder: Path) -> dict[str, torch.Tensor]:
    return torch.load(folder / "policy.pt", weights_only=True)["policy"]


def assert_same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key


def test_a_run_writes_its_folder(tmp_path: Path) -> None:
    out = io.StringIO()
    config = small_config(name="run", plot=True, tensorboard=True)
    summary = TrainingRun.create(config, runs_dir=tmp_path, out=out).run()
    folder = tmp_path / "run"
    assert is_run_folder(folder)
    for name in ("config.toml", "metrics.csv", "episodes.csv", "policy.pt", "returns.png", "summary.json"):
        assert (folder / name).is_file(), name
    assert list((folder / "tensorboard").iterdir())
    assert json.loads((folder / "summary.json").read_text()) == summary
    assert summary["frames"] == 400 and summary["evaluations"] == 4
    # as in the tutorial, updates start with the batch that completes the 100 random frames:
    # 7 batches of 50 frames, one update per frame
    assert summary["updates"] == 350
    metrics, episodes = logged(folder)
    assert [row["frames"] for row in metrics] == [100, 200, 300, 400]
    assert [row["frames"] for row in episodes] == [200, 400]  # Pendulum's episodes last 200 steps
    assert all(row["length"] == 200 for row in episodes)
    assert metrics[0]["updates"] == 50 and metrics[-1]["updates"] == 350
    assert metrics[-1]["loss_actor"] is not None and metrics[-1]["loss_value"] is not None
    printed = out.getvalue()
    assert "ddpg on Pendulum-v1 (seed 0): 400 frames, 350 updates" in printed
    assert "evaluation return: final" in printed and str(folder / "policy.pt") in printed


def test_the_same_seed_gives_the_same_numbers(tmp_path: Path) -> None:
    TrainingRun.create(small_config(name="a"), runs_dir=tmp_path, out=io.StringIO()).run()
    TrainingRun.create(small_config(name="b"), runs_dir=tmp_path, out=io.StringIO()).run()
    TrainingRun.create(small_config(name="c", seed=1), runs_dir=tmp_path, out=io.StringIO()).run()
    assert logged(tmp_path / "a") == logged(tmp_path / "b")
    assert logged(tmp_path / "a") != logged(tmp_path / "c")
    assert_same_weights(policy_weights(tmp_path / "a"), policy_weights(tmp_path / "b"))


@pytest.mark.parametrize("algorithm", ["ddpg", "td3", "sac"])
def test_training_longer_after_resume_equals_an_unbroken_run(tmp_path: Path, algorithm: str) -> None:
    unbroken = small_config(name="unbroken", algorithm=algorithm, total_frames=600)
    TrainingRun.create(unbroken, runs_dir=tmp_path, out=io.StringIO()).run()
    short = small_config(name="resumed", algorithm=algorithm, total_frames=300)
    TrainingRun.create(short, runs_dir=tmp_path, out=io.StringIO()).run()
    out = io.StringIO()
    TrainingRun.resume(tmp_path / "resumed", {"total_frames": "600"}, out=out).run()
    assert "resuming" in out.getvalue() and "at frame 300 of 600" in out.getvalue()
    assert logged(tmp_path / "unbroken") == logged(tmp_path / "resumed")
    assert_same_weights(policy_weights(tmp_path / "unbroken"), policy_weights(tmp_path / "resumed"))


def test_resume_of_a_mujoco_run_continues_its_episodes(tmp_path: Path) -> None:
    pytest.importorskip("mujoco", reason="the MuJoCo envs need gymnasium[mujoco]")
    fields = dict(env="HalfCheetah-v5", eval_interval=150, checkpoint_interval=150, max_episode_steps=100)
    TrainingRun.create(small_config(name="unbroken", total_frames=450, **fields), runs_dir=tmp_path,
                       out=io.StringIO()).run()
    TrainingRun.create(small_config(name="resumed", total_frames=150, **fields), runs_dir=tmp_path,
                       out=io.StringIO()).run()
    TrainingRun.resume(tmp_path / "resumed", {"total_frames": 450}, out=io.StringIO()).run()
    assert logged(tmp_path / "unbroken") == logged(tmp_path / "resumed")


def _kill_when_checkpointed(process: subprocess.Popen, folder: Path, timeout: float = 120.0) -> None:
    """SIGKILLs ``process`` as soon as ``folder`` holds its first checkpoint."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            latest_checkpoint(folder / "checkpoints")
            break
        except FileNotFoundError:
            if process.poll() is not None:
                pytest.fail(f"the run ended before its first checkpoint: {process.stderr.read()}")
            time.sleep(0.01)
    else:
        pytest.fail("no checkpoint appeared")
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)


def test_a_run_killed_by_sigkill_resumes_to_the_same_numbers(tmp_path: Path) -> None:
    options = [
        "--total-frames", "1500", "--init-random-frames", "100", "--eval-interval", "250",
        "--checkpoint-interval", "250", "--hidden-sizes", "16,16", "--batch-size", "16", "--eval-episodes", "1",
        "--no-progress", "--no-video", "--no-plot", "--no-tensorboard", "--runs-dir", str(tmp_path),
    ]
    subprocess.run([sys.executable, "-m", "cadence", "train", "ddpg", "--name", "unbroken", *options],
                   check=True, capture_output=True, text=True, timeout=300)
    process = subprocess.Popen([sys.executable, "-m", "cadence", "train", "ddpg", "--name", "killed", *options],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    folder = tmp_path / "killed"
    _kill_when_checkpointed(process, folder)
    assert process.returncode == -signal.SIGKILL
    assert not (folder / "summary.json").exists(), "the run finished before it was killed"
    saved = torch.load(latest_checkpoint(folder / "checkpoints") / "state.pt", weights_only=True)["frames"]
    resumed = subprocess.run([sys.executable, "-m", "cadence", "train", "--resume", str(folder)],
                             check=True, capture_output=True, text=True, timeout=300)
    # what was lost: the frames after the latest checkpoint, no more
    assert f"resuming {folder} at frame {saved} of 1500" in resumed.stdout
    assert logged(tmp_path / "unbroken") == logged(folder)
    assert_same_weights(policy_weights(tmp_path / "unbroken"), policy_weights(folder))


def test_an_existing_folder_is_not_overwritten(tmp_path: Path) -> None:
    TrainingRun.create(small_config(name="taken"), runs_dir=tmp_path)
    (tmp_path / "taken" / "keep.txt").write_text("mine")
    with pytest.raises(ConfigError, match="already exists; pass --overwrite to replace it, or use cadence train "
                                          "--resume"):
        TrainingRun.create(small_config(name="taken"), runs_dir=tmp_path)
    assert (tmp_path / "taken" / "keep.txt").read_text() == "mine"
    TrainingRun.create(small_config(name="taken"), runs_dir=tmp_path, overwrite=True)
    assert not (tmp_path / "taken" / "keep.txt").exists()
    (tmp_path / "plain").mkdir()
    with pytest.raises(ConfigError, match="is not a run folder of cadence train .* it is left as it is: choose another --name"):
        TrainingRun.create(small_config(name="plain"), runs_dir=tmp_path)


def test_resume_checks_the_folder_and_what_may_change(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is not a run folder of cadence train"):
        TrainingRun.resume(tmp_path)
    TrainingRun.create(small_config(name="run"), runs_dir=tmp_path)
    with pytest.raises(ConfigError, match="--resume cannot change seed, gamma of"):
        TrainingRun.resume(tmp_path / "run", {"seed": 3, "gamma": 0.9})
    with pytest.raises(ConfigError, match="total_frames must be >= 1"):
        TrainingRun.resume(tmp_path / "run", {"total_frames": 0})
    run = TrainingRun.resume(tmp_path / "run", {"total_frames": 1000, "video": True})
    assert run.config.total_frames == 1000 and run.config.video
    assert "total_frames = 1000" in (tmp_path / "run" / "config.toml").read_text()


def test_a_run_stopped_before_its_first_checkpoint_starts_over(tmp_path: Path) -> None:
    TrainingRun.create(small_config(name="fresh", total_frames=200), runs_dir=tmp_path)
    summary = TrainingRun.resume(tmp_path / "fresh", out=io.StringIO()).run()
    assert summary["frames"] == 200


def test_resume_without_a_checkpoint_empties_the_logs_of_the_killed_attempt(tmp_path: Path) -> None:
    config = small_config(tensorboard=True)
    TrainingRun.create(dataclasses.replace(config, name="unbroken"), runs_dir=tmp_path, out=io.StringIO()).run()
    folder = tmp_path / "killed"
    TrainingRun.create(dataclasses.replace(config, name="killed"), runs_dir=tmp_path, out=io.StringIO()).run()
    # what a kill before the first checkpoint leaves: logs written, no checkpoint, no policy
    for entry in (folder / "checkpoints").iterdir():
        shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    (folder / "policy.pt").unlink()
    assert read_csv(folder / "episodes.csv")
    out = io.StringIO()
    TrainingRun.resume(folder, out=out).run()
    assert "resuming" not in out.getvalue()
    assert logged(folder) == logged(tmp_path / "unbroken")  # no row twice
    assert len(list((folder / "tensorboard").glob("events.out.tfevents.*"))) == 1


def test_load_policy_prefers_the_final_policy_then_the_checkpoint(tmp_path: Path) -> None:
    TrainingRun.create(small_config(name="run", total_frames=200), runs_dir=tmp_path, out=io.StringIO()).run()
    config, policy, source = load_policy(tmp_path / "run")
    assert source.endswith("policy.pt") and config.total_frames == 200
    assert_same_weights(policy.state_dict(), policy_weights(tmp_path / "run"))
    os.remove(tmp_path / "run" / "policy.pt")
    _, from_checkpoint, source = load_policy(tmp_path / "run")
    assert source.endswith("state.pt")
    assert_same_weights(from_checkpoint.state_dict(), policy.state_dict())


def test_episode_tracker_counts_across_batches_and_envs() -> None:
    from tensordict import TensorDict

    tracker = EpisodeTracker(2)
    done = torch.tensor([[False, True, False], [False, False, False]]).unsqueeze(-1)
    batch = TensorDict({"next": {"reward": torch.ones(2, 3, 1), "done": done}}, [2, 3])
    assert tracker.update(batch, frames_before=0) == [(4, 2.0, 2)]
    done = torch.tensor([[False, False, False], [True, False, False]]).unsqueeze(-1)
    batch = TensorDict({"next": {"reward": torch.full((2, 3, 1), 2.0), "done": done}}, [2, 3])
    # env 1 ran 3 steps of reward 1, then one of reward 2
    assert tracker.update(batch, frames_before=6) == [(8, 5.0, 4)]
    assert tracker.state_dict()["lengths"].tolist() == [4, 2]


def test_several_envs_per_batch(tmp_path: Path) -> None:
    summary = TrainingRun.create(
        small_config(name="two", num_envs=2, frames_per_batch=100), runs_dir=tmp_path, out=io.StringIO()
    ).run()
    assert summary["frames"] == 400
    _, episodes = logged(tmp_path / "two")
    assert [row["frames"] for row in episodes] == [400, 400]  # both envs end their episode at step 200


def test_a_dm_control_run_resumes_exactly(tmp_path: Path) -> None:
    pytest.importorskip("dm_control", reason="dm_control tasks need the dm_control extra")
    fields = dict(env="cartpole/swingup", max_episode_steps=100)
    TrainingRun.create(small_config(name="unbroken", total_frames=400, **fields), runs_dir=tmp_path,
                       out=io.StringIO()).run()
    TrainingRun.create(small_config(name="resumed", total_frames=200, **fields), runs_dir=tmp_path,
                       out=io.StringIO()).run()
    TrainingRun.resume(tmp_path / "resumed", {"total_frames": 400}, out=io.StringIO()).run()
    metrics, episodes = logged(tmp_path / "resumed")
    assert [row["frames"] for row in episodes] == [100, 200, 300, 400]
    assert (metrics, episodes) == logged(tmp_path / "unbroken")

"""Tests for cadence/trainers/checkpoint_files.py: checkpoint and policy files hold no code
that runs when read, and every damaged file is named."""

from __future__ import annotations

import hashlib
import io
import json
import pickle
from pathlib import Path

import pytest
import torch

from cadence.cli import main
from cadence.data.replay_buffers.checkpoint import CheckpointError, checkpoint_history
from cadence.trainers.checkpoint_files import read_policy_file, read_training_state, write_training_state
from cadence.trainers.config import TrainConfig
from cadence.trainers.training import TrainingRun

QUIET = dict(progress=False, video=False, plot=False, tensorboard=False)
TINY = dict(total_frames=200, init_random_frames=50, frames_per_batch=50, eval_interval=200, checkpoint_interval=100,
            hidden_sizes=[8], batch_size=8, eval_episodes=1, **QUIET)


class Payload:
    """Unpickling this creates ``marker``: the stand-in for an attacker's code."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def _rewrite_manifest(directory: Path, name: str) -> None:
    """What an attacker who edits a file also does: make the manifest agree with it."""
    manifest = json.loads((directory / "manifest.json").read_text())
    data = (directory / name).read_bytes()
    manifest["files"][name].update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest())
    (directory / "manifest.json").write_text(json.dumps(manifest))


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    runs = tmp_path_factory.mktemp("runs")
    TrainingRun.create(TrainConfig(name="run", **TINY), runs_dir=runs, out=io.StringIO()).run()
    return runs / "run"


def _copy_run(source: Path, tmp_path: Path) -> Path:
    """A copy of a run that keeps its key (the copy is the same run, on this machine)."""
    import shutil

    target = tmp_path / "run"
    shutil.copytree(source, target, symlinks=True)
    return target


def test_a_payload_in_policy_pt_does_not_run(finished_run: Path, tmp_path: Path, capsys) -> None:
    run = _copy_run(finished_run, tmp_path)
    marker = tmp_path / "pwned"
    torch.save({"config": {}, "policy": Payload(marker)}, run / "policy.pt")
    assert main(["eval", str(run), "--no-video"]) == 2
    err = capsys.readouterr().err
    assert f"{run / 'policy.pt'}: holds more than tensors and plain values (refused, nothing in it was run)" in err
    assert not marker.exists()


def test_a_payload_in_state_pt_does_not_run(finished_run: Path, tmp_path: Path, capsys) -> None:
    run = _copy_run(finished_run, tmp_path)
    marker = tmp_path / "pwned"
    for directory in checkpoint_history(run / "checkpoints"):
        torch.save({"frames": Payload(marker)}, directory / "state.pt")
        _rewrite_manifest(directory, "state.pt")
    (run / "policy.pt").unlink()
    assert main(["train", "--resume", str(run), "--total-frames", "300"]) == 2
    err = capsys.readouterr().err
    assert "no usable checkpoint in" in err and "state.pt: holds more than tensors and plain values" in err
    assert main(["eval", str(run), "--no-video"]) == 2  # eval reads the checkpoint when there is no policy.pt
    assert "refused, nothing in it was run" in capsys.readouterr().err
    assert not marker.exists()


@pytest.mark.parametrize("signature", ["none", "forged", "other key"])
def test_a_payload_in_a_simulator_snapshot_does_not_run(finished_run: Path, tmp_path: Path, signature: str) -> None:
    run = _copy_run(finished_run, tmp_path)
    marker = tmp_path / "pwned"
    newest = checkpoint_history(run / "checkpoints")[0]
    (newest / "simulators.pkl").write_bytes(pickle.dumps(Payload(marker)))
    _rewrite_manifest(newest, "simulators.pkl")
    manifest = json.loads((newest / "manifest.json").read_text())
    entry = manifest["files"]["simulators.pkl"]
    if signature == "none":
        entry.pop("hmac")
    elif signature == "forged":
        entry["hmac"] = "0" * 64
    else:
        import hmac

        entry["hmac"] = hmac.new(b"x" * 32, (newest / "simulators.pkl").read_bytes(), hashlib.sha256).hexdigest()
    (newest / "manifest.json").write_text(json.dumps(manifest))
    out = io.StringIO()
    summary = TrainingRun.resume(run, {"total_frames": 300}, out=out).run()
    assert not marker.exists()
    assert "simulators.pkl is not signed with this run's key (its signature does not match" in out.getvalue()
    assert summary["frames"] == 300  # the run goes on, with new episodes


def test_a_run_folder_from_elsewhere_resumes_without_unpickling(finished_run: Path, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    run = _copy_run(finished_run, tmp_path)
    monkeypatch.setenv("CADENCE_KEY_DIR", str(tmp_path / "another machine's keys"))
    out = io.StringIO()
    assert TrainingRun.resume(run, {"total_frames": 300}, out=out).run()["frames"] == 300
    assert "no key for this run is kept here" in out.getvalue()


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def test_a_truncated_newest_state_falls_back_to_the_one_before(finished_run: Path, tmp_path: Path) -> None:
    run = _copy_run(finished_run, tmp_path)
    newest, previous = checkpoint_history(run / "checkpoints")
    _truncate(newest / "state.pt")
    out = io.StringIO()
    summary = TrainingRun.resume(run, {"total_frames": 300}, out=out).run()
    printed = out.getvalue()
    assert f"cannot resume from {newest.name}: {newest / 'state.pt'}:" in printed
    assert "(truncated or replaced); falling back to the checkpoint before it" in printed
    assert "resuming" in printed and "at frame 100 of 300" in printed
    assert summary["frames"] == 300


@pytest.mark.parametrize("damage", ["truncate", "empty", "replace", "delete", "bad manifest"])
def test_damaged_checkpoints_are_named_and_exit_2(finished_run: Path, tmp_path: Path, capsys, damage: str) -> None:
    run = _copy_run(finished_run, tmp_path)
    for directory in checkpoint_history(run / "checkpoints"):
        state = directory / "state.pt"
        if damage == "truncate":
            _truncate(state)
        elif damage == "empty":
            state.write_bytes(b"")
        elif damage == "replace":
            state.write_bytes((run / "policy.pt").read_bytes())
        elif damage == "delete":
            state.unlink()
        else:
            (directory / "manifest.json").write_text('{"files": ')
    assert main(["train", "--resume", str(run), "--total-frames", "300"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"cadence train: error: no usable checkpoint in {run / 'checkpoints'}: ")
    assert err.count("\n") == 1
    expected = {
        "truncate": "(truncated or replaced)", "empty": "0 bytes, the manifest says",
        "replace": "(truncated or replaced)", "delete": "state.pt: missing", "bad manifest": "not a checkpoint manifest",
    }[damage]
    assert expected in err


def test_a_state_of_another_shape_is_named(tmp_path: Path) -> None:
    write_training_state(tmp_path, {"frames": 1}, simulators=None, key=None)
    with pytest.raises(CheckpointError, match=r"state.pt: not a training state, it lacks agent"):
        read_training_state(tmp_path, key=None, required=("frames", "agent"))
    torch.save([1, 2], tmp_path / "state.pt")
    _rewrite_manifest(tmp_path, "state.pt")
    with pytest.raises(CheckpointError, match=r"state.pt: expected a dict of the training state, got list"):
        read_training_state(tmp_path, key=None, required=())


def test_a_policy_file_of_another_kind_is_named(tmp_path: Path) -> None:
    torch.save({"weights": torch.zeros(2)}, tmp_path / "policy.pt")
    with pytest.raises(CheckpointError, match="not a policy file of cadence train"):
        read_policy_file(tmp_path / "policy.pt")


def test_a_policy_of_another_network_is_named(finished_run: Path, tmp_path: Path, capsys) -> None:
    run = _copy_run(finished_run, tmp_path)
    torch.save({"config": {}, "policy": {"module.0.weight": torch.zeros(3)}}, run / "policy.pt")
    assert main(["eval", str(run), "--no-video"]) == 2
    assert f"{run / 'policy.pt'}: does not fit this run's" in capsys.readouterr().err


def test_eval_reads_the_policy_of_the_checkpoint_before_a_damaged_one(finished_run: Path, tmp_path: Path,
                                                                     capsys) -> None:
    run = _copy_run(finished_run, tmp_path)
    (run / "policy.pt").unlink()
    newest, previous = checkpoint_history(run / "checkpoints")
    _truncate(newest / "state.pt")
    assert main(["eval", str(run), "--episodes", "1", "--no-video"]) == 0
    assert f"policy from {previous / 'state.pt'}" in capsys.readouterr().out

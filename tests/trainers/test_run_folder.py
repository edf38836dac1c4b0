"""Tests for cadence/trainers/run_folder.py: what makes a run folder, what --overwrite may
remove, and the run's signing key (kept outside the folder)."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from cadence.cli import main
from cadence.trainers.config import ConfigError, TrainConfig
from cadence.trainers.run_folder import (
    MARKER,
    create_run_folder,
    is_run_folder,
    key_directory,
    read_run_id,
    remove_run_folder,
    run_key,
)
from cadence.trainers.training import TrainingRun


def test_a_run_folder_has_a_marker_and_a_key_kept_elsewhere(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    run_id = create_run_folder(folder)
    assert is_run_folder(folder) and read_run_id(folder) == run_id
    key_file = key_directory() / f"{run_id}.key"
    assert key_file.is_file() and not key_file.is_relative_to(folder)
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"
    assert run_key(folder) == key_file.read_bytes()
    with pytest.raises(FileExistsError):
        create_run_folder(folder)


@pytest.mark.parametrize("marker", ["", "{", '{"run_id": "../../etc/passwd"}', '{"run_id": 3}', "[1]"])
def test_a_damaged_or_crafted_marker_makes_no_run_folder(tmp_path: Path, marker: str) -> None:
    (tmp_path / MARKER).write_text(marker)
    assert not is_run_folder(tmp_path)
    assert run_key(tmp_path) is None


def test_remove_run_folder_removes_only_runs(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "keep.txt").write_text("mine")
    with pytest.raises(PermissionError, match="not a run folder of cadence train"):
        remove_run_folder(plain)
    run = tmp_path / "run"
    run_id = create_run_folder(run)
    link = tmp_path / "link"
    link.symlink_to(run)
    with pytest.raises(PermissionError, match="is a symbolic link: not removing it"):
        remove_run_folder(link)
    assert (plain / "keep.txt").exists() and run.is_dir()
    remove_run_folder(run)
    assert not run.exists() and not (key_directory() / f"{run_id}.key").exists()


@pytest.mark.parametrize("name", ["../../x", "/tmp/elsewhere", ".", "..", "a/b", ".hidden", "x" * 129, "tab\there", "é"])
def test_a_run_name_is_one_safe_path_component(tmp_path: Path, name: str) -> None:
    with pytest.raises(ConfigError, match="name must be one folder name of letters, digits"):
        TrainingRun.create(TrainConfig(name=name), runs_dir=tmp_path / "runs")
    assert not (tmp_path / "runs").exists()


def test_derived_names_are_safe_too() -> None:
    assert TrainConfig(env="my_module:Thermostat-v0").run_name() == "ddpg-my_module-Thermostat-v0-seed0"


@pytest.mark.parametrize("argv_name", [["--name", "../../x"], ["--name", "."], ["--name", "/abs"]])
def test_cli_rejects_names_that_escape_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys,
                                            argv_name: list[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "other").mkdir(parents=True)
    assert main(["train", "ddpg", *argv_name, "--overwrite"]) == 2
    assert "name must be one folder name" in capsys.readouterr().err
    assert (tmp_path / "runs" / "other").is_dir()
    assert sorted(os.listdir(tmp_path)) == ["runs"]


def test_a_name_in_a_config_file_is_checked_the_same_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run.toml").write_text('name = "../outside"\n')
    assert main(["train", "ddpg", "--config", "run.toml"]) == 2
    assert "name must be one folder name" in capsys.readouterr().err
    assert not (tmp_path / "outside").exists() and not (tmp_path / "runs").exists()


def test_overwrite_leaves_folders_that_are_not_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "notes").mkdir(parents=True)
    (tmp_path / "runs" / "notes" / "thesis.tex").write_text("years of work")
    assert main(["train", "ddpg", "--name", "notes", "--overwrite"]) == 2
    assert "is not a run folder of cadence train" in capsys.readouterr().err
    assert (tmp_path / "runs" / "notes" / "thesis.tex").read_text() == "years of work"
    # a symbolic link named like a run is not followed
    (tmp_path / "elsewhere").mkdir()
    TrainingRun.create(TrainConfig(name="real"), runs_dir=tmp_path / "elsewhere", out=io.StringIO())
    (tmp_path / "runs" / "linked").symlink_to(tmp_path / "elsewhere" / "real")
    assert main(["train", "ddpg", "--name", "linked", "--overwrite"]) == 2
    assert is_run_folder(tmp_path / "elsewhere" / "real")


def test_an_env_module_inside_a_run_folder_is_not_imported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys) -> None:
    TrainingRun.create(TrainConfig(name="handed"), runs_dir=tmp_path, out=io.StringIO())
    folder = tmp_path / "handed"
    config = (folder / "config.toml").read_text().replace('env = "Pendulum-v1"', 'env = "planted_env:X-v0"')
    (folder / "config.toml").write_text(config)
    (folder / "planted_env.py").write_text(f"open({str(tmp_path / 'pwned')!r}, 'w').close()\n")
    monkeypatch.chdir(folder)  # python -m cadence puts the current folder on sys.path
    monkeypatch.syspath_prepend(str(folder))
    assert main(["eval", str(folder), "--no-video"]) == 2
    assert "names the env module 'planted_env', which lies inside the run folder" in capsys.readouterr().err
    assert main(["train", "--resume", str(folder)]) == 2
    assert not (tmp_path / "pwned").exists()


def _handed_run(tmp_path: Path) -> Path:
    TrainingRun.create(TrainConfig(name="handed"), runs_dir=tmp_path / "runs", out=io.StringIO())
    return tmp_path / "runs" / "handed"


def _snapshot(path: Path) -> dict[str, bytes]:
    """Every file under ``path`` (or ``path`` itself) and its bytes."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return {str(p): p.read_bytes() for p in files}


@pytest.mark.parametrize("entry", [
    "metrics.csv", "episodes.csv", "summary.json", "returns.png", "policy.pt.partial", "config.toml", "eval.mp4",
    "video.mp4", "buffer", "tensorboard", "checkpoints",
])
def test_a_run_folder_holding_links_is_refused_and_nothing_is_written(tmp_path: Path, capsys, entry: str) -> None:
    folder = _handed_run(tmp_path)
    victim = tmp_path / "victim"
    if entry in ("buffer", "tensorboard", "checkpoints"):  # another folder of the user's, another run's
        victim.mkdir()
        (victim / "events.out.tfevents.1").write_text("someone else's")
        (victim / "LATEST").write_text("checkpoint-000001")
        if (folder / entry).exists():
            (folder / entry).rmdir()
    else:
        victim.write_text('env = "Pendulum-v1"\n' if entry == "config.toml" else "someone else's file")
        (folder / entry).unlink(missing_ok=True)
    (folder / entry).symlink_to(victim)
    before = _snapshot(victim)
    for argv in (["train", "--resume", str(folder)], ["eval", str(folder)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"holds symbolic links, hard links or special files ({entry})" in err
    assert _snapshot(victim) == before and sorted(p.name for p in victim.parent.iterdir()) == ["runs", "victim"]


def test_hard_links_and_pipes_in_a_run_folder_are_refused(tmp_path: Path, capsys) -> None:
    folder = _handed_run(tmp_path)
    victim = tmp_path / "notes.txt"
    victim.write_text("mine")
    os.link(victim, folder / "metrics.csv")
    os.mkfifo(folder / "episodes.csv")  # appending to a pipe would wait forever
    assert main(["train", "--resume", str(folder)]) == 2
    assert "(episodes.csv, metrics.csv)" in capsys.readouterr().err
    assert victim.read_text() == "mine"


def test_an_env_module_in_a_namespace_package_of_the_run_folder_is_not_imported(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    folder = _handed_run(tmp_path)
    config = (folder / "config.toml").read_text().replace('"Pendulum-v1"', '"checkpoints.evil:Pendulum-v1"')
    (folder / "config.toml").write_text(config)
    (folder / "checkpoints" / "evil.py").write_text(f"open({str(tmp_path / 'pwned')!r}, 'w').close()\n")
    monkeypatch.chdir(folder)  # `python -m cadence eval .` from inside the folder
    for argv in (["eval", "."], ["train", "--resume", "."]):
        assert main(argv) == 2
        assert "names the env module 'checkpoints', which lies inside the run folder" in capsys.readouterr().err
    assert not (tmp_path / "pwned").exists()


def test_overwrite_removes_only_the_key_made_for_that_folder(tmp_path: Path, capsys) -> None:
    mine = tmp_path / "runs" / "mine"
    run_id = create_run_folder(mine)
    copy = tmp_path / "runs" / "copy"
    copy.mkdir()
    (copy / MARKER).write_text((mine / MARKER).read_text())  # a copied folder, or a crafted marker naming my run
    assert read_run_id(copy) == run_id
    remove_run_folder(copy)
    assert not copy.exists() and run_key(mine) is not None
    # through the command line too
    (tmp_path / "runs" / "copy").mkdir()
    (tmp_path / "runs" / "copy" / MARKER).write_text((mine / MARKER).read_text())
    assert main(["train", "ddpg", "--runs-dir", str(tmp_path / "runs"), "--name", "copy", "--overwrite",
                 "--total-frames", "1", "--init-random-frames", "0", "--frames-per-batch", "1", "--batch-size", "1",
                 "--hidden-sizes", "4", "--no-video", "--no-plot", "--no-progress", "--no-tensorboard"]) == 0
    assert run_key(mine) is not None and (key_directory() / f"{run_id}.key").is_file()
    # the folder the key was made for takes it along
    remove_run_folder(mine)
    assert not (key_directory() / f"{run_id}.key").exists()

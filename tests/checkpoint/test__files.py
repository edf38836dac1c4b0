"""Checkpoint files handed over by someone else: payloads that would run code are refused
(nothing runs), damaged, truncated or edited files are named with their component, names
in a manifest never become paths outside the checkpoint."""

from __future__ import annotations

import io
import json
import os
import warnings
import zipfile
import zlib
from pathlib import Path
from typing import Any

import pytest
import torch

from cadence.checkpoint import Checkpoint, CheckpointError
from cadence.data.replay_buffers import LazyTensorStorage, ReplayBuffer

FORMATS = ["archive", "directory"]


class _Payload:
    """Unpickling it would create ``marker``: the file it is planted in must be refused."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        return (Path.write_text, (Path(self.marker), "the payload ran"))


# ---------------------------------------------------------------------- editing a checkpoint by hand
def _tree(path: Path) -> Path:
    """The folder holding ``manifest.json`` of a directory checkpoint."""
    return path / (path / "LATEST").read_text().split()[0]


def _files(path: Path) -> dict[str, bytes]:
    """Every file of the checkpoint (directory or archive), by relative name."""
    if path.is_dir():
        root = _tree(path)
        return {file.relative_to(root).as_posix(): file.read_bytes() for file in root.rglob("*") if file.is_file()}
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _rewrite(path: Path, files: dict[str, bytes], reseal: bool = True) -> None:
    """Writes ``files`` back, the manifest's records (sizes, CRC-32) and seal redone as a
    forger would (so that only what the files hold can refuse them)."""
    if reseal:
        manifest = json.loads(files["manifest.json"])
        for name, record in manifest["components"].items():
            for relative, entry in record["files"].items():
                data = files[f"components/{name}/{relative}"]
                entry["bytes"] = len(data)
                if "crc32" in entry:
                    entry["crc32"] = zlib.crc32(data)
        files["manifest.json"] = _sealed(manifest)
    if path.is_dir():
        root = _tree(path)
        for relative, data in files.items():
            (root / relative).write_bytes(data)
    else:
        with zipfile.ZipFile(path, "w") as archive:
            for relative, data in files.items():
                archive.writestr(relative, data)


def _sealed(manifest: dict[str, Any]) -> bytes:
    """The manifest's bytes with its seal (CRC-32) redone."""
    body = {key: value for key, value in manifest.items() if key != "crc32"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    return json.dumps({**body, "crc32": zlib.crc32(canonical)}).encode()


def _pickle_bytes(value: Any) -> bytes:
    buffer = io.BytesIO()
    torch.save(value, buffer)
    return buffer.getvalue()


def _saved(tmp_path: Path, format: str, **components: Any) -> Path:
    return Checkpoint(format=format, **components).save(tmp_path / "ckpt")


# ---------------------------------------------------------------------- payloads
@pytest.mark.parametrize("format", FORMATS)
@pytest.mark.parametrize("weights_only", [True, False])
def test_a_payload_in_a_state_file_does_not_run(tmp_path: Path, format: str, weights_only: bool) -> None:
    path = _saved(tmp_path, format, policy=torch.nn.Linear(2, 2))
    marker = tmp_path / "ran.txt"
    files = _files(path)
    files["components/policy/state.pt"] = _pickle_bytes({"state": _Payload(str(marker)), "generators": {}})
    _rewrite(path, files)
    policy = torch.nn.Linear(2, 2)
    before = policy.weight.clone()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(CheckpointError) as raised:
            Checkpoint(policy=policy).load(path, tensor_load_kwargs={"weights_only": weights_only, "mmap": True})
    assert any("'weights_only': False} is ignored" in str(w.message) for w in caught) == (not weights_only)
    message = str(raised.value)
    assert "component 'policy'" in message and "components/policy/state.pt" in message
    assert "holds more than tensors and plain values (refused, nothing in it was run" in message
    assert "weights_only=False" not in message  # no advice to load it anyway
    assert not marker.exists() and torch.equal(policy.weight, before)


@pytest.mark.parametrize("format", FORMATS)
def test_a_payload_in_a_data_value_does_not_run(tmp_path: Path, format: str) -> None:
    path = _saved(tmp_path, format, stats={"loc": torch.zeros(3)})
    marker = tmp_path / "ran.txt"
    files = _files(path)
    files["components/stats/state.pt"] = _pickle_bytes({"loc": _Payload(str(marker))})
    _rewrite(path, files)
    stats: dict[str, Any] = {}
    with pytest.raises(CheckpointError, match=r"component 'stats': .*state.pt: holds more than tensors"):
        Checkpoint(stats=stats).load(path)
    assert not marker.exists() and stats == {}


def test_a_payload_in_a_replay_buffer_does_not_run(tmp_path: Path) -> None:
    buffer = ReplayBuffer(storage=LazyTensorStorage(10))
    buffer.extend(torch.arange(4.0))
    path = _saved(tmp_path, "directory", replay_buffer=buffer)
    marker = tmp_path / "ran.txt"
    [state_file] = list((_tree(path) / "components" / "replay_buffer").rglob("buffer.pt"))
    torch.save({"sampler": _Payload(str(marker))}, state_file)
    files = _files(path)
    _rewrite(path, files)  # the outer records redone; the buffer's own checksum now differs
    target = ReplayBuffer(storage=LazyTensorStorage(10))
    with pytest.raises(CheckpointError, match=r"component 'replay_buffer': .*buffer.pt"):
        Checkpoint(replay_buffer=target).load(path)
    assert not marker.exists() and len(target) == 0


@pytest.mark.parametrize("format", FORMATS)
def test_a_non_json_value_file_is_named(tmp_path: Path, format: str) -> None:
    path = _saved(tmp_path, format, config={"lr": 0.1})
    files = _files(path)
    files["components/config/value.json"] = b"\x80\x04cos\nsystem\n"
    _rewrite(path, files)
    with pytest.raises(CheckpointError, match=r"component 'config': .*components/config/value.json: not valid JSON"):
        Checkpoint(config={}).load(path)


def test_a_state_of_another_layout_is_named(tmp_path: Path) -> None:
    path = _saved(tmp_path, "archive", policy=torch.nn.Linear(1, 1), generator=torch.Generator())
    files = _files(path)
    files["components/policy/state.pt"] = _pickle_bytes([1, 2])
    files["components/generator/state.pt"] = _pickle_bytes({"generator": torch.zeros(16, dtype=torch.uint8)})
    _rewrite(path, files)
    with pytest.raises(CheckpointError, match=r"state.pt: expected a dict of 'state' and 'generators', got a list"):
        Checkpoint(policy=torch.nn.Linear(1, 1)).load(path, components={"policy"})
    with pytest.raises(CheckpointError, match=r"the generator's state should be a uint8 tensor of shape \[5056\] \(a generator on cpu\), got a torch.uint8 tensor of shape \[16\]"):
        Checkpoint(generator=torch.Generator()).load(path, components={"generator"})


# ---------------------------------------------------------------------- damage
@pytest.mark.parametrize("format", FORMATS)
def test_a_truncated_state_file_is_named(tmp_path: Path, format: str) -> None:
    path = _saved(tmp_path, format, policy=torch.nn.Linear(8, 8))
    files = _files(path)
    size = len(files["components/policy/state.pt"])
    files["components/policy/state.pt"] = files["components/policy/state.pt"][:100]
    _rewrite(path, files, reseal=False)
    with pytest.raises(CheckpointError) as raised:
        Checkpoint(policy=torch.nn.Linear(8, 8)).load(path)
    message = str(raised.value)
    assert "component 'policy'" in message and "components/policy/state.pt" in message
    if format == "directory":
        assert f"holds 100 bytes, the manifest says {size} (truncated)" in message
    else:
        assert f"holds 100 bytes, the manifest says {size}" in message


def test_a_flipped_byte_is_found_by_the_checksum(tmp_path: Path) -> None:
    path = _saved(tmp_path, "directory", policy=torch.nn.Linear(8, 8))
    file = _tree(path) / "components" / "policy" / "state.pt"
    data = bytearray(file.read_bytes())
    data[len(data) // 2] ^= 0xFF
    file.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"state.pt: its checksum differs from the one recorded .*\(damaged\)"):
        Checkpoint(policy=torch.nn.Linear(8, 8)).load(path)


def test_a_flipped_byte_in_an_archive_member_is_named(tmp_path: Path) -> None:
    path = _saved(tmp_path, "archive", policy=torch.nn.Linear(8, 8))
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo("components/policy/state.pt")
    data[info.header_offset + 200] ^= 0xFF  # inside the member's stored bytes
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"ckpt:components/policy/state.pt: (damaged|its checksum differs)"):
        Checkpoint(policy=torch.nn.Linear(8, 8)).load(path)


def test_a_truncated_archive_is_named(tmp_path: Path) -> None:
    path = _saved(tmp_path, "archive", policy=torch.nn.Linear(8, 8))
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(CheckpointError, match=r"ckpt: not a readable zip archive .*truncated, damaged"):
        Checkpoint(policy=torch.nn.Linear(8, 8)).load(path)
    assert not Checkpoint.is_checkpoint(path)


def test_a_truncated_replay_buffer_file_is_named(tmp_path: Path) -> None:
    buffer = ReplayBuffer(storage=LazyTensorStorage(10))
    buffer.extend(torch.arange(6.0))
    path = _saved(tmp_path, "directory", replay_buffer=buffer)
    [data_file] = list((_tree(path) / "components" / "replay_buffer").rglob("0.bin"))
    data_file.write_bytes(data_file.read_bytes()[:8])
    with pytest.raises(CheckpointError, match=r"component 'replay_buffer': .*0.bin: holds 8 bytes, the manifest says 24"):
        Checkpoint(replay_buffer=ReplayBuffer(storage=LazyTensorStorage(10))).load(path)


@pytest.mark.parametrize("format", FORMATS)
def test_a_missing_component_file_is_named(tmp_path: Path, format: str) -> None:
    path = _saved(tmp_path, format, policy=torch.nn.Linear(2, 2))
    files = _files(path)
    del files["components/policy/state.pt"]
    _rewrite(path, files, reseal=False)
    if format == "directory":
        (_tree(path) / "components" / "policy" / "state.pt").unlink()
    with pytest.raises(CheckpointError, match=r"component 'policy': .*components/policy/state.pt: missing"):
        Checkpoint(policy=torch.nn.Linear(2, 2)).load(path)


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda text: text[: len(text) // 2], "manifest.json: not valid JSON"),
        (lambda text: text.replace('"container"', '"kontainer"'), "its content does not match its checksum"),
        (lambda text: "{}", "has no 'crc32' field: not written by a Cadence checkpoint"),
    ],
)
def test_a_damaged_manifest_is_named(tmp_path: Path, edit: Any, expected: str) -> None:
    path = _saved(tmp_path, "directory", a={"x": 1})
    manifest = _tree(path) / "manifest.json"
    manifest.write_text(edit(manifest.read_text()))
    with pytest.raises(CheckpointError, match=expected):
        Checkpoint(a={}).load(path)
    assert not Checkpoint.is_checkpoint(path)


def test_a_checkpoint_of_another_library_or_a_newer_version_is_named(tmp_path: Path) -> None:
    for field, value, expected in (
        ("format", "torchrl.checkpoint", "its format is 'torchrl.checkpoint', expected 'cadence.checkpoint'"),
        ("version", 7, r"format version 7; this Cadence reads version 1 \(written by a newer Cadence\)"),
    ):
        path = _saved(tmp_path, "archive", a={"x": 1})
        files = _files(path)
        manifest = json.loads(files["manifest.json"])
        manifest[field] = value
        files["manifest.json"] = _sealed(manifest)
        _rewrite(path, files, reseal=False)
        with pytest.raises(CheckpointError, match=expected):
            Checkpoint(a={}).load(path)


def test_missing_checkpoints_and_folders_without_one_are_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nothing at that path"):
        Checkpoint(a={}).load(tmp_path / "nowhere")
    with pytest.raises(CheckpointError, match=r"holds no Cadence checkpoint \(neither LATEST nor manifest.json in it\)"):
        Checkpoint(a={}).load(tmp_path)
    path = _saved(tmp_path, "directory", a={"x": 1})
    (path / "LATEST").write_text("checkpoint-0123\n")
    with pytest.raises(CheckpointError, match="names no checkpoint directory"):
        Checkpoint(a={}).load(path)


# ---------------------------------------------------------------------- names and paths
@pytest.mark.parametrize(
    ("component", "file"),
    [("../escape", "value.json"), ("a", "../../../etc/passwd"), ("a", "/etc/passwd"), ("a", ".hidden")],
)
def test_names_in_a_manifest_never_leave_the_checkpoint(tmp_path: Path, component: str, file: str) -> None:
    path = _saved(tmp_path, "archive", a={"x": 1})
    files = _files(path)
    manifest = json.loads(files["manifest.json"])
    record = manifest["components"].pop("a")
    record["files"] = {file: record["files"]["value.json"]}
    manifest["components"][component] = record
    files["manifest.json"] = _sealed(manifest)
    _rewrite(path, files, reseal=False)
    with pytest.raises(CheckpointError, match="must be letters, digits"):
        Checkpoint.manifest(path)


def test_a_symbolic_link_in_a_checkpoint_folder_is_refused(tmp_path: Path) -> None:
    path = _saved(tmp_path, "directory", policy=torch.nn.Linear(2, 2))
    state = _tree(path) / "components" / "policy" / "state.pt"
    elsewhere = tmp_path / "elsewhere.pt"
    os.replace(state, elsewhere)
    state.symlink_to(elsewhere)
    with pytest.raises(CheckpointError, match="state.pt: is a symbolic link"):
        Checkpoint(policy=torch.nn.Linear(2, 2)).load(path)


def test_an_archive_member_larger_than_its_record_is_refused(tmp_path: Path) -> None:
    path = _saved(tmp_path, "archive", a={"x": 1})
    files = _files(path)
    files["components/a/value.json"] = b" " * 10_000_000 + b"{}"
    _rewrite(path, files, reseal=False)
    with pytest.raises(CheckpointError, match=r"value.json: holds 10000002 bytes, the manifest says"):
        Checkpoint(a={}).load(path)

"""Render checkpoints: save_render_checkpoint in its three layouts, read back by
load_checkpoint as one dict; nothing read runs code; infer_state_dict, checkpoint_hash."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from tensordict.nn import TensorDictSequential

from cadence.checkpoint import Checkpoint, CheckpointError
from cadence.data import OneHot
from cadence.modules import MLP, EGreedyModule, QValueActor
from cadence.render import checkpoint_hash, infer_state_dict, load_checkpoint, save_render_checkpoint

LAYOUTS = [None, "archive", "directory"]


class _Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, tuple[Path, str]]:
        return (Path.write_text, (self.marker, "the payload ran"))


def _policy() -> QValueActor:
    torch.manual_seed(0)
    return QValueActor(MLP(in_features=4, out_features=2, num_cells=[8]), spec=OneHot(2), in_keys=["observation"])


def _save(path: Path, model: Any, format: str | None) -> Path | None:
    return save_render_checkpoint(
        path,
        model,
        env_metadata={"env_name": "CartPole-v1", "vecnorm": {"loc": torch.arange(4.0), "scale": torch.ones(4)}},
        frames=1200,
        metrics={"eval/reward": np.float64(87.5), "train/epsilon": 0.1},
        config={"env": {"env_name": "CartPole-v1"}, "optim": {"lr": 2.5e-4}},
        extra={"note": "best so far"},
        format=format,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("format", LAYOUTS)
def test_a_render_checkpoint_reads_back_as_one_dict(tmp_path: Path, format: str | None) -> None:
    policy = _policy()
    path = _save(tmp_path / "policy.pt", policy, format)
    assert path == tmp_path / "policy.pt"
    payload = load_checkpoint(path)
    assert set(payload) == {"model_state_dict", "env_name", "vecnorm", "frames", "metrics", "config", "note"}
    assert payload["env_name"] == "CartPole-v1" and payload["frames"] == 1200 and payload["note"] == "best so far"
    assert payload["metrics"] == {"eval/reward": 87.5, "train/epsilon": 0.1}
    assert payload["config"] == {"env": {"env_name": "CartPole-v1"}, "optim": {"lr": 2.5e-4}}
    assert torch.equal(payload["vecnorm"]["loc"], torch.arange(4.0))  # tensors stay tensors
    weights = infer_state_dict(payload)
    assert weights.keys() == policy.state_dict().keys()
    rebuilt = _policy()
    with torch.no_grad():
        for parameter in rebuilt.parameters():
            parameter.add_(1.0)
    rebuilt.load_state_dict(weights)
    assert all(torch.equal(a, b) for a, b in zip(rebuilt.state_dict().values(), policy.state_dict().values()))


def test_the_one_file_layout_is_plain_data_for_torch_load(tmp_path: Path) -> None:
    path = _save(tmp_path / "policy.pt", _policy(), None)
    payload = torch.load(path, weights_only=True)  # no allow-list needed
    assert payload["metrics"]["eval/reward"] == 87.5 and isinstance(payload["model_state_dict"], dict)
    assert not Checkpoint.is_checkpoint(path)


def test_a_state_dict_and_a_policy_holding_generators_are_saved_as_weights(tmp_path: Path) -> None:
    explore = TensorDictSequential(_policy(), EGreedyModule(OneHot(2)))
    for format in LAYOUTS:
        path = save_render_checkpoint(tmp_path / f"explore-{format}", explore, format=format)
        assert infer_state_dict(load_checkpoint(path)).keys() == explore.state_dict().keys()
    weights = {"w": torch.ones(2)}
    path = save_render_checkpoint(tmp_path / "weights.ckpt", weights, format="archive")
    assert torch.equal(load_checkpoint(path)["model_state_dict"]["w"], torch.ones(2))


def test_no_path_writes_nothing(tmp_path: Path) -> None:
    for path in (None, ""):
        assert _save(path, _policy(), "archive") is None  # type: ignore[arg-type]
        assert _save(path, _policy(), None) is None  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("format", LAYOUTS)
def test_an_entry_that_is_not_data_is_named_and_nothing_written(tmp_path: Path, format: str | None) -> None:
    with pytest.raises(TypeError, match=r"metrics'\]?\['logger'\] is a object, which a checkpoint cannot hold"):
        save_render_checkpoint(tmp_path / "policy.pt", _policy(), metrics={"logger": object()}, format=format)
    assert list(tmp_path.iterdir()) == []


def test_a_payload_in_a_torch_file_does_not_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran.txt"
    path = tmp_path / "legacy.pt"
    torch.save({"model_state_dict": {"w": torch.ones(1)}, "env_name": _Payload(marker)}, path)
    for weights_only in (None, True, False):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pytest.raises(CheckpointError, match=r"legacy.pt: holds more than tensors and plain values \(refused, nothing in it was run"):
                load_checkpoint(path, weights_only=weights_only)
        assert any("weights_only=False is ignored" in str(w.message) for w in caught) == (weights_only is False)
    assert not marker.exists()


def test_a_payload_in_a_render_archive_does_not_run(tmp_path: Path) -> None:
    import io
    import json
    import zipfile
    import zlib

    path = _save(tmp_path / "policy.ckpt", _policy(), "archive")
    marker = tmp_path / "ran.txt"
    with zipfile.ZipFile(path) as archive:
        files = {name: archive.read(name) for name in archive.namelist()}
    buffer = io.BytesIO()
    torch.save({"state": {"w": _Payload(marker)}, "generators": {}}, buffer)
    files["components/policy/state.pt"] = buffer.getvalue()
    manifest = json.loads(files["manifest.json"])
    manifest.pop("crc32")
    entry = manifest["components"]["policy"]["files"]["state.pt"]
    entry.update(bytes=len(buffer.getvalue()), crc32=zlib.crc32(buffer.getvalue()))
    manifest["crc32"] = zlib.crc32(json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode())
    files["manifest.json"] = json.dumps(manifest).encode()
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    with pytest.raises(CheckpointError, match=r"component 'policy': .*policy.ckpt:components/policy/state.pt: holds more than tensors"):
        load_checkpoint(path)
    assert not marker.exists()


def test_bad_paths_are_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nothing at that path"):
        load_checkpoint(tmp_path / "missing.pt")
    with pytest.raises(ValueError, match="only local checkpoint paths"):
        load_checkpoint("https://example.com/policy.pt")
    with pytest.raises(CheckpointError, match="a folder that holds no Cadence checkpoint"):
        load_checkpoint(tmp_path)
    (tmp_path / "notes.txt").write_text("not a checkpoint")
    with pytest.raises(CheckpointError, match=r"notes.txt: not a torch.save file of tensors and plain values: damaged, or of another kind \(refused, nothing in it was run; UnpicklingError: Unsupported operand"):
        load_checkpoint(tmp_path / "notes.txt")


def test_infer_state_dict_finds_the_weights() -> None:
    weights = {"w": torch.ones(1)}
    assert infer_state_dict({"model_state_dict": weights}) is weights
    assert infer_state_dict({"policy": weights, "frames": 1}) is weights
    assert infer_state_dict({"state_dict": weights}) is weights
    assert infer_state_dict(weights) is weights
    assert infer_state_dict({"mine": weights}, key="mine") is weights
    with pytest.raises(KeyError, match="no entry 'other'"):
        infer_state_dict({"mine": weights}, key="other")
    with pytest.raises(TypeError, match="no state dict in the checkpoint's payload"):
        infer_state_dict({"model_state_dict": {"w": 1.0}})


def test_checkpoint_hash_follows_the_bytes(tmp_path: Path) -> None:
    first = _save(tmp_path / "a", _policy(), "directory")
    digest = checkpoint_hash(first)
    assert checkpoint_hash(first) == digest and len(digest) == 64
    file = _save(tmp_path / "b.pt", _policy(), None)
    before = checkpoint_hash(file)
    save_render_checkpoint(file, _policy(), frames=1)
    assert checkpoint_hash(file) != before
    with pytest.raises(FileNotFoundError):
        checkpoint_hash(tmp_path / "missing")

"""Checkpoint: every component kind round-trips, a resumed DQN run continues exactly as the
unbroken one, the reference dqn script's save/resume calls, subsets, strictness, formats."""

from __future__ import annotations

import random
import warnings
import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import gymnasium
import numpy as np
import pytest
import torch
from tensordict import TensorDict

from cadence.checkpoint import Checkpoint, CheckpointError, CheckpointLoadResult, GlobalRNGState
from cadence.collectors import SyncDataCollector
from cadence.data.replay_buffers import LazyTensorStorage, ListStorage, ReplayBuffer, TensorDictReplayBuffer
from cadence.envs import GymEnv
from cadence.modules import EGreedyModule
from cadence.objectives import HardUpdate, SoftUpdate
from cadence.render import save_render_checkpoint
from tests.checkpoint._dqn import (
    DQNRun,
    assert_same_records,
    make_cartpole_env,
    make_dqn_run,
    make_drift_env,
    train,
)

FORMATS = ["archive", "directory"]


def _collector_state(collector: Any) -> dict[str, Any]:
    """A collector's state but where its env stands: a restored collector starts new
    episodes (as the reference's does), so its next input is not restored."""
    state = collector.state_dict()
    state.pop("shuttle")
    return state


def _equal_states(a: Any, b: Any) -> bool:
    """Nested states (dicts, lists, tensors, numbers) hold the same values."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, TensorDict) or isinstance(b, TensorDict):
        return isinstance(a, TensorDict) and isinstance(b, TensorDict) and (a == b).all()
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal_states(a[key], b[key]) for key in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_equal_states(x, y) for x, y in zip(a, b))
    return a == b


# ---------------------------------------------------------------------- resuming a DQN run
@pytest.mark.parametrize("format", FORMATS)
def test_a_resumed_dqn_run_continues_exactly_as_the_unbroken_one(tmp_path: Path, format: str) -> None:
    unbroken = make_dqn_run(make_drift_env, seed=0, format=format, reset_at_each_iter=True)
    train(unbroken, 3)
    path = unbroken.checkpoint.save(tmp_path / "dqn.ckpt")
    expected = train(unbroken, 4)

    resumed = make_dqn_run(make_drift_env, seed=1, format=format, reset_at_each_iter=True)  # differs everywhere
    result = resumed.checkpoint.load(path)
    assert result.loaded == set(resumed.checkpoint.components) and not result.missing and not result.incompatible
    assert resumed.trainer_state == {"collected_frames": 120}
    assert_same_records(expected, train(resumed, 4))


def test_without_the_generators_a_resumed_run_would_differ(tmp_path: Path) -> None:
    # the test above can fail: a run resumed without its collector (the env's rng and the
    # exploration generator it holds) collects other batches
    unbroken = make_dqn_run(make_drift_env, seed=0, reset_at_each_iter=True)
    train(unbroken, 3)
    path = unbroken.checkpoint.save(tmp_path / "dqn.ckpt")
    expected = train(unbroken, 2)
    resumed = make_dqn_run(make_drift_env, seed=1, reset_at_each_iter=True)
    resumed.checkpoint.load(path, components=set(resumed.checkpoint.components) - {"collector", "exploration"})
    with pytest.raises(AssertionError, match="batches differ"):
        assert_same_records(expected, train(resumed, 2))


# The reference script's checkpoint calls (sota-implementations/dqn/dqn_cartpole.py), written
# out here as the script makes them, with a cfg that answers the same attribute reads.
def _save_checkpoint(
    path: str | Path | None,
    *,
    cfg: Any,
    model: torch.nn.Module,
    collected_frames: int,
    metrics: dict,
    checkpoint: Checkpoint | None = None,
    format: str = "archive",
) -> Path | None:
    if path in (None, ""):
        return None
    if checkpoint is None:
        return save_render_checkpoint(
            path,
            model,
            env_metadata={"env_name": cfg.env.env_name},
            frames=collected_frames,
            metrics=metrics,
            config=cfg.as_dict,
            format=format,
        )
    checkpoint.components["trainer_state"]["collected_frames"] = collected_frames
    checkpoint.components["metrics"].clear()
    checkpoint.components["metrics"].update(metrics)
    components = None
    if not cfg.checkpoint.get("include_replay_buffer", True):
        components = set(checkpoint.components).difference({"replay_buffer"})
    return checkpoint.save(path, components=components)


def _resume_checkpoint(
    checkpoint: Checkpoint, path: str | Path, map_location: str | torch.device, *, include_replay_buffer: bool = True
) -> CheckpointLoadResult:
    components = set(checkpoint.components).difference({"config"})
    if not include_replay_buffer:
        components.discard("replay_buffer")
    return checkpoint.load(
        path,
        components=components,
        map_location=map_location,
        tensor_load_kwargs={"weights_only": True, "mmap": True},
    )


def _cfg(include_replay_buffer: bool) -> SimpleNamespace:
    settings = {"include_replay_buffer": include_replay_buffer}
    return SimpleNamespace(
        env=SimpleNamespace(env_name="CartPole-v1"),
        checkpoint=SimpleNamespace(get=lambda key, default=None: settings.get(key, default)),
        as_dict={"env": {"env_name": "CartPole-v1"}, "checkpoint": settings},
    )


def _next_updates(run: DQNRun, count: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The next samples and losses of ``count`` updates (no collection: CartPole's physics
    are not in the checkpoint, the learner's whole state is)."""
    out = []
    for _ in range(count):
        sample = run.buffer.sample()
        loss = run.loss(sample)["loss"]
        run.optimizer.zero_grad()
        loss.backward()
        run.optimizer.step()
        run.updater.step()
        out.append((sample["index"].clone(), loss.detach().clone()))
    return out


@pytest.mark.parametrize("format", FORMATS)
@pytest.mark.parametrize("include_replay_buffer", [True, False])
def test_the_dqn_scripts_save_and_resume_calls_on_cartpole(
    tmp_path: Path, format: str, include_replay_buffer: bool
) -> None:
    cfg = _cfg(include_replay_buffer)
    first = make_dqn_run(make_cartpole_env, seed=0, format=format)
    train(first, 3)
    frames = first.trainer_state["collected_frames"]
    path = _save_checkpoint(
        tmp_path / "ckpt" / "dqn.ckpt", cfg=cfg, model=first.model, collected_frames=frames,
        metrics={"train/q_loss": 0.25, "train/epsilon": float(first.greedy.eps)}, checkpoint=first.checkpoint,
    )
    assert path == tmp_path / "ckpt" / "dqn.ckpt"
    assert (path.is_file() and zipfile.is_zipfile(path)) if format == "archive" else path.is_dir()
    assert ("replay_buffer" in Checkpoint.manifest(path)["components"]) == include_replay_buffer

    second = make_dqn_run(make_cartpole_env, seed=1, format=format)
    result = _resume_checkpoint(second.checkpoint, path, "cpu", include_replay_buffer=include_replay_buffer)
    assert "config" not in result.loaded and second.config["seed"] == 1  # the new run keeps its config
    assert second.trainer_state["collected_frames"] == frames
    assert second.metrics == {"train/q_loss": 0.25, "train/epsilon": float(first.greedy.eps)}
    assert _equal_states(second.loss.state_dict(), first.loss.state_dict())
    assert _equal_states(second.optimizer.state_dict(), first.optimizer.state_dict())
    assert torch.equal(second.greedy.eps, first.greedy.eps)
    assert second.updater.counter == first.updater.counter
    assert _equal_states(_collector_state(second.collector), _collector_state(first.collector))
    if include_replay_buffer:
        assert len(second.buffer) == len(first.buffer) == frames
        assert (second.buffer[torch.arange(frames)] == first.buffer[torch.arange(frames)]).all()
        for (index_a, loss_a), (index_b, loss_b) in zip(_next_updates(first, 3), _next_updates(second, 3)):
            assert torch.equal(index_a, index_b) and torch.equal(loss_a, loss_b)
    else:
        assert len(second.buffer) == 0


def test_a_cartpole_run_resumed_by_a_new_collector_goes_on(tmp_path: Path) -> None:
    first = make_dqn_run(make_cartpole_env, seed=0)
    train(first, 2)
    path = first.checkpoint.save(tmp_path / "dqn.ckpt")
    second = make_dqn_run(make_cartpole_env, seed=1)
    _resume_checkpoint(second.checkpoint, path, "cpu")
    train(second, 1)
    assert second.trainer_state["collected_frames"] == first.trainer_state["collected_frames"] + 40


def test_the_dqn_scripts_calls_with_checkpointing_off_write_nothing(tmp_path: Path) -> None:
    run = make_dqn_run(make_drift_env, seed=0)
    for path in (None, ""):
        assert _save_checkpoint(path, cfg=_cfg(True), model=run.model, collected_frames=0, metrics={},
                                checkpoint=run.checkpoint) is None
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------- every component kind
def _filled_buffer(values: torch.Tensor) -> TensorDictReplayBuffer:
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(10), batch_size=2)
    buffer.extend(TensorDict({"x": values}, [len(values)]))
    return buffer


def _kinds(seed: int) -> dict[str, Any]:
    """One component of each kind, filled from ``seed``."""
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    optimizer = torch.optim.Adam(net.parameters(), lr=0.1)
    net(torch.randn(5, 3)).sum().backward()
    optimizer.step()
    greedy = EGreedyModule(GymEnv("CartPole-v1").action_spec, annealing_num_steps=10,
                           generator=torch.Generator().manual_seed(seed))
    greedy.step(seed + 1)
    collector = SyncDataCollector(GymEnv("CartPole-v1"), frames_per_batch=5, total_frames=-1)
    for _ in range(seed + 1):
        collector.next()
    return {
        "module": net,
        "optimizer": optimizer,
        "replay_buffer": _filled_buffer(torch.arange(seed + 2.0)),
        "list_buffer": ReplayBuffer(storage=ListStorage(5)),
        "collector": collector,
        "exploration": greedy,
        "generator": torch.Generator().manual_seed(seed),
        "rng": GlobalRNGState(),
        "json_dict": {"frames": seed, "nested": {"lr": 0.5 * seed, "sizes": [seed, 2]}, "name": f"run{seed}"},
        "tensor_dict": {
            "vecnorm": {"loc": torch.full((3,), float(seed)), "count": torch.tensor(seed)},
            1: "int key",
            "scale": np.float64(0.5 * seed),  # a numpy scalar that is a float too: read back as one
            "steps": np.int64(seed),
        },
        "json_list": [seed, "a", None],
        "number": seed,
    }


def test_every_component_kind_round_trips(tmp_path: Path) -> None:
    source, target = _kinds(1), _kinds(2)
    source["list_buffer"].extend(["a", torch.ones(2), {"k": 3}])
    random.seed(5)
    np.random.seed(5)
    path = Checkpoint(**source).save(tmp_path / "ckpt")
    expected_draws = (torch.rand(2), np.random.rand(2), random.random(), torch.rand(2, generator=source["generator"]))

    result = Checkpoint(**target).load(path)
    assert result.loaded == set(source) and not result.incompatible
    draws = (torch.rand(2), np.random.rand(2), random.random(), torch.rand(2, generator=target["generator"]))
    assert torch.equal(draws[0], expected_draws[0]) and torch.equal(draws[3], expected_draws[3])
    assert draws[1].tolist() == expected_draws[1].tolist() and draws[2] == expected_draws[2]
    assert _equal_states(target["module"].state_dict(), source["module"].state_dict())
    assert _equal_states(target["optimizer"].state_dict(), source["optimizer"].state_dict())
    assert target["replay_buffer"][torch.arange(3)]["x"].tolist() == [0.0, 1.0, 2.0]
    assert len(target["list_buffer"]) == 3 and target["list_buffer"][2] == {"k": 3}
    assert _equal_states(_collector_state(target["collector"]), _collector_state(source["collector"]))
    assert torch.equal(target["exploration"].eps, source["exploration"].eps)
    assert torch.equal(target["exploration"].generator.get_state(), source["exploration"].generator.get_state())
    assert target["json_dict"] == source["json_dict"]  # in place
    assert _equal_states(target["tensor_dict"], source["tensor_dict"])  # tensors and int keys kept
    assert target["json_list"] == source["json_list"]
    assert result.values["number"] == 1 and target["number"] == 2  # an int cannot be updated in place
    kinds = {name: record["kind"] for name, record in Checkpoint.manifest(path)["components"].items()}
    assert kinds == {
        "module": "state_dict", "optimizer": "state_dict", "replay_buffer": "dumps", "list_buffer": "dumps",
        "collector": "state_dict", "exploration": "state_dict", "generator": "generator", "rng": "state_dict",
        "json_dict": "json", "tensor_dict": "data", "json_list": "json", "number": "json",
    }


@pytest.mark.parametrize("updater_kind", ["hard", "soft"])
def test_target_updaters_round_trip(tmp_path: Path, updater_kind: str) -> None:
    def build() -> tuple[Any, Any]:
        run = make_dqn_run(make_drift_env, seed=0)
        if updater_kind == "hard":
            return run.loss, HardUpdate(run.loss, value_network_update_interval=5)
        return run.loss, SoftUpdate(run.loss, tau=0.1)

    _, source = build()
    source.init_()
    for _ in range(3):
        source.step()
    path = Checkpoint(target_updater=source).save(tmp_path / "ckpt")
    _, target = build()
    Checkpoint(target_updater=target).load(path)
    assert target.state_dict() == source.state_dict()
    assert target.initialized
    if updater_kind == "hard":
        assert target.counter == 3


# ---------------------------------------------------------------------- subsets
@pytest.mark.parametrize("format", FORMATS)
def test_a_subset_is_saved_and_a_subset_loaded(tmp_path: Path, format: str) -> None:
    source = {"a": torch.nn.Linear(2, 2), "b": {"frames": 7}, "c": [1, 2]}
    checkpoint = Checkpoint(format=format, **source)
    path = checkpoint.save(tmp_path / "ckpt", components={"a", "b"})
    assert sorted(Checkpoint.manifest(path)["components"]) == ["a", "b"]

    target = {"a": torch.nn.Linear(2, 2), "b": {"frames": 0}, "c": [9]}
    result = Checkpoint(format=format, **target).load(path, components={"b"})
    assert result.loaded == {"b"} and result.unrequested == {"a"} and target["b"] == {"frames": 7}
    assert not torch.equal(target["a"].weight, source["a"].weight)  # not asked for: untouched


def test_save_components_is_the_default_selection(tmp_path: Path) -> None:
    checkpoint = Checkpoint(save_components={"small"}, small={"x": 1}, large=[0] * 10)
    path = checkpoint.save(tmp_path / "ckpt")
    assert list(Checkpoint.manifest(path)["components"]) == ["small"]
    path = checkpoint.save(tmp_path / "ckpt", components={"small", "large"})
    assert sorted(Checkpoint.manifest(path)["components"]) == ["large", "small"]


def test_unknown_component_names_are_named(tmp_path: Path) -> None:
    checkpoint = Checkpoint(a={"x": 1})
    with pytest.raises(ValueError, match=r"\['b'\] are not registered components \(registered: \['a'\]\)"):
        checkpoint.save(tmp_path / "ckpt", components={"a", "b"})
    path = checkpoint.save(tmp_path / "ckpt")
    with pytest.raises(ValueError, match=r"\['nope'\] are not registered"):
        checkpoint.load(path, components=["nope"])
    with pytest.raises(TypeError, match="collection of component names, got the string 'a'"):
        checkpoint.load(path, components="a")


# ---------------------------------------------------------------------- strictness
def _saved_without_b(tmp_path: Path) -> Path:
    return Checkpoint(a={"x": 1}).save(tmp_path / "ckpt")


def test_strict_error_raises_on_a_missing_component_before_loading_anything(tmp_path: Path) -> None:
    path = _saved_without_b(tmp_path)
    a, b = {"x": 0}, {"y": 0}
    with pytest.raises(CheckpointError, match=r"the checkpoint holds no \['b'\]") as raised:
        Checkpoint(a=a, b=b).load(path)
    assert raised.value.result.missing == {"b"} and a == {"x": 0}


def test_strict_warn_warns_and_loads_the_rest(tmp_path: Path) -> None:
    path = _saved_without_b(tmp_path)
    a, b = {"x": 0}, {"y": 0}
    with pytest.warns(UserWarning, match=r"holds no \['b'\].*skipped"):
        result = Checkpoint(strict="warn", a=a, b=b).load(path)
    assert result.loaded == {"a"} and result.missing == {"b"} and a == {"x": 1} and b == {"y": 0}


def test_strict_ignore_is_silent_and_reports(tmp_path: Path) -> None:
    path = _saved_without_b(tmp_path)
    a, b = {"x": 0}, {"y": 0}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = Checkpoint(a=a, b=b).load(path, strict="ignore")  # the load's own strictness wins
    assert result.loaded == {"a"} and result.missing == {"b"} and a == {"x": 1}


def test_a_component_of_another_kind_is_incompatible(tmp_path: Path) -> None:
    path = Checkpoint(policy={"weights": [1, 2]}).save(tmp_path / "ckpt")
    with pytest.raises(CheckpointError, match=r"component 'policy': .*written from a value .*this component is a Linear"):
        Checkpoint(policy=torch.nn.Linear(1, 1)).load(path)
    result = Checkpoint(policy=torch.nn.Linear(1, 1)).load(path, strict="ignore")
    assert "policy" in result.incompatible and not result.loaded


def test_a_value_of_another_shape_does_not_replace_a_dict(tmp_path: Path) -> None:
    path = Checkpoint(state=[1, 2]).save(tmp_path / "ckpt")
    state = {"frames": 3}
    with pytest.raises(CheckpointError, match=r"value.json: holds a list, this component is a dict"):
        Checkpoint(state=state).load(path)
    assert state == {"frames": 3}


def test_a_module_of_other_shapes_is_named_and_nothing_changes(tmp_path: Path) -> None:
    path = Checkpoint(policy=torch.nn.Linear(4, 2), state={"frames": 10}).save(tmp_path / "ckpt")
    policy, state = torch.nn.Linear(3, 2), {"frames": 0}
    before = policy.weight.clone()
    with pytest.raises(CheckpointError) as raised:
        Checkpoint(policy=policy, state=state).load(path)
    message = str(raised.value)
    assert "component 'policy'" in message and "components/policy/state.pt" in message
    assert "'weight' has shape [2, 4] in the checkpoint, [2, 3] in this module" in message
    assert torch.equal(policy.weight, before) and state == {"frames": 0}  # checked before anything loads


def test_a_module_with_other_entries_is_named(tmp_path: Path) -> None:
    path = Checkpoint(policy=torch.nn.Linear(2, 2)).save(tmp_path / "ckpt")
    with pytest.raises(CheckpointError, match=r"it lacks '0.weight', '0.bias'; it holds entries this module has not: 'weight', 'bias'"):
        Checkpoint(policy=torch.nn.Sequential(torch.nn.Linear(2, 2))).load(path)


def test_an_optimizer_of_other_parameter_groups_is_named(tmp_path: Path) -> None:
    net = torch.nn.Linear(2, 2)
    path = Checkpoint(optimizer=torch.optim.Adam(net.parameters())).save(tmp_path / "ckpt")
    other = torch.optim.Adam([net.weight])
    with pytest.raises(CheckpointError, match=r"parameter groups hold \[2\] parameters, this optimizer's \[1\]"):
        Checkpoint(optimizer=other).load(path)


def test_a_component_whose_generators_differ_is_named(tmp_path: Path) -> None:
    spec = GymEnv("CartPole-v1").action_spec
    path = Checkpoint(policy=torch.nn.Sequential(EGreedyModule(spec))).save(tmp_path / "ckpt")
    with pytest.raises(CheckpointError, match=r"holds the generators \['0.generator'\] of this component, this Sequential holds \[\]"):
        Checkpoint(policy=torch.nn.Sequential(torch.nn.Identity())).load(path)


# ---------------------------------------------------------------------- formats and paths
def test_an_archive_is_one_zip_file_and_a_directory_a_folder(tmp_path: Path) -> None:
    archive = Checkpoint(format="archive", a={"x": 1}).save(tmp_path / "a.ckpt")
    assert archive.is_file() and zipfile.is_zipfile(archive)
    assert sorted(zipfile.ZipFile(archive).namelist()) == ["components/a/value.json", "manifest.json"]
    folder = Checkpoint(a={"x": 1}).save(tmp_path / "b")
    assert sorted(entry.name.split("-")[0] for entry in folder.iterdir()) == ["LATEST", "checkpoint"]
    deflated = Checkpoint(format="archive", archive_compression="deflate", a={"x": [0] * 1000}).save(tmp_path / "c")
    assert zipfile.ZipFile(deflated).getinfo("components/a/value.json").compress_type == zipfile.ZIP_DEFLATED


@pytest.mark.parametrize("format", FORMATS)
def test_saving_again_replaces_the_checkpoint(tmp_path: Path, format: str) -> None:
    state = {"frames": 1}
    checkpoint = Checkpoint(format=format, state=state)
    path = checkpoint.save(tmp_path / "ckpt")
    state["frames"] = 2
    assert checkpoint.save(tmp_path / "ckpt") == path
    state["frames"] = 0
    checkpoint.load(path)
    assert state == {"frames": 2}
    if format == "directory":  # the previous tree is gone once the new one is published
        assert len([entry for entry in path.iterdir() if entry.name.startswith("checkpoint-")]) == 1
    assert [entry.name for entry in tmp_path.iterdir()] == ["ckpt"]


def test_the_save_format_can_be_overridden(tmp_path: Path) -> None:
    checkpoint = Checkpoint(format="directory", a={"x": 1})
    assert checkpoint.save(tmp_path / "one.ckpt", format="archive").is_file()
    assert Checkpoint.manifest(tmp_path / "one.ckpt")["container"] == "archive"


def test_a_path_of_the_other_format_is_not_replaced(tmp_path: Path) -> None:
    Checkpoint(format="archive", a={"x": 1}).save(tmp_path / "ckpt")
    with pytest.raises(CheckpointError, match=r"ckpt: is a file \(an archive checkpoint\?\)"):
        Checkpoint(format="directory", a={"x": 1}).save(tmp_path / "ckpt")
    Checkpoint(format="directory", a={"x": 1}).save(tmp_path / "folder")
    with pytest.raises(CheckpointError, match=r"folder: is a folder"):
        Checkpoint(format="archive", a={"x": 1}).save(tmp_path / "folder")


@pytest.mark.parametrize("format", FORMATS)
def test_a_save_that_fails_leaves_the_previous_checkpoint_and_no_leftovers(tmp_path: Path, format: str) -> None:
    state: dict[str, Any] = {"frames": 1}
    checkpoint = Checkpoint(format=format, state=state)
    path = checkpoint.save(tmp_path / "ckpt")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    state["bad"] = object()  # neither JSON nor data: refused while writing aside
    with pytest.raises(TypeError, match=r"component 'state'\['bad'\] is a object, which a checkpoint cannot hold"):
        checkpoint.save(path)
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
    del state["bad"]
    state["frames"] = 0
    checkpoint.load(path)
    assert state == {"frames": 1}


def test_a_file_checkpoint_path_is_expanded_and_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    path = Checkpoint(format="archive", a={"x": 1}).save("~/deep/er/run.ckpt")
    assert path == tmp_path / "deep" / "er" / "run.ckpt" and path.is_file()
    with pytest.raises(ValueError, match="only local checkpoint paths"):
        Checkpoint(a={"x": 1}).save("s3://bucket/run.ckpt")


# ---------------------------------------------------------------------- arguments
def test_bad_arguments_are_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="format must be 'directory' or 'archive', got 'zip'"):
        Checkpoint(format="zip")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="strict must be 'error', 'warn' or 'ignore', got True"):
        Checkpoint(strict=True)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="a component name must be letters"):
        Checkpoint().register("../escape", {})
    with pytest.raises(TypeError, match="component 'thing': a checkpoint component needs state_dict"):
        Checkpoint(thing=object())
    path = Checkpoint(a={"x": 1}).save(tmp_path / "ckpt")
    checkpoint = Checkpoint(a={"x": 0})
    with pytest.raises(TypeError, match=r"tensor_load_kwargs accepts \['weights_only', 'mmap'\], got \['pickle_module'\]"):
        checkpoint.load(path, tensor_load_kwargs={"pickle_module": None})
    with pytest.raises(TypeError, match="map_location must be None, a device"):
        checkpoint.load(path, map_location=lambda storage, location: storage)
    with pytest.warns(UserWarning, match=r"\{'weights_only': False\} is ignored"):
        checkpoint.load(path, tensor_load_kwargs={"weights_only": False})
    assert checkpoint.components["a"] == {"x": 1}


def test_map_location_maps_saved_devices(tmp_path: Path) -> None:
    path = Checkpoint(data={"w": torch.ones(2)}).save(tmp_path / "ckpt")
    for map_location in ("cpu", torch.device("cpu"), {"cuda:0": "cpu"}, None):
        data: dict[str, Any] = {}
        Checkpoint(data=data).load(path, map_location=map_location)
        assert data["w"].device == torch.device("cpu") and data["w"].tolist() == [1.0, 1.0]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_map_location_moves_accelerator_tensors_and_keeps_cpu_ones(tmp_path: Path) -> None:
    path = Checkpoint(data={"gpu": torch.ones(2, device="cuda"), "cpu": torch.zeros(2)}).save(tmp_path / "ckpt")
    data: dict[str, Any] = {}
    Checkpoint(data=data).load(path)
    assert data["gpu"].is_cuda and not data["cpu"].is_cuda
    Checkpoint(data=data).load(path, map_location="cpu")
    assert not data["gpu"].is_cuda and not data["cpu"].is_cuda
    Checkpoint(data=data).load(path, map_location="cuda")
    assert data["gpu"].is_cuda and not data["cpu"].is_cuda  # CPU state stays with CPU objects


def test_components_is_a_live_read_only_view() -> None:
    state = {"frames": 0}
    checkpoint = Checkpoint(trainer_state=state)
    assert checkpoint.components["trainer_state"] is state and "trainer_state" in checkpoint
    with pytest.raises(TypeError):
        checkpoint.components["other"] = {}  # type: ignore[index]
    checkpoint.register("other", [1])
    assert set(checkpoint.components) == {"trainer_state", "other"}


def test_the_manifest_records_versions_and_metadata(tmp_path: Path) -> None:
    path = Checkpoint(a={"x": 1}).save(tmp_path / "ckpt", metadata={"step": np.int64(3)})
    manifest = Checkpoint.manifest(path)
    assert manifest["metadata"] == {"step": 3} and set(manifest["versions"]) == {"cadence", "torch", "tensordict"}
    result = Checkpoint(a={}).load(path)
    assert result.comparison["version_skew"] is False and result.manifest["components"]["a"]["kind"] == "json"
    with pytest.raises(TypeError, match=r"metadata\['f'\] is a Tensor, which JSON cannot hold"):
        Checkpoint(a={}).save(tmp_path / "other", metadata={"f": torch.ones(1)})
    assert Checkpoint.is_checkpoint(path) and not Checkpoint.is_checkpoint(tmp_path / "nothing")

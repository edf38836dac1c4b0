"""DMControlEnv / DMControlWrapper: the DeepMind Control Suite as Cadence envs."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

pytest.importorskip(
    "dm_control",
    reason='dm_control is not installed (pip install "cadence[dm_control]"); the dm_control wrappers are untested',
)

from cadence.data import Bounded, Unbounded  # noqa: E402
from cadence.envs import DMControlEnv, DMControlWrapper, TransformedEnv, check_env_specs  # noqa: E402
from cadence.envs.libs.dm_control import _import_dm_control  # noqa: E402
from cadence.envs.transforms import CatTensors, Compose, DoubleToFloat  # noqa: E402

suite = _import_dm_control().suite  # through Cadence, which picks a headless GL backend first


def _renders() -> str | None:
    """None if physics.render works here, else why not."""
    try:
        env = suite.load("cartpole", "balance")
        env.reset()
        env.physics.render(16, 16)
    except Exception as err:  # noqa: BLE001 - any GL failure means no renderer
        return f"no OpenGL backend renders here (MUJOCO_GL={__import__('os').environ.get('MUJOCO_GL')!r}): {err!r}"
    return None


NO_RENDERER = _renders()
needs_renderer = pytest.mark.skipif(NO_RENDERER is not None, reason=str(NO_RENDERER))


def fixed_actions(n: int, dim: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(n, dim, generator=generator, dtype=torch.float64) * 2 - 1


def assert_same(a, b) -> None:
    assert set(a.keys(True, True)) == set(b.keys(True, True))
    for key in a.keys(True, True):
        torch.testing.assert_close(a.get(key), b.get(key), rtol=0, atol=0, msg=lambda m: f"{key}: {m}")


# ---------------------------------------------------------------- construction, specs
def test_exported_and_lazy() -> None:
    import cadence.envs
    from cadence.envs.libs import dm_control as module

    assert cadence.envs.DMControlEnv is module.DMControlEnv
    assert DMControlEnv.lib is sys.modules["dm_control"] is DMControlEnv("cheetah", "run").lib


def test_importing_cadence_does_not_import_dm_control() -> None:
    code = (
        "import sys, cadence, cadence.envs; from cadence.envs import DMControlEnv; "
        "assert not {'dm_control', 'mujoco'} & set(sys.modules), sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_cheetah_specs() -> None:
    env = DMControlEnv("cheetah", "run")
    check_env_specs(env)
    obs = env.observation_spec
    assert sorted(obs.keys()) == ["position", "velocity"]
    assert obs["position"].shape == (8,) and obs["velocity"].shape == (9,)
    assert obs["position"].dtype == torch.float64
    assert isinstance(obs["position"], Unbounded)
    action = env.action_spec
    assert isinstance(action, Bounded) and action.shape == (6,) and action.dtype == torch.float64
    assert torch.equal(action.space.low, -torch.ones(6, dtype=torch.float64))
    assert torch.equal(action.space.high, torch.ones(6, dtype=torch.float64))
    assert env.reward_spec.shape == (1,) and env.reward_spec.dtype == torch.float64
    for key in ("done", "terminated", "truncated"):
        assert env.full_done_spec[key].shape == (1,) and env.full_done_spec[key].dtype == torch.bool
    assert env.batch_size == torch.Size([])


def test_scalar_observation_gets_shape_one() -> None:
    env = DMControlEnv("walker", "walk")
    assert env.observation_spec["height"].shape == (1,)
    check_env_specs(env)


def test_wrapper_of_a_built_env() -> None:
    env = DMControlWrapper(suite.load("cartpole", "swingup"))
    assert env.observation_spec["position"].shape == (3,)
    assert env.physics is env._env.physics  # attributes of the dm_control env are reachable
    check_env_specs(env)


def test_rollout_shapes() -> None:
    env = DMControlEnv("cheetah", "run")
    data = env.rollout(20)
    assert data.batch_size == (20,)
    assert data["position"].shape == (20, 8)
    assert data["next", "velocity"].shape == (20, 9)
    assert data["action"].shape == (20, 6)
    assert data["next", "reward"].shape == (20, 1) and data["next", "reward"].dtype == torch.float64
    assert not data["next", "done"].any()


def test_available_envs() -> None:
    available = dict(DMControlEnv.available_envs)
    assert "run" in available["cheetah"] and "balance" in available["cartpole"]
    assert DMControlWrapper.available_envs == DMControlEnv.available_envs


# ---------------------------------------------------------------- episode ends
def test_time_limit_truncates() -> None:
    env = DMControlEnv("cheetah", "run", task_kwargs={"time_limit": 0.1})  # 10 steps of 0.01 s
    check_env_specs(env)
    data = env.rollout(50)
    assert data.batch_size == (10,)
    assert data["next", "truncated"][-1].item() and not data["next", "terminated"][-1].item()
    assert data["next", "done"][-1].item() and not data["next", "done"][:-1].any()


def test_termination_terminates() -> None:
    env = DMControlEnv("cartpole", "balance")
    steps = {"n": 0}

    def terminate_after_five(physics):
        steps["n"] += 1
        return 0.0 if steps["n"] % 5 == 0 else None

    env._env.task.get_termination = terminate_after_five
    check_env_specs(env)
    steps["n"] = 0
    data = env.rollout(50)
    assert data.batch_size == (5,)
    assert data["next", "terminated"][-1].item() and not data["next", "truncated"][-1].item()
    assert data["next", "done"][-1].item()


def test_reset_after_episode_end_starts_a_new_episode() -> None:
    env = DMControlEnv("cheetah", "run", task_kwargs={"time_limit": 0.05})
    data = env.rollout(12, break_when_any_done=False)
    done = data["next", "done"].squeeze(-1)
    assert done.nonzero().squeeze(-1).tolist() == [4, 9]


# ---------------------------------------------------------------- frame skip
def test_frame_skip_sums_rewards() -> None:
    actions = fixed_actions(10, 6)
    skipped = DMControlEnv("cheetah", "run", frame_skip=3, seed=7)
    plain = DMControlEnv("cheetah", "run", seed=7)
    td_skip, td_plain = skipped.reset(), plain.reset()
    assert_same(td_skip, td_plain)
    for action in actions:
        td_skip = skipped.step(td_skip.set("action", action))["next"].clone()
        total = torch.zeros(1, dtype=torch.float64)
        for _ in range(3):
            td_plain = plain.step(td_plain.set("action", action))["next"].clone()
            total += td_plain["reward"]
        torch.testing.assert_close(td_skip["reward"], total)
        torch.testing.assert_close(td_skip["position"], td_plain["position"], rtol=0, atol=0)


def test_frame_skip_stops_at_the_episode_end() -> None:
    env = DMControlEnv("cheetah", "run", frame_skip=3, task_kwargs={"time_limit": 0.1})
    data = env.rollout(10)
    assert data.batch_size == (4,)  # 3 + 3 + 3 + 1 steps of dm_control
    assert data["next", "truncated"][-1].item()


# ---------------------------------------------------------------- seeding
def test_same_seed_same_rollout() -> None:
    actions = fixed_actions(30, 6)
    rollouts = []
    for _ in range(2):
        env = DMControlEnv("cheetah", "run")
        env.set_seed(123)
        td = env.reset()
        steps = [td.clone()]
        for action in actions:
            td = env.step(td.set("action", action))["next"].clone()
            steps.append(td)
        rollouts.append(steps)
    for a, b in zip(*rollouts):
        assert_same(a, b)


def test_seed_argument_and_different_seeds() -> None:
    first = DMControlEnv("cheetah", "run", seed=1).reset()
    again = DMControlEnv("cheetah", "run", seed=1).reset()
    other = DMControlEnv("cheetah", "run", seed=2).reset()
    assert_same(first, again)
    assert not torch.equal(first["position"], other["position"])


def test_set_seed_returns_the_next_seed() -> None:
    env = DMControlEnv("cartpole", "balance")
    assert env.set_seed(3) == DMControlEnv("cartpole", "balance").set_seed(3)
    env.set_seed(2**40 + 1)  # seeds beyond numpy's 32 bits are folded in
    env.reset()


# ---------------------------------------------------------------- the tutorial's pipeline
def test_tutorial_pipeline_observation_vector() -> None:
    env = DMControlEnv("cheetah", "run", device="cpu", from_pixels=False, pixels_only=False, frame_skip=2)
    env = TransformedEnv(env, Compose(DoubleToFloat()))
    env.append_transform(CatTensors(in_keys=list(env.observation_spec.keys()), out_key="observation_vector"))
    spec = env.observation_spec["observation_vector"]
    assert spec.shape == (17,) and spec.dtype == torch.float32
    data = env.rollout(5)
    assert data["observation_vector"].shape == (5, 17)
    assert data["observation_vector"].dtype == torch.float32
    assert data["next", "reward"].dtype == torch.float32
    check_env_specs(env)


# ---------------------------------------------------------------- pixels
@needs_renderer
def test_pixels_with_state() -> None:
    env = DMControlEnv("cheetah", "run", from_pixels=True, pixels_only=False, render_kwargs={"height": 48, "width": 64})
    spec = env.observation_spec["pixels"]
    assert spec.shape == (48, 64, 3) and spec.dtype == torch.uint8
    assert "position" in env.observation_spec.keys()
    data = env.rollout(3)
    assert data["next", "pixels"].shape == (3, 48, 64, 3)
    assert data["next", "pixels"].float().std() > 0  # a picture, not a blank frame
    check_env_specs(env)


@needs_renderer
def test_pixels_only() -> None:
    env = DMControlEnv("cartpole", "balance", from_pixels=True, render_kwargs={"height": 32, "width": 32, "camera_id": 0})
    assert list(env.observation_spec.keys()) == ["pixels"]
    assert env.reset()["pixels"].shape == (32, 32, 3)


def test_render_failure_says_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    dm_env = suite.load("cartpole", "balance")

    def broken_render(*args, **kwargs):
        raise RuntimeError("No OpenGL rendering backend is available.")

    monkeypatch.setattr(dm_env.physics, "render", broken_render)
    with pytest.raises(RuntimeError, match="from_pixels=True needs an OpenGL backend.*MUJOCO_GL"):
        DMControlWrapper(dm_env, from_pixels=True)


# ---------------------------------------------------------------- checkpoints
def test_simulator_state_round_trip() -> None:
    kwargs = {"task_kwargs": {"time_limit": 0.6}}  # 60 steps: the comparison crosses an episode end
    actions = fixed_actions(37 + 100, 6, seed=3)
    env_a = DMControlEnv("cheetah", "run", **kwargs)
    env_a.set_seed(11)
    td_a = env_a.reset()
    for action in actions[:37]:
        td_a, _ = env_a.step_and_maybe_reset(td_a.set("action", action))
    state = env_a.get_simulator_state()

    env_b = DMControlEnv("cheetah", "run", **kwargs)
    env_b.set_seed(999)  # a different seed: everything must come from the state
    td_b = env_b.reset()
    env_b.set_simulator_state(state)
    td_b = td_a.clone()  # the policy's input: the last observation of A

    dones = 0
    for action in actions[37:]:
        out_a, td_a = env_a.step_and_maybe_reset(td_a.set("action", action))
        out_b, td_b = env_b.step_and_maybe_reset(td_b.set("action", action))
        assert_same(out_a["next"], out_b["next"])
        assert_same(td_a, td_b)
        dones += int(out_a["next", "done"].item())
    assert dones >= 1  # the comparison went through an episode end and the reset after it


def test_simulator_state_is_a_snapshot_and_names_missing_entries() -> None:
    env = DMControlEnv("cartpole", "balance", seed=0)
    env.reset()
    state = env.get_simulator_state()
    physics = state["physics"].copy()
    env.rand_step()
    np.testing.assert_array_equal(state["physics"], physics)  # stepping did not change the snapshot
    with pytest.raises(KeyError, match="'random'"):
        env.set_simulator_state({"physics": physics, "step_count": 0, "reset_next_step": False})


# ---------------------------------------------------------------- errors
def test_unknown_domain_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="unknown dm_control domain 'cheeta'.*cheetah"):
        DMControlEnv("cheeta", "run")


def test_unknown_task_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="no task 'walk'; valid tasks: run"):
        DMControlEnv("cheetah", "walk")


def test_batch_size_must_be_empty() -> None:
    with pytest.raises(ValueError, match="batch_size must be empty"):
        DMControlEnv("cheetah", "run", batch_size=[2])
    DMControlEnv("cheetah", "run", batch_size=[])


def test_frame_skip_must_be_positive() -> None:
    with pytest.raises(ValueError, match="frame_skip must be >= 1"):
        DMControlEnv("cheetah", "run", frame_skip=0)


def test_missing_dm_control_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from cadence.envs.libs import dm_control as module

    monkeypatch.setitem(sys.modules, "dm_control", None)
    with pytest.raises(ImportError, match=r'pip install "cadence\[dm_control\]"'):
        module.DMControlEnv("cheetah", "run")
    assert module.DMControlEnv.available_envs == []

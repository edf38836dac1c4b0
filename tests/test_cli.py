"""Tests for the ``cadence`` command line."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from cadence.cli import build_parser, main


def test_demo_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--steps", "200"]) == 0
    out = capsys.readouterr().out

    assert out.startswith("Cadence ")
    assert '== GymEnv("Pendulum-v1") ==' in out and "== PendulumEnv() ==" in out
    assert out.count("check_env_specs: ok") == 2
    assert "FAILED" not in out

    # the summaries list the rollouts' leaves with their [200, ...] shapes
    assert out.count("rollout of 200 steps, batch size [200]:") == 2
    gym_keys = ("observation", "next.observation", "next.truncated")
    pendulum_keys = ("th", "thdot", "params.g", "next.th")
    for key in ("action", "next.reward", "next.done", "next.terminated", *gym_keys, *pendulum_keys):
        assert re.search(rf"^  {re.escape(key)}\s+\(200[,)]", out, re.MULTILINE), key
    rewards = [float(x) for x in re.findall(r"mean reward over 200 steps: (-?\d+\.\d+)", out)]
    assert len(rewards) == 2
    assert all(-16.3 <= r <= 0.0 for r in rewards)  # a pendulum step costs between 0 and ~16.27

    assert "CartPole-v1, 200 steps" in out
    speeds = {
        name: float(value.replace(",", ""))
        for name, value in re.findall(
            r"^(bare gymnasium loop|cadence GymEnv\.rollout)\s+([\d,]+) steps/s$", out, re.MULTILINE
        )
    }
    assert set(speeds) == {"bare gymnasium loop", "cadence GymEnv.rollout"}
    assert all(speed > 0 for speed in speeds.values())
    ratio = float(re.search(r"^ratio cadence/bare\s+(\d+\.\d+)$", out, re.MULTILINE).group(1))
    assert ratio == pytest.approx(speeds["cadence GymEnv.rollout"] / speeds["bare gymnasium loop"], rel=0.05, abs=0.01)


def test_parser_defaults_and_validation(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["demo"])
    assert (args.steps, args.rollout_steps, args.seed) == (10_000, 200, 0)
    with pytest.raises(SystemExit) as info:
        main(["demo", "--steps", "0"])
    assert info.value.code == 2
    assert "positive integer" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([])  # a command is required


def test_module_entry_point_help() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "cadence.cli", "demo", "--help"], capture_output=True, text=True, check=True
    )
    assert "--steps" in result.stdout and "--rollout-steps" in result.stdout


def test_failed_spec_check_sets_exit_status(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import cadence.envs.utils

    def broken_check(env, **kwargs):
        raise ValueError("spec mismatch for key 'observation'")

    monkeypatch.setattr(cadence.envs.utils, "check_env_specs", broken_check)
    assert main(["demo", "--steps", "20", "--rollout-steps", "5"]) == 1
    out = capsys.readouterr().out
    assert out.count("check_env_specs: FAILED: ValueError: spec mismatch for key 'observation'") == 2
    assert "ratio cadence/bare" in out  # the speed measurement still runs

"""Tests for the ``cadence`` command line."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from cadence.cli import build_parser, main
from cadence.trainers.run_folder import key_directory


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
    assert "expected an integer in [1, 1000000000], got 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([])  # a command is required


@pytest.mark.parametrize("argv,message", [
    (["eval", "runs/x", "--seed", "-1"], "cadence eval: error: argument --seed: expected a seed in [0, 4294967295]"),
    (["eval", "runs/x", "--episodes", str(10**11)], "cadence eval: error: argument --episodes: expected an integer"),
    (["eval", "runs/x", "--seed", "9" * 100_000], "cadence eval: error: argument --seed: invalid _seed value: '999"),
    (["demo", "--steps", "x" * 100_000], "cadence demo: error: argument --steps: invalid _positive_int value"),
    (["x" * 100_000], "cadence: error: argument COMMAND: invalid choice: 'xxx"),
])
def test_argument_errors_are_one_short_line(argv: list[str], message: str, capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.startswith(message) and err.count("\n") == 1 and len(err) < 600


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


TINY = [
    "--total-frames", "300", "--init-random-frames", "100", "--eval-interval", "150", "--hidden-sizes", "16",
    "--batch-size", "16", "--eval-episodes", "1", "--no-progress", "--no-tensorboard", "--no-plot",
]


def test_train_then_eval(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("imageio_ffmpeg", reason="videos need the train extra")
    assert main(["train", "td3", "--runs-dir", str(tmp_path), "--name", "tiny", *TINY]) == 0
    out = capsys.readouterr().out
    folder = tmp_path / "tiny"
    assert "td3 on Pendulum-v1 (seed 0): 300 frames" in out and f"video: {folder / 'video.mp4'}" in out
    assert (folder / "video.mp4").stat().st_size > 0
    assert main(["eval", str(folder), "--episodes", "2", "--video", str(tmp_path / "eval.gif")]) == 0
    out = capsys.readouterr().out
    assert f"td3 on Pendulum-v1, policy from {folder / 'policy.pt'}" in out
    assert len(re.findall(r"^episode \d: return +-?\d+\.\d+  length 200$", out, re.MULTILINE)) == 2
    assert (tmp_path / "eval.gif").read_bytes()[:3] == b"GIF"
    # a finished run resumed with a larger budget goes on from its last frame
    assert main(["train", "--resume", str(folder), "--total-frames", "450", "--no-video"]) == 0
    assert f"resuming {folder} at frame 300 of 450" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv,message",
    [
        (["train", "ppo"], "cadence train: error: unknown algorithm 'ppo'; valid algorithms: ddpg, td3, sac"),
        (["train"], "cadence train: error: name an algorithm (ddpg, td3, sac) or a run to --resume"),
        (["train", "ddpg", "--env", "Pendulum-v0"], "cadence train: error: unknown env 'Pendulum-v0'; did you mean "
                                                     "Pendulum-v1"),
        (["train", "ddpg", "--total-frame", "5"], "cadence train: error: unknown argument '--total-frame'; valid "
                                                   "options: --config, --resume, --overwrite, --actor-lr"),
        (["train", "ddpg", "--gamma", "2"], "cadence train: error: gamma must be in (0, 1], got 2.0"),
        (["train", "ddpg", "--config", "missing.toml"], "cadence train: error: config file 'missing.toml' does not "
                                                        "exist"),
        (["eval", "."], "cadence eval: error: . is not a run folder of cadence train"),
        (["train", "ddpg", "--actor-lr", "inf"], "cadence train: error: actor_lr must be a finite number, got inf"),
        (["train", "td3", "--exploration-noise", "nan"], "cadence train: error: exploration_noise must be a finite "
                                                         "number, got nan"),
        (["train", "sac", "--updates-per-frame", "inf"], "cadence train: error: updates_per_frame must be a finite "
                                                         "number, got inf"),
        (["train", "td3", "--target-noise-clip", "-1"], "cadence train: error: target_noise_clip must be >= 0"),
        (["train", "ddpg", "--seed", "-1"], "cadence train: error: seed must be in [0, 4294967295], got -1"),
        (["train", "ddpg", "--seed", str(2**70)], "cadence train: error: seed must be in [0, 4294967295]"),
        (["train", "ddpg", "--name", "../../x"], "cadence train: error: name must be one folder name"),
        # module:Id whose module is no module name
        (["train", "ddpg", "--env", ":Pendulum-v1"], "cadence train: error: env module '' is not a module name"),
        (["train", "ddpg", "--env", ".evil:Pendulum-v1"], "cadence train: error: env module '.evil' is not a module"),
        (["train", "ddpg", "--env", "..:x"], "cadence train: error: env module '..' is not a module name"),
        (["train", "ddpg", "--env", "x" * 5_000_000], "cadence train: error: env names are at most 256 characters, "
                                                      "got 'xxxxx"),
        # what a run would allocate, checked before its folder and key are made
        (["train", "ddpg", "--hidden-sizes", "100000000000"], "cadence train: error: batch_size=256, "
                                                              "hidden_sizes=[100000000000] needs about "),
        (["train", "ddpg", "--buffer-size", str(2**63 - 1)], "cadence train: error: buffer_size must be <= "
                                                             "1000000000000, got 9223372036854775807"),
        (["train", "ddpg", "--buffer-size", str(10**12)], "cadence train: error: buffer_size=1000000000000 needs "),
        (["train", "ddpg", "--batch-size", str(2**63 - 1)], "cadence train: error: batch_size must be <= "),
        (["train", "ddpg", "--batch-size", str(10**11)], "cadence train: error: batch_size=100000000000, "
                                                              "hidden_sizes=[256, 256] needs about"),
        (["train", "ddpg", "--total-frames", "1e300"], "cadence train: error: command line: total_frames expects "
                                                       "int, got '1e300'"),
        (["train", "ddpg", "--num-envs", "100000"], "cadence train: error: num_envs must be <= 1024, got 100000"),
        (["train", "ddpg", "--env", "CartPole-v1"], "cadence train: error: ddpg needs a continuous, bounded action "
                                                    "space; CartPole-v1 has"),
        # input the OS or argparse would echo whole
        (["train", "a" * 100_000], "cadence train: error: unknown algorithm 'aaaa"),
        (["train", "ddpg", "--" + "a" * 100_000, "1"], "cadence train: error: unknown argument '--aaaa"),
        (["eval", "a" * 100_000], "cadence eval: error: RUN_DIR: a path is at most 4096 bytes, got 'aaaa"),
        (["train", "--resume", "a" * 300], "cadence train: error: --resume: a name in the path is longer than 255 bytes"),
        (["train", "ddpg", "--runs-dir", "a" * 5000], "cadence train: error: runs_dir: a path is at most 4096 bytes"),
        (["train", "ddpg", "--config", "a\0b.toml"], "cadence train: error: config file: a path cannot hold a NUL byte"),
        (["eval", "runs/x", "--video", "v" * 300 + ".mp4"], "cadence eval: error: --video: a name in the path is longer"),
    ],
)
def test_bad_input_is_one_line_and_status_2(argv, message, capsys: pytest.CaptureFixture[str], tmp_path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    keys = set(key_directory().iterdir()) if key_directory().exists() else set()
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(message)
    assert captured.err.count("\n") == 1 and captured.out == "" and len(captured.err) < 2000
    assert not (tmp_path / "runs").exists()
    assert (set(key_directory().iterdir()) if key_directory().exists() else set()) == keys  # no key made


def test_a_policy_file_carrying_code_is_refused_without_advice_to_run_it(tmp_path, capsys) -> None:
    import os

    import torch

    from cadence.trainers.config import TrainConfig
    from cadence.trainers.training import TrainingRun

    run = TrainingRun.create(TrainConfig(name="handed"), runs_dir=tmp_path, out=open(os.devnull, "w"))

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {tmp_path / 'pwned'}",))

    torch.save({"config": {}, "policy": Payload()}, run.folder / "policy.pt")  # a zip file naming os.system
    assert main(["eval", str(run.folder), "--no-video"]) == 2
    err = capsys.readouterr().err
    assert "policy.pt: holds more than tensors and plain values (refused, nothing in it was run)" in err
    assert "system" in err and "weights_only" not in err and "False" not in err
    assert not (tmp_path / "pwned").exists()


def test_resume_errors_and_overwrite(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    options = ["--runs-dir", str(tmp_path), "--name", "run", *TINY, "--no-video"]
    assert main(["train", "ddpg", *options]) == 0
    capsys.readouterr()
    assert main(["train", "ddpg", *options]) == 2
    assert "already exists; pass --overwrite to replace it, or use cadence train --resume" in capsys.readouterr().err
    assert main(["train", "sac", "--resume", str(tmp_path / "run")]) == 2
    assert f"{tmp_path / 'run'} trains ddpg, not sac" in capsys.readouterr().err
    assert main(["train", "--resume", str(tmp_path / "run"), "--seed", "4"]) == 2
    assert "--resume cannot change seed" in capsys.readouterr().err
    assert main(["train", "--resume", str(tmp_path), "--overwrite"]) == 2
    assert "it takes neither --config nor --overwrite" in capsys.readouterr().err
    assert main(["train", "ddpg", *options, "--overwrite"]) == 0


def test_python_dash_m_cadence() -> None:
    result = subprocess.run([sys.executable, "-m", "cadence", "train", "--help"], capture_output=True, text=True,
                            check=True)
    assert "--total-frames" in result.stdout and "--resume RUN_DIR" in result.stdout

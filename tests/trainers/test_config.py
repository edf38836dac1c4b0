"""Tests for cadence/trainers/config.py: defaults, files, the command line, errors."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest

from cadence.trainers.config import (
    ConfigError,
    TrainConfig,
    add_config_arguments,
    build_config,
    config_from_mapping,
    load_config_file,
    overrides_from_args,
)


def parse(*argv: str) -> dict:
    parser = argparse.ArgumentParser()
    add_config_arguments(parser)
    return overrides_from_args(parser.parse_args(list(argv)))


def test_every_field_is_an_option_and_converts() -> None:
    fields = [field.name for field in dataclasses.fields(TrainConfig) if field.name != "algorithm"]
    parser = argparse.ArgumentParser()
    add_config_arguments(parser)
    options = {action.dest for action in parser._actions if action.option_strings and action.dest != "help"}
    assert options == set(fields)
    config = config_from_mapping(
        parse("--total-frames", "2000", "--hidden-sizes", "64,32", "--actor-lr", "3e-4", "--no-video",
              "--env", "HalfCheetah-v5", "--updates-per-frame", "0.5"),
        "command line",
    )
    assert (config.total_frames, config.hidden_sizes, config.actor_lr) == (2000, [64, 32], 3e-4)
    assert (config.video, config.env, config.updates_per_frame) == (False, "HalfCheetah-v5", 0.5)


@pytest.mark.parametrize("suffix", [".toml", ".yaml"])
def test_file_then_command_line(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"run{suffix}"
    if suffix == ".toml":
        path.write_text('algorithm = "sac"\nseed = 4\ntotal_frames = 3000\nhidden_sizes = [64, 64]\nvideo = false\n')
    else:
        path.write_text("algorithm: sac\nseed: 4\ntotal-frames: 3000\nhidden_sizes: [64, 64]\nvideo: false\n")
    config = build_config("td3", str(path), parse("--seed", "7"))
    # the positional algorithm and the command line win over the file; the file over the defaults
    assert (config.algorithm, config.seed, config.total_frames, config.hidden_sizes, config.video) == (
        "td3", 7, 3000, [64, 64], False
    )
    assert config.gamma == TrainConfig().gamma


def test_a_run_config_round_trips_through_toml(tmp_path: Path) -> None:
    config = TrainConfig(algorithm="sac", env="cheetah/run", name='with "quotes"', alpha_lr=1e-5, video=False)
    path = tmp_path / "config.toml"
    path.write_text(config.to_toml())
    assert config_from_mapping(load_config_file(path), str(path)) == config


def test_bad_fields_and_values_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^x.toml: unknown config field 'total_frame'; valid fields: actor_lr, "
                                          r"algorithm, alpha_lr, batch_size, "):
        config_from_mapping({"total_frame": 10}, "x.toml")
    with pytest.raises(ConfigError, match=r"command line: total_frames expects int, got 'many'"):
        config_from_mapping({"total_frames": "many"}, "command line")
    with pytest.raises(ConfigError, match=r"hidden_sizes expects a list of ints \(such as 256,256\), got 'a,b'"):
        config_from_mapping({"hidden_sizes": "a,b"}, "command line")
    with pytest.raises(ConfigError, match=r"video expects bool, got 'maybe'"):
        config_from_mapping({"video": "maybe"}, "command line")
    with pytest.raises(ConfigError, match=r"^unknown algorithm 'ppo'; valid algorithms: ddpg, td3, sac$"):
        build_config("ppo", None, {})
    with pytest.raises(ConfigError, match=r"gamma must be in \(0, 1\], got 1.5"):
        build_config("ddpg", None, {"gamma": "1.5"})
    with pytest.raises(ConfigError, match=r"frames_per_batch \(50\) must be a multiple of num_envs \(3\)"):
        build_config("ddpg", None, {"num_envs": "3"})
    for message in (str(err) for err in _errors_of(tmp_path)):
        assert "\n" not in message


def _errors_of(tmp_path: Path) -> list[ConfigError]:
    errors = []
    broken = tmp_path / "broken.toml"
    broken.write_text("total_frames = = 3\n")
    listed = tmp_path / "list.yaml"
    listed.write_text("- 1\n- 2\n")
    for path in (tmp_path / "missing.toml", broken, listed, tmp_path / "run.json"):
        if path.suffix == ".json":
            path.write_text("{}")
        with pytest.raises(ConfigError) as info:
            load_config_file(path)
        errors.append(info.value)
    assert "does not exist" in str(errors[0])
    assert "cannot parse" in str(errors[1])
    assert "expected a table of config fields, got list" in str(errors[2])
    assert "unknown config file kind '.json'; valid kinds: .toml, .yaml, .yml" in str(errors[3])
    return errors


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("actor_lr", "inf", "actor_lr must be a finite number, got inf"),
        ("critic_lr", "-inf", "critic_lr must be a finite number, got -inf"),
        ("exploration_noise", "nan", "exploration_noise must be a finite number, got nan"),
        ("updates_per_frame", "inf", "updates_per_frame must be a finite number, got inf"),
        ("gamma", "nan", "gamma must be a finite number, got nan"),
        ("target_noise_clip", "-1", "target_noise_clip must be >= 0, got -1.0"),
        ("target_policy_noise", "-0.1", "target_policy_noise must be >= 0, got -0.1"),
        ("exploration_noise", "-0.5", "exploration_noise must be >= 0, got -0.5"),
        ("seed", "-1", "seed must be in [0, 4294967295], got -1"),
        ("seed", str(2**70), f"seed must be in [0, 4294967295], got {2**70}"),
        ("total_frames", "inf", "command line: total_frames expects int, got 'inf'"),
    ],
)
def test_bad_values_are_named(field: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        build_config("td3", None, {field: value})
    assert str(info.value) == message


def test_non_finite_values_in_a_file_are_named(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text("actor_lr = inf\n")
    with pytest.raises(ConfigError, match="actor_lr must be a finite number, got inf"):
        build_config("ddpg", str(path), {})
    path.write_text("seed = -4\n")
    with pytest.raises(ConfigError, match=r"seed must be in \[0, 4294967295\], got -4"):
        build_config("ddpg", str(path), {})


@pytest.mark.parametrize("field", ["env", "hidden_sizes", "video", "total_frames", "actor_lr", "name"])
def test_a_yaml_alias_bomb_is_refused_quickly_and_quoted_short(tmp_path: Path, field: str) -> None:
    pytest.importorskip("yaml", reason="YAML configs need pyyaml (the train extra)")
    levels = ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    levels += [f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]" for i in range(9)]
    path = tmp_path / "bomb.yaml"
    path.write_text("bombs:\n" + "\n".join("  " + level for level in levels) + f"\n{field}: *j\n")
    values = load_config_file(path)
    values.pop("bombs")
    with pytest.raises(ConfigError) as info:  # 9**10 strings if expanded: it would never return
        config_from_mapping(values, str(path))
    message = str(info.value)
    assert message.startswith(f"{path}: {field} expects ") and len(message) < 600


def test_errors_quote_at_most_a_few_hundred_characters(tmp_path: Path) -> None:
    huge = "x" * 5_000_000
    for values in ({"total_frames": huge}, {huge: 1}, {"name": huge}, {"hidden_sizes": [1] * 100_000}):
        with pytest.raises(ConfigError) as info:
            build_config("ddpg", None, values)
        assert len(str(info.value)) < 700, str(info.value)[:100]
    path = tmp_path / "big.toml"
    path.write_text("# padding\n" * 200_000)
    with pytest.raises(ConfigError, match=r"big.toml: 2000000 bytes; a config file is at most 1048576 bytes"):
        load_config_file(path)


@pytest.mark.parametrize(
    "line,message",
    [
        ("hidden_sizes = [1e11]", None),  # a size, refused later from what it would allocate
        ("hidden_sizes = [[1, 2]]", "hidden_sizes expects a list of ints"),
        ("env = 3", "env expects str, got 3"),
        ("video = [1]", "video expects bool, got [1]"),
        ("total_frames = 1e300", "total_frames must be <= 1000000000000, got 1000000000000000052504760255204420248"),
        ("total_frames = inf", "total_frames expects int, got inf"),
        ("buffer_size = 9223372036854775807", "buffer_size must be <= 1000000000000, got 9223372036854775807"),
        ("eval_episodes = 10000000", "eval_episodes must be <= 1000000, got 10000000"),
        ("updates_per_frame = 1e9", "updates_per_frame must be <= 1000, got 1000000000.0"),
        ("hidden_sizes = [0]", "hidden_sizes must be 1 to 64 layer sizes in [1, 1000000000000], got [0]"),
    ],
)
def test_values_of_the_wrong_kind_or_without_bound_are_named(tmp_path: Path, line: str, message: str | None) -> None:
    path = tmp_path / "run.toml"
    path.write_text(line + "\n")
    if message is None:
        assert build_config("ddpg", str(path), {}).hidden_sizes == [10**11]
        return
    with pytest.raises(ConfigError) as info:
        build_config("ddpg", str(path), {})
    assert message in str(info.value) and len(str(info.value)) < 400

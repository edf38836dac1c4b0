"""Tests for cadence.envs.libs: gym backend selection and library discovery."""

from __future__ import annotations

import importlib.util
import sys
import types

import gymnasium
import gymnasium.wrappers
import pytest

from cadence.envs.libs import SUPPORTED_LIBRARIES, get_available_libraries
from cadence.envs.libs.gym_backend import _stack, gym_backend, set_gym_backend

GYM_INSTALLED = importlib.util.find_spec("gym") is not None


@pytest.fixture(autouse=True)
def clean_stack():
    """Every test starts and must end with no backend set."""
    assert _stack == []
    yield
    assert _stack == [], "a set_gym_backend was left entered"


def make_fake_backend(name: str = "fakegym") -> types.ModuleType:
    backend = types.ModuleType(name)
    backend.__version__ = "0.26.2"
    backend.wrappers = types.ModuleType(f"{name}.wrappers")
    backend.wrappers.TimeLimit = object()
    backend.make = lambda env_id: ("made", env_id)
    return backend


def test_default_is_gymnasium() -> None:
    assert gym_backend() is gymnasium


def test_seed_example_with_gymnasium() -> None:
    with set_gym_backend(gymnasium):
        assert gym_backend() is gymnasium
    with set_gym_backend("gymnasium"):
        wrappers = gym_backend("wrappers")
        assert wrappers is gymnasium.wrappers
        assert wrappers.__name__ == "gymnasium.wrappers"


def test_submodule_import_and_attribute_paths() -> None:
    classic = gym_backend("envs.classic_control")
    assert classic.__name__ == "gymnasium.envs.classic_control"
    assert gym_backend("spaces.Discrete") is gymnasium.spaces.Discrete
    with pytest.raises(AttributeError, match="no submodule or attribute 'no_such_thing'"):
        gym_backend("no_such_thing")
    with pytest.raises(TypeError):
        gym_backend("")


@pytest.mark.skipif(GYM_INSTALLED, reason="gym is installed here")
def test_missing_backend_says_what_to_install() -> None:
    with pytest.raises(ModuleNotFoundError, match="pip install gym") as info:
        set_gym_backend("gym")
    assert "'gym' is not installed" in str(info.value)
    assert info.value.name == "gym"


def test_unknown_backend_suggests_gymnasium() -> None:
    with pytest.raises(ImportError, match="pip install gymnasium"):
        set_gym_backend("gymnasum")


def test_bad_type() -> None:
    with pytest.raises(TypeError, match="module or a module name"):
        set_gym_backend(3)  # type: ignore[arg-type]


def test_fake_module_passed_directly() -> None:
    fake = make_fake_backend()
    with set_gym_backend(fake) as entered:
        assert entered is fake
        assert gym_backend() is fake
        assert gym_backend("wrappers") is fake.wrappers
        assert gym_backend("wrappers.TimeLimit") is fake.wrappers.TimeLimit
        assert gym_backend("make")("CartPole-v1") == ("made", "CartPole-v1")
        with pytest.raises(AttributeError, match="fakegym"):
            gym_backend("vector")
    assert gym_backend() is gymnasium


def test_nested_contexts_restore() -> None:
    outer, inner = make_fake_backend("outer"), make_fake_backend("inner")
    with set_gym_backend(outer):
        with set_gym_backend(inner):
            assert gym_backend() is inner
            with set_gym_backend(gymnasium):
                assert gym_backend() is gymnasium
            assert gym_backend() is inner
        assert gym_backend() is outer
    assert gym_backend() is gymnasium


def test_restores_after_exception() -> None:
    fake = make_fake_backend()
    with pytest.raises(RuntimeError):
        with set_gym_backend(fake):
            raise RuntimeError("boom")
    assert gym_backend() is gymnasium


def test_same_instance_reentered() -> None:
    fake = make_fake_backend()
    setter = set_gym_backend(fake)
    with setter:
        with set_gym_backend(gymnasium):
            with setter:
                assert gym_backend() is fake
            assert gym_backend() is gymnasium
        assert gym_backend() is fake
    assert gym_backend() is gymnasium


def test_decorator() -> None:
    fake = make_fake_backend()

    @set_gym_backend(fake)
    def current(x: int) -> tuple[types.ModuleType, int]:
        """Returns the backend in use."""
        return gym_backend(), x

    assert current(3) == (fake, 3)
    assert current.__name__ == "current" and current.__doc__ == "Returns the backend in use."
    assert gym_backend() is gymnasium

    @set_gym_backend(fake)
    def recursive(depth: int) -> list[int]:
        assert gym_backend() is fake
        sizes = [len(_stack)]
        return sizes if depth == 0 else sizes + recursive(depth - 1)

    assert recursive(2) == [1, 2, 3]  # one decorator instance, entered three times
    assert _stack == []


def test_default_falls_back_to_gym_when_gymnasium_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    from cadence.envs.libs import gym_backend as gym_backend_module

    fake_gym = make_fake_backend("gym")
    monkeypatch.setattr(gym_backend_module, "_default", [])
    monkeypatch.setitem(sys.modules, "gymnasium", None)  # blocks the import
    monkeypatch.setitem(sys.modules, "gym", fake_gym)
    assert gym_backend() is fake_gym


def test_no_backend_at_all(monkeypatch: pytest.MonkeyPatch) -> None:
    from cadence.envs.libs import gym_backend as gym_backend_module

    monkeypatch.setattr(gym_backend_module, "_default", [])
    monkeypatch.setitem(sys.modules, "gymnasium", None)
    monkeypatch.setitem(sys.modules, "gym", None)
    with pytest.raises(ModuleNotFoundError, match="pip install gymnasium"):
        gym_backend()


def test_get_available_libraries() -> None:
    libraries = get_available_libraries()
    assert set(libraries) == set(SUPPORTED_LIBRARIES)
    assert {"gymnasium", "gym", "dm_control", "pettingzoo", "vmas", "envpool", "brax", "jumanji"} <= set(libraries)
    assert all(isinstance(ok, bool) for ok in libraries.values())
    assert libraries["gymnasium"] is True
    assert libraries["gym"] is GYM_INSTALLED


def test_get_available_libraries_imports_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    before = set(sys.modules)
    get_available_libraries()
    assert not {"dm_control", "pettingzoo", "vmas", "envpool", "brax", "jumanji"} & (set(sys.modules) - before)
    monkeypatch.setitem(sys.modules, "gymnasium", None)
    monkeypatch.setitem(sys.modules, "vmas", types.ModuleType("vmas"))
    libraries = get_available_libraries()
    assert libraries["gymnasium"] is False and libraries["vmas"] is True

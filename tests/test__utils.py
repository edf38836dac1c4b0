"""Tests for cadence._utils: version parsing, module versions and implement_for."""

from __future__ import annotations

import sys
import types

import gymnasium
import pytest

from cadence._utils import implement_for, module_version, parse_version


@pytest.fixture
def fake_module(monkeypatch: pytest.MonkeyPatch):
    """Places a stand-in module with a chosen ``__version__`` in ``sys.modules``."""

    def place(name: str, version: str) -> types.ModuleType:
        module = types.ModuleType(name)
        module.__version__ = version
        monkeypatch.setitem(sys.modules, name, module)
        return module

    return place


# --------------------------------------------------------------------------- versions


@pytest.mark.parametrize(
    "lower, higher",
    [
        ("0.26.0", "0.26.2"),
        ("0.9", "0.10"),
        ("1.0.dev0", "1.0a1"),
        ("1.0a1", "1.0a2"),
        ("1.0a2", "1.0b1"),
        ("1.0b1", "1.0rc1"),
        ("1.0rc1", "1.0"),
        ("1.0", "1.0.post1"),
        ("1.0.post1", "1.0.1"),
        ("1.0.post1.dev0", "1.0.post1"),
        ("2.13.0", "2.13.0+cpu"),
        ("9.9", "1!0.1"),
        ("1.0.0", "1.0.0.1"),
    ],
)
def test_parse_version_orders(lower: str, higher: str) -> None:
    assert parse_version(lower) < parse_version(higher)
    assert parse_version(higher) > parse_version(lower)


@pytest.mark.parametrize("a, b", [("1", "1.0.0"), ("v1.2", "1.2"), ("1.0RC1", "1.0rc1"), ("1.0-1", "1.0.post1")])
def test_parse_version_equal(a: str, b: str) -> None:
    assert parse_version(a) == parse_version(b)


@pytest.mark.parametrize("bad", ["", "abc", "1..2", "1.0+"])
def test_parse_version_rejects(bad: str) -> None:
    with pytest.raises(ValueError, match="not a valid version"):
        parse_version(bad)


def test_parse_version_type() -> None:
    with pytest.raises(TypeError):
        parse_version(1.0)  # type: ignore[arg-type]


def test_module_version_reads_sys_modules_then_metadata(fake_module) -> None:
    assert module_version("gymnasium") == gymnasium.__version__
    fake_module("gymnasium", "0.29.1")
    assert module_version("gymnasium") == "0.29.1"
    assert module_version("gymnasium.wrappers") == "0.29.1"


def test_module_version_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    assert module_version("cadence_surely_missing_module") is None
    monkeypatch.setitem(sys.modules, "gymnasium", None)  # import blocked
    assert module_version("gymnasium") is None


# ----------------------------------------------------------------------- implement_for


def test_seed_example_gym_0_26_2(fake_module) -> None:
    fake_module("gym", "0.26.2")

    @implement_for("gym", None, "0.26.0")
    def fun():
        return 0

    @implement_for("gym", "0.26.0", None)
    def fun():  # noqa: F811
        return 1

    assert fun() == 1


def test_seed_example_older_gym(fake_module) -> None:
    fake_module("gym", "0.21.0")

    @implement_for("gym", None, "0.26.0")
    def fun():
        return 0

    @implement_for("gym", "0.26.0", None)
    def fun():  # noqa: F811
        return 1

    assert fun() == 0


def test_bounds_are_half_open(fake_module) -> None:
    module = fake_module("gym", "0.26.0")

    @implement_for("gym", None, "0.26.0")
    def fun():
        return "old"

    @implement_for("gym", "0.26.0")
    def fun():  # noqa: F811
        return "new"

    assert fun() == "new"
    module.__version__ = "0.25.99"
    implement_for.reset()  # same module object: the cached choice needs a reset
    assert fun() == "old"


def test_real_gymnasium_version() -> None:
    @implement_for("gymnasium", None, "1.0.0")
    def api():
        return "0.x"

    @implement_for("gymnasium", "1.0.0", None)
    def api():  # noqa: F811
        return "1.x"

    expected = "1.x" if parse_version(gymnasium.__version__) >= parse_version("1.0.0") else "0.x"
    assert api() == expected


def test_follows_module_swapped_in_sys_modules(fake_module) -> None:
    @implement_for("gymnasium", None, "1.0.0")
    def api():
        return "0.x"

    @implement_for("gymnasium", "1.0.0", None)
    def api():  # noqa: F811
        return "1.x"

    assert api() == "1.x"  # the real gymnasium (>= 1.1 is a dependency)
    fake_module("gymnasium", "0.29.1")
    assert api() == "0.x"  # no reset needed: a different module object is in sys.modules


def test_methods_classmethods_staticmethods(fake_module) -> None:
    fake_module("gym", "0.26.2")

    class Env:
        def __init__(self, value: int) -> None:
            self.value = value

        @implement_for("gym", None, "0.26")
        def step(self, x: int) -> int:
            return -x

        @implement_for("gym", "0.26")
        def step(self, x: int) -> int:  # noqa: F811
            return self.value + x

        @implement_for("gym", "0.26")
        @classmethod
        def name(cls) -> str:
            return cls.__name__

        @implement_for("gym", "0.26")
        @staticmethod
        def double(x: int) -> int:
            return 2 * x

    env = Env(10)
    assert env.step(1) == 11
    assert Env.step(env, 2) == 12
    assert Env.name() == "Env" and env.name() == "Env"
    assert Env.double(3) == 6


def test_wrapper_keeps_name_and_doc(fake_module) -> None:
    fake_module("gym", "0.26.2")

    @implement_for("gym", "0.26")
    def documented(x: int) -> int:
        """Adds one."""
        return x + 1

    assert documented.__name__ == "documented"
    assert documented.__doc__ == "Adds one."
    assert documented(1) == 2


def test_no_matching_range_names_module_version_and_ranges(fake_module) -> None:
    fake_module("gym", "0.20.0")

    @implement_for("gym", "0.21", "0.26")
    def fun():
        return 0

    @implement_for("gym", "0.26")
    def fun():  # noqa: F811
        return 1

    with pytest.raises(ImportError) as info:
        fun()
    message = str(info.value)
    assert "gym 0.20.0 is installed" in message
    assert "gym [0.21, 0.26)" in message and "gym [0.26, inf)" in message
    assert not isinstance(info.value, ModuleNotFoundError)
    assert info.value.name == "gym"


def test_missing_module_raises_module_not_found() -> None:
    @implement_for("cadence_surely_missing_module", "1.0")
    def fun():
        return 1

    with pytest.raises(ModuleNotFoundError, match="cadence_surely_missing_module is not installed"):
        fun()


def test_several_modules_follow_gym_backend(fake_module) -> None:
    from cadence.envs.libs.gym_backend import set_gym_backend

    fake_gym = fake_module("gym", "0.26.2")

    @implement_for("gym", "0.26")
    def which():
        return "gym"

    @implement_for("gymnasium", "1.0")
    def which():  # noqa: F811
        return "gymnasium"

    assert which() == "gymnasium"  # the default backend
    with set_gym_backend(fake_gym):
        assert which() == "gym"
    assert which() == "gymnasium"


def test_only_one_module_installed_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "gym", raising=False)

    @implement_for("cadence_surely_missing_module", "0.1")
    def which():
        return "missing"

    @implement_for("gymnasium", "1.0")
    def which():  # noqa: F811
        return "gymnasium"

    assert which() == "gymnasium"


def test_redefinition_replaces_same_range() -> None:
    def define(value: int):
        @implement_for("gymnasium", "1.0")
        def redefined():
            return value

        return redefined

    first = define(1)
    assert first() == 1
    second = define(2)
    assert second is first  # one dispatcher per qualified name
    assert second() == 2
    assert implement_for.implementations(second) == [("gymnasium", "1.0", None)]


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="from_version must be lower"):
        implement_for("gym", "0.26", "0.21")
    with pytest.raises(ValueError, match="not a valid version"):
        implement_for("gym", "latest")
    with pytest.raises(TypeError, match="module_name"):
        implement_for("")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="decorates functions"):
        implement_for("gym")(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not decorated"):
        implement_for.implementations(len)

"""Fixtures shared across test folders."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def _ray_started_here() -> Iterator[list[bool]]:
    """Whether this session started Ray; if so, Ray is shut down when the session ends."""
    started: list[bool] = []
    yield started
    if started:
        import ray

        if ray.is_initialized():
            ray.shutdown()


@pytest.fixture(scope="module")
def local_ray(_ray_started_here: list[bool]) -> ModuleType:
    """A local 2-CPU Ray, shared by every test that needs it (starting Ray takes seconds).

    Started only if none is running: once per session, unless something stopped it in
    between (``tests/test_readme.py`` does: the README starts its own). Its workers import
    this repository's test helpers too (``tests.fakes``)."""
    ray = pytest.importorskip("ray", reason='needs the ray extra: pip install "cadence[ray]"')
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR",
                 runtime_env={"env_vars": {"PYTHONPATH": str(REPO_ROOT)}})
        _ray_started_here.append(True)
    return ray

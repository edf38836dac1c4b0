"""Fixtures shared across test folders."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def local_ray() -> Iterator[ModuleType]:
    """One local 2-CPU Ray for every test that needs it (starting Ray takes seconds), shut
    down at the end if the session started it. Its workers import this repository's test
    helpers too (``tests.fakes``). ``tests/test_readme.py`` stops it: the README starts its own."""
    ray = pytest.importorskip("ray", reason='needs the ray extra: pip install "cadence[ray]"')
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR",
                 runtime_env={"env_vars": {"PYTHONPATH": str(REPO_ROOT)}})
    yield ray
    if started_here:
        ray.shutdown()

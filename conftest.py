"""Test-session settings shared by tests/ and the doctests under cadence/."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

_KEY_DIR: str | None = None


def pytest_configure(config: pytest.Config) -> None:
    # runs made by tests keep their signing keys here, not in the user's ~/.local/share
    global _KEY_DIR
    _KEY_DIR = tempfile.mkdtemp(prefix="cadence-test-keys-")
    os.environ["CADENCE_KEY_DIR"] = _KEY_DIR


def pytest_unconfigure(config: pytest.Config) -> None:
    if _KEY_DIR is not None:
        shutil.rmtree(_KEY_DIR, ignore_errors=True)

"""The benchmark scripts stay importable: they are run by hand, and share pieces with each
other (``bench_rollout.measure``, ``bench_pipeline``'s runners), so a change to one can
break another without any test noticing. Importing runs none of them."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
#: Scripts that run in the reference library's own environment only (they import torchrl).
REFERENCE_ONLY = {"_reference_ddpg"}


@pytest.mark.parametrize(
    "name", sorted(path.stem for path in BENCHMARKS.glob("*.py") if path.stem not in REFERENCE_ONLY)
)
def test_a_benchmark_script_imports(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # the scripts import each other by name
    for module in ("bench_rollout", "bench_pipeline", name):
        monkeypatch.delitem(sys.modules, module, raising=False)
    module = importlib.import_module(name)
    assert callable(getattr(module, "main", None)), f"benchmarks/{name}.py has no main()"

"""The documentation build (``make docs``, ``docs/_ext/cadence_docs.py``) fails on bad input,
naming it: an undocumented public name, a failing docstring example, a broken reference, a
failing guide block. Each test builds a small package's docs in a subprocess, as
``make docs`` builds Cadence's (``make docs`` itself runs in CI, see ``.ci/run``)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("sphinx", reason='the docs build needs the docs extra: pip install "cadence[docs]"')
pytest.importorskip("myst_parser", reason='the docs build needs the docs extra: pip install "cadence[docs]"')

EXTENSION_DIR = Path(__file__).resolve().parents[1] / "docs" / "_ext"

GOOD_MODULE = '''
"""Tools: a module that documents what it offers."""

__all__ = ["Counter", "double"]


class Counter:
    """Counts.

    Examples:
        >>> Counter().add(2)
        2
    """

    def __init__(self) -> None:
        self.total = 0

    def add(self, n: int) -> int:
        """Adds ``n``; see :func:`double` and :class:`Counter`.

        Examples:
            >>> Counter().add(1)
            1
        """
        self.total += n
        return self.total


def double(x: int) -> int:
    """Twice ``x``.

    Examples:
        >>> double(2)
        4
    """
    return 2 * x
'''

BAD_MODULE = '''
"""Tools with the four kinds of bad input."""


def bare(x):
    return x


def wrong() -> int:
    """Says one, returns two; and points at :class:`Nowhere`.

    Examples:
        >>> wrong()
        1
    """
    return 2
'''

GOOD_GUIDE = """
# A guide

```python
from fakepkg.tools import double
print("doubled:", double(21))
```

```python
import pathlib, tempfile
from cadence.trainers.run_folder import create_run_folder, key_directory

create_run_folder(pathlib.Path("runs") / "guide")  # a guide that trains makes a run key
(pathlib.Path.home() / "touched").write_text("a guide wrote to its home")
pathlib.Path(tempfile.mkdtemp(), "scratch").write_text("and to a temporary folder")
print("keys:", len(list(key_directory().glob("*.key"))))
```

```python
# not run: shown only
raise SystemExit("never")
```
"""

BAD_GUIDE = """
# A guide

```python
print("before")
```

```python
raise ValueError("the guide's code is wrong")
```
"""


def build(tmp_path: Path, module: str, guide: str, env: dict[str, str] | None = None
          ) -> subprocess.CompletedProcess[str]:
    """Writes a package ``fakepkg`` and its docs under ``tmp_path`` and builds them as
    ``make docs`` does (``-E -W --keep-going``)."""
    package = tmp_path / "fakepkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('"""A package for the docs build\'s tests."""\n')
    (package / "tools.py").write_text(module)
    docs = tmp_path / "docs"
    (docs / "guides").mkdir(parents=True)
    (docs / "conf.py").write_text(textwrap.dedent(f"""
        import sys
        sys.path[:0] = [{str(EXTENSION_DIR)!r}, {str(tmp_path)!r}]
        project = "fakepkg"
        extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "myst_parser", "cadence_docs"]
        source_suffix = {{".rst": "restructuredtext", ".md": "markdown"}}
        exclude_patterns = ["_build"]
        nitpicky = True
        nitpick_ignore_regex = [(r"py:.*", r"(int|str|None)")]
        napoleon_use_ivar = True
        cadence_docs_package = "fakepkg"
    """))
    (docs / "index.md").write_text("# fakepkg\n\n```{toctree}\napi/index\nguides/guide\nperformance\n```\n")
    (docs / "guides" / "guide.md").write_text(guide)
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "README.md").write_text(
        "# Benchmarks\n\n## `bench_x.py`: a benchmark\n\nLatest run: 2026-11-26, on a test machine.\n\n"
        "| case | frames/s |\n|---|---|\n| x | 100 |\n"
    )
    return subprocess.run(
        [sys.executable, "-m", "sphinx", "-E", "-W", "--keep-going", "-q", "-b", "html", str(docs),
         str(docs / "_build")],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env,
    )


def test_a_documented_package_builds_with_its_api_pages_guide_output_and_performance_page(tmp_path: Path) -> None:
    caller = {name: tmp_path / "caller" / name for name in ("home", "tmp", "keys")}
    for folder in caller.values():
        folder.mkdir(parents=True)
    environment = {name: value for name, value in os.environ.items() if not name.startswith("XDG_")}
    environment.update(HOME=str(caller["home"]), TMPDIR=str(caller["tmp"]), CADENCE_KEY_DIR=str(caller["keys"]))
    done = build(tmp_path / "project", GOOD_MODULE, GOOD_GUIDE, env=environment)
    assert done.returncode == 0, done.stderr
    # nothing was written outside the project: not the caller's home, temporary folder or run keys
    assert [path for folder in caller.values() for path in folder.rglob("*")] == []
    assert not (tmp_path / "project" / "docs" / ".build-home").exists()  # the build's own, removed at its end
    tmp_path = tmp_path / "project"
    html = tmp_path / "docs" / "_build"
    api = (html / "api" / "fakepkg.tools.html").read_text()
    assert "Counter" in api and "Twice" in api and 'href="#fakepkg.tools.double"' in api
    guide = (html / "guides" / "guide.html").read_text()
    assert "doubled: 42" in guide and "keys: 1" in guide  # the blocks ran, and their output is shown under them
    performance = (html / "performance.html").read_text()
    assert "a test machine" in performance and "<table" in performance


def test_bad_input_fails_the_build_and_each_problem_is_named(tmp_path: Path) -> None:
    done = build(tmp_path, BAD_MODULE, BAD_GUIDE)
    assert done.returncode != 0
    assert "undocumented public name: fakepkg.tools.bare" in done.stderr
    assert "a docstring example failed: fakepkg/tools.py::fakepkg.tools.wrong" in done.stderr
    assert "reference target not found: Nowhere" in done.stderr
    assert "a code block failed" in done.stderr and "the guide's code is wrong" in done.stderr

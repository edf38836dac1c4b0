"""Sphinx extension for Cadence's documentation.

What it adds to a plain autodoc build, each step failing the build (``-W``) with a name:

* **API pages**, written when the build starts: one page per public module of
  ``cadence`` (``api/<module>.rst``). Each object is documented once, in the module that
  defines it; a package's page lists what it exports, linked to those pages.
* **Undocumented public names**: a public module, class, function or method without a
  docstring is a warning naming it (a method documented by the class it overrides counts
  as documented).
* **Docstring examples**: the package's ``Examples:`` blocks run (pytest's doctests, in a
  subprocess); each failing one is a warning naming it.
* **Short cross-references**: ``:class:`RolloutWorker``` in a docstring resolves to the one
  documented Cadence object of that name (the nearest to the current module if several),
  and a full name that a package re-exports (``cadence.modules.MLP``) to its home; a name
  that matches none stays a broken reference, which is a warning. Private names and type
  variables, which are not documented, are shown as plain text.
* **Executed guides**: every ``python`` code block of a page under ``guides/`` runs when
  the page is read, in order, in one namespace per page, in a fresh process and a scratch
  folder; what it prints is shown under it. A block whose first line is
  ``# not run: <why>`` is shown only.
* **Attribute docstrings as written**: napoleon would read the first line of an
  attribute's docstring as ``type: description``; Cadence's first lines are sentences.
* **The Performance page**: ``performance.md`` is generated from ``benchmarks/README.md``:
  each benchmark's title, the run it reports (date, machine, command), its tables and plots.
* **Nothing written outside the checkout**: the build, the guides and the docstring
  examples run with their home, caches, temporary files and Cadence's run keys in a folder
  beside the output (``docs/_build/.build-home``), removed when the build ends: a guide
  that trains leaves no signing key in ``~/.local/share/cadence``.
"""

from __future__ import annotations

import builtins
import importlib
import inspect
import json
import os
import pkgutil
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, TypeVar

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.ext.napoleon.docstring import GoogleDocstring
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging
from sphinx.util.nodes import make_refnode

logger = logging.getLogger(__name__)

PACKAGE = "cadence"  # the ``cadence_docs_package`` config value (another package in the tests)
NOT_RUN = "# not run:"
GUIDE_TIMEOUT_S = 600
DOCTEST_TIMEOUT_S = 1800


# ----------------------------------------------------------------------------- modules
def public_modules() -> list[str]:
    """Every module of the package whose dotted name has no part starting with ``_``."""
    package = importlib.import_module(PACKAGE)
    names = [PACKAGE]
    for info in pkgutil.walk_packages(package.__path__, PACKAGE + "."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            names.append(info.name)
    return sorted(names)


def is_package(module: Any) -> bool:
    return hasattr(module, "__path__")


def _private_home(value: Any) -> bool:
    return any(part.startswith("_") for part in (getattr(value, "__module__", None) or "").split("."))


def defined_here(module: Any) -> list[tuple[str, Any]]:
    """The public classes and functions documented on ``module``'s page: those whose home is
    ``module``, and those it exports from a private module."""
    exported = set(getattr(module, "__all__", ()))
    return [
        (name, value) for name, value in sorted(vars(module).items())
        if not name.startswith("_") and (inspect.isclass(value) or inspect.isfunction(value))
        and (getattr(value, "__module__", None) == module.__name__ or (name in exported and _private_home(value)))
    ]


def _documented_upstream(cls: type, name: str) -> bool:
    return any(inspect.getdoc(getattr(base, name, None)) for base in cls.__mro__[1:] if name in vars(base))


def undocumented(module: Any) -> list[str]:
    """The public names of ``module`` (itself, its classes, functions and methods) without a docstring."""
    missing = [] if (module.__doc__ or "").strip() else [module.__name__]
    for name, value in defined_here(module):
        if not (value.__doc__ or "").strip():
            missing.append(f"{module.__name__}.{name}")
        if not inspect.isclass(value):
            continue
        for attr, member in vars(value).items():
            if attr.startswith("_"):
                continue
            function = member if isinstance(member, property) else getattr(member, "__func__", member)
            if not (inspect.isfunction(function) or isinstance(member, property)):
                continue
            if not (function.__doc__ or "").strip() and not _documented_upstream(value, attr):
                missing.append(f"{module.__name__}.{name}.{attr}")
    return missing


# --------------------------------------------------------------------------- API pages
def _title(text: str) -> str:
    return f"{text}\n{'=' * len(text)}\n"


def module_page(name: str, modules: list[str]) -> str:
    """The reST of one module's API page (``modules``: every public module)."""
    module = importlib.import_module(name)
    lines = [_title(name), f".. automodule:: {name}", "   :members:", "   :ignore-module-all:",
             "   :show-inheritance:", ""]
    exported = [item for item in getattr(module, "__all__", []) if getattr(module, item, None) is not None]
    listed: list[str] = []
    for item in exported:
        value = getattr(module, item)
        home = getattr(value, "__module__", None) or ""
        if not (inspect.isclass(value) or inspect.isfunction(value)) or not home.startswith(PACKAGE):
            listed.append(f"* ``{item}``")
        elif _private_home(value):  # documented here
            lines += [f".. auto{'class' if inspect.isclass(value) else 'function'}:: {name}.{item}", ""]
        elif home != name:
            listed.append(f"* :py:obj:`{item} <{home}.{value.__qualname__}>`")
    if is_package(module) and listed:
        lines += [".. rubric:: Exports", "", *listed, ""]
    children = sorted(child for child in modules if child.rpartition(".")[0] == name)
    if children:
        lines += [".. rubric:: Modules", "", ".. toctree::", "   :maxdepth: 1", ""]
        lines += [f"   {child}" for child in children] + [""]
    return "\n".join(lines)


def write_api_pages(app: Sphinx) -> None:
    """Writes ``api/`` (one page per public module) and reports undocumented names."""
    folder = Path(app.srcdir) / "api"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    modules = public_modules()
    for name in modules:
        (folder / f"{name}.rst").write_text(module_page(name, modules))
        for missing in undocumented(importlib.import_module(name)):
            logger.warning(f"undocumented public name: {missing}", type="cadence", subtype="undocumented")
    roots = [name for name in modules if name.count(".") == 1]
    (folder / "index.rst").write_text(
        _title("API reference") + "\nOne page per public module, generated from the docstrings.\n\n"
        + f".. toctree::\n   :maxdepth: 1\n\n   {PACKAGE}\n" + "".join(f"   {name}\n" for name in roots)
    )


# ----------------------------------------------------------------------- references
def _is_private(target: str) -> bool:
    return any(part.startswith("_") for part in target.split("."))


def _lookup(target: str) -> Any:
    """The object a dotted name names: its longest importable module, then attributes."""
    parts = target.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            value = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                value = getattr(value, attr)
        except AttributeError:
            return None
        return value
    return None


def _home_of(target: str) -> str | None:
    """The documented home of a full name that a package re-exports (``cadence.modules.MLP``,
    ``cadence.checkpoint.Checkpoint.load``)."""
    value = _lookup(target)
    home = getattr(value, "__module__", None)
    qualname = getattr(value, "__qualname__", None)
    return f"{home}.{qualname}" if home and qualname else None


def _is_type_variable(target: str) -> bool:
    return isinstance(_lookup(target), TypeVar)


# which documented object types each Python role may point at
_ROLE_TYPES = {
    "class": {"class", "exception"}, "exc": {"exception", "class"}, "func": {"function"},
    "meth": {"method", "classmethod", "staticmethod", "property"}, "attr": {"attribute", "property", "data"},
    "data": {"data", "attribute"}, "mod": {"module"},
}


def _suffix_candidates(objects: Any, target: str, role: str) -> list[str]:
    """The documented Cadence objects whose names end with ``.target``, of a type the role takes."""
    if "." not in target and hasattr(builtins, target):
        return []  # ``set``, ``dict``: Python's, not a method that happens to share the name
    kinds = _ROLE_TYPES.get(role)
    return [full for full, entry in objects.items()
            if full.endswith("." + target) and full.startswith(PACKAGE) and (kinds is None or entry.objtype in kinds)]


def _nearest(candidates: list[str], here: str) -> str:
    """The candidate sharing the longest module prefix with ``here`` (the shortest name on a tie)."""
    def shared_prefix(full: str) -> int:
        return len(os.path.commonprefix([full.split("."), here.split(".")]))

    return max(candidates, key=lambda full: (shared_prefix(full), -full.count(".")))


class PreferNearest(SphinxPostTransform):
    """A short name that several documented objects end with (two ``CheckpointError``s) is
    pointed at the one nearest to where it is written, before the Python domain would pick
    one at random with a warning. Names the current module or class resolves are left alone."""

    default_priority = 5  # before the references are resolved (10)

    def run(self, **kwargs: Any) -> None:
        objects = self.env.get_domain("py").objects
        for node in self.document.findall(addnodes.pending_xref):
            target = node.get("reftarget", "")
            if node.get("refdomain") != "py" or not target or target.startswith((PACKAGE + ".", "~", ".")):
                continue
            here, cls = node.get("py:module") or "", node.get("py:class") or ""
            if target in objects or any(f"{prefix}.{target}" in objects for prefix in
                                        (f"{here}.{cls}", here) if prefix):
                continue
            candidates = _suffix_candidates(objects, target, node.get("reftype", ""))
            if len(candidates) > 1:
                node["reftarget"] = _nearest(candidates, here)


def resolve_short_reference(app: Sphinx, env: Any, node: Any, contnode: Any) -> Any:
    """Resolves what the Python domain could not (see the module), or leaves it broken."""
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip(".~")
    if not target:
        return None
    if _is_private(target) or _is_type_variable(target):
        return contnode  # private helpers and type variables are not documented: plain text
    domain = env.get_domain("py")
    if target.startswith(PACKAGE + "."):
        home = _home_of(target)
        candidates = [home] if home in domain.objects else []
    else:
        candidates = _suffix_candidates(domain.objects, target, node.get("reftype", ""))
    if not candidates:
        return None
    best = _nearest(candidates, node.get("py:module") or "")
    entry = domain.objects[best]
    return make_refnode(app.builder, node["refdoc"], entry.docname, entry.node_id, contnode, best)


# ------------------------------------------------------------------------ guides
# Runs in a fresh process per guide: the blocks see only what they import (the build has
# imported every module, JAX's threads included, which a forking ParallelEnv must not see).
_RUNNER = """
import contextlib, io, json, sys, traceback
blocks = json.load(open(sys.argv[1]))
namespace = {"__name__": "__main__"}
results = []
for index, source in enumerate(blocks):
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(source, f"<block {index}>", "exec"), namespace)
    except BaseException:
        results.append({"printed": printed.getvalue(), "error": traceback.format_exc(limit=-4)})
        break
    results.append({"printed": printed.getvalue(), "error": None})
json.dump(results, open(sys.argv[2], "w"))
"""


def run_code_blocks(app: Sphinx, doctree: nodes.document) -> None:
    """Runs a guide's python blocks in order; a failing block is a warning at its line."""
    docname = app.env.docname
    if not docname.startswith("guides/"):
        return
    blocks = [block for block in doctree.findall(nodes.literal_block)
              if block.get("language") in ("python", "python3", "py") and not block.astext().lstrip().startswith(NOT_RUN)]
    if not blocks:
        return
    scratch = Path(tempfile.mkdtemp(prefix="cadence-guide-"))
    try:
        (scratch / "blocks.json").write_text(json.dumps([block.astext() for block in blocks]))
        done = subprocess.run(
            [sys.executable, "-c", _RUNNER, "blocks.json", "results.json"], cwd=scratch, capture_output=True,
            text=True, timeout=GUIDE_TIMEOUT_S, env={**os.environ, "PYTHONPATH": str(Path(app.srcdir).parent)},
        )
        results = json.loads((scratch / "results.json").read_text()) if (scratch / "results.json").exists() else []
    except subprocess.TimeoutExpired:
        logger.warning(f"the guide's code ran past {GUIDE_TIMEOUT_S} s", location=blocks[0], type="cadence",
                       subtype="guide")
        return
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if len(results) < len(blocks) and not (results and results[-1]["error"]):
        logger.warning(f"the guide's code stopped (exit {done.returncode}):\n{done.stderr[-2000:]}",
                       location=blocks[len(results) if len(results) < len(blocks) else 0], type="cadence",
                       subtype="guide")
    for block, result in zip(blocks, results):
        if result["error"]:
            logger.warning(f"a code block failed:\n{result['error']}", location=block, type="cadence",
                           subtype="guide")
            return
        if result["printed"].strip():
            output = nodes.literal_block(result["printed"], result["printed"].rstrip())
            output["language"] = "text"
            output["classes"].append("code-output")
            block.parent.insert(block.parent.index(block) + 1, output)


# ----------------------------------------------------------------- docstring examples
def run_docstring_examples(app: Sphinx) -> None:
    """Runs the package's docstring examples (pytest's doctests, as ``make test`` does); each
    failing one is a warning naming it."""
    if not app.config.cadence_docs_doctests:
        return
    package_dir = Path(importlib.import_module(PACKAGE).__file__).parent
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rf", "--doctest-modules", str(package_dir)],
        cwd=package_dir.parent, capture_output=True, text=True, timeout=DOCTEST_TIMEOUT_S,
    )
    failed = re.findall(r"^FAILED (\S+)", done.stdout, flags=re.M)
    for item in failed:
        logger.warning(f"a docstring example failed: {item}", type="cadence", subtype="doctest")
    if done.returncode not in (0, 5) and not failed:
        logger.warning(f"the docstring examples did not run (pytest exit {done.returncode}):\n{done.stdout[-2000:]}",
                       type="cadence", subtype="doctest")


# ------------------------------------------------------------- attribute docstrings
def _attribute_docstring_as_written(self: GoogleDocstring) -> list[str]:
    """Napoleon reads an attribute's or property's first line as ``type: description``;
    Cadence's open with a sentence (``The reward spec: ...``), whose words are no type.
    Types come from the annotations instead."""
    lines = [*self._dedent(self._consume_to_end())]
    return self._format_field("", "", self.__class__(lines, self._config).lines())


# -------------------------------------------------------------------- signatures
_CLASS_REPR = re.compile(r"<class '([\w.]+)'>")
_OTHER_REPR = re.compile(r"<[^<>]*>")


def readable_signature(app: Sphinx, what: str, name: str, obj: Any, options: Any, signature: str | None,
                       return_annotation: str | None) -> tuple[str | None, str | None] | None:
    """Defaults that print as ``<...>`` (a dataclass's ``<factory>``, a class, a function)
    are not Python, and Sphinx cannot parse a signature holding one: a class becomes its
    name, anything else ``...``."""
    if not signature or "<" not in signature:
        return None
    return _OTHER_REPR.sub("...", _CLASS_REPR.sub(r"\1", signature)), return_annotation


# ------------------------------------------------------------------- performance
_DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
_FENCE = re.compile(r"^```(?:bash|sh)\n.*?^```", flags=re.M | re.S)


def performance_page(readme: str) -> str:
    """The Performance page: per benchmark, its title, the run it reports (the paragraph
    that dates it and names the machine), its commands, tables and plots."""
    out = ["# Performance", "",
           "Generated from the repository's `benchmarks/README.md` when the docs are built: each "
           "benchmark's latest run (when, on which machine, with which command), its tables and plots. "
           "The benchmarks are run by hand; their scripts are in `benchmarks/`.", ""]
    for section in re.split(r"^## ", readme, flags=re.M)[1:]:
        title, _, body = section.partition("\n")
        commands = _FENCE.findall(body)
        paragraphs = re.split(r"\n\s*\n", _FENCE.sub("", body))
        runs = [p.strip() for p in paragraphs if _DATE.search(p) and "machine" in p]
        tables = [p.strip() for p in paragraphs if p.strip().startswith("|")]
        plots = re.findall(r"!\[[^\]]*\]\([^)]+\)", body)
        if not (tables or plots):
            continue
        out += [f"## {title.strip()}", ""]
        out += [text + "\n" for text in runs[:1] + commands + tables]
        out += [re.sub(r"\]\((?!https?:)", "](../benchmarks/", plot) + "\n" for plot in plots]
    return "\n".join(out)


def write_performance_page(app: Sphinx) -> None:
    readme = Path(app.srcdir).parent / "benchmarks" / "README.md"
    (Path(app.srcdir) / "performance.md").write_text(performance_page(readme.read_text()))


def use_package(app: Sphinx, config: Any) -> None:
    global PACKAGE
    PACKAGE = config.cadence_docs_package


# ----------------------------------------------------------------- the build's home
# Ray's sockets live under the temporary folder, and a socket's path holds at most 107 bytes
_LONGEST_TEMPORARY_FOLDER = 40
# what programs write under the user's home, each pointed into the build's own
_HOME_VARIABLES = {
    "HOME": "home", "XDG_DATA_HOME": "home/.local/share", "XDG_CACHE_HOME": "home/.cache",
    "XDG_CONFIG_HOME": "home/.config", "MPLCONFIGDIR": "home/.config/matplotlib", "TORCH_HOME": "home/.cache/torch",
    "CADENCE_KEY_DIR": "run-keys",
}


def isolate_build(app: Sphinx, config: Any) -> None:
    """Points this process's (and so every subprocess's) home, caches, run keys and
    temporary files into a folder beside the build's output, removed when it ends."""
    root = Path(app.outdir).resolve().parent / ".build-home"
    shutil.rmtree(root, ignore_errors=True)
    app.cadence_build_home = [root]  # type: ignore[attr-defined]
    for variable, place in _HOME_VARIABLES.items():
        (root / place).mkdir(parents=True, exist_ok=True)
        os.environ[variable] = str(root / place)
    temporary = root / "tmp"
    if len(str(temporary)) > _LONGEST_TEMPORARY_FOLDER:  # a deep checkout: Ray's sockets need a short path
        temporary = Path(tempfile.mkdtemp(prefix="cadence-docs-"))
        app.cadence_build_home.append(temporary)  # type: ignore[attr-defined]
    temporary.mkdir(parents=True, exist_ok=True)
    os.environ["TMPDIR"] = str(temporary)
    tempfile.tempdir = None  # read TMPDIR again


def remove_build_home(app: Sphinx, exception: Exception | None) -> None:
    for folder in getattr(app, "cadence_build_home", []):
        shutil.rmtree(folder, ignore_errors=True)


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_config_value("cadence_docs_package", "cadence", "env")
    app.add_config_value("cadence_docs_doctests", True, "env")
    app.connect("config-inited", isolate_build)
    app.connect("build-finished", remove_build_home)
    app.connect("config-inited", use_package)
    app.connect("builder-inited", run_docstring_examples)
    GoogleDocstring._parse_attribute_docstring = _attribute_docstring_as_written  # type: ignore[method-assign]
    app.connect("builder-inited", write_api_pages)
    app.connect("builder-inited", write_performance_page)
    app.add_post_transform(PreferNearest)
    app.connect("missing-reference", resolve_short_reference)
    app.connect("doctree-read", run_code_blocks)
    app.connect("autodoc-process-signature", readable_signature)
    return {"version": "1", "parallel_read_safe": False, "parallel_write_safe": True}

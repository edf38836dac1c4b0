"""Sphinx configuration of Cadence's documentation (``make docs``).

Sphinx, not MkDocs: autodoc imports the package and reads the docstrings as they are at
run time (Cadence builds some of its API, the spec properties of an env for one, when a
class is made), napoleon reads their Google-style sections, and ``-W`` with nitpicky
references turns every broken reference into a failed build. The guides are Markdown
(MyST) so that they read like the README; ``_ext/cadence_docs.py`` writes the API pages,
runs the guides' code and generates the Performance page.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent))

project = "Cadence"
author = "The Cadence developers"
copyright = "2026, the Cadence developers"  # noqa: A001 - Sphinx's name

extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "myst_parser", "cadence_docs"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build"]
root_doc = "index"

# autodoc: members in source order, type hints in the signature
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True  # defaults as written in the source
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
napoleon_use_ivar = True  # an Attributes section is a field list, not a second description

myst_heading_anchors = 3

# Every reference must resolve, except into libraries whose docs are not built here
# (the build is offline: no intersphinx inventories).
nitpicky = True
EXTERNAL = (
    "torch", "tensordict", "numpy", "np", "gymnasium", "gym", "typing", "typing_extensions", "collections",
    "pathlib", "os", "enum", "dataclasses", "concurrent", "multiprocessing", "types", "abc", "io", "re",
    "builtins", "contextlib", "functools", "itertools", "logging", "threading", "queue", "argparse", "ray",
    "jax", "jaxlib", "brax", "jumanji", "pettingzoo", "vmas", "pyspiel", "mo_gymnasium", "dm_control",
    "dm_env", "envpool", "chess", "tokenizers", "openml", "meltingpot", "mujoco", "ale_py", "PIL", "wandb",
    "tensorboard", "matplotlib", "tqdm", "hydra", "omegaconf", "easydict", "ding", "packaging", "weakref",
    "warnings", "subprocess", "socket", "selectors", "signal", "tomllib", "json", "hashlib", "hmac", "shutil",
    "tempfile", "datetime", "time", "inspect", "math", "random", "struct", "uuid", "numbers", "copy", "pickle",
    "importlib", "sys", "csv", "zipfile", "tarfile", "gzip", "base64", "textwrap", "string", "operator",
)
# Names of those libraries written bare (annotations that autodoc could not evaluate)
EXTERNAL_BARE = (
    "TensorDictBase", "TensorDict", "LazyStackedTensorDict", "TensorDictModule", "TensorDictModuleBase",
    "TensorDictSequential", "NestedKey", "Module", "Tensor", "Generator", "Space", "Env", "ndarray",
    "Substrate", "ConfigDict",
)
BUILTINS = (
    "int", "float", "str", "bool", "bytes", "bytearray", "complex", "list", "dict", "tuple", "set", "frozenset",
    "type", "object", "None", "NoneType", "Ellipsis", "slice", "range", "callable", "iter", "Exception",
    "BaseException", "ValueError", "TypeError", "KeyError", "RuntimeError", "IndexError", "OSError",
    "NotImplementedError", "ImportError", "AttributeError", "StopIteration", "TimeoutError",
    "FileNotFoundError", "PermissionError", "AssertionError", "ZeroDivisionError", "Warning",
    "UserWarning", "DeprecationWarning", "memoryview", "property", "classmethod", "staticmethod",
)
nitpick_ignore_regex = [
    (r"py:.*", rf"({'|'.join(EXTERNAL)})(\..*)?"),
    (r"py:.*", rf"({'|'.join(BUILTINS + EXTERNAL_BARE)})"),
]

html_theme = "alabaster"
html_title = "Cadence"
html_static_path: list[str] = []

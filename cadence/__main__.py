"""``python -m cadence``: the ``cadence`` command line (see :mod:`cadence.cli`).

``python -m`` puts the current folder first on Python's path, where the ``cadence``
console script does not. It is taken off again here, so that both run the same way: a
module is found in the current folder only where the command means it to be (an env named
``module:Id``; see :func:`cadence.trainers.environments.import_env_module`), and never
because ``cadence eval .`` runs from inside a run folder someone else made.
"""

import os
import sys

if sys.path and not sys.flags.safe_path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

from cadence.cli import main  # noqa: E402 - after the path is set

sys.exit(main())

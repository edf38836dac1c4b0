"""``python -m cadence``: the ``cadence`` command line (see :mod:`cadence.cli`)."""

import sys

from cadence.cli import main

sys.exit(main())

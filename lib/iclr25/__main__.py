"""``python -m iclr25``: the same as the ``iclr25`` command (see :mod:`iclr25.cli`)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())

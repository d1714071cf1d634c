"""`python -m virt_operator`."""

import sys

from .app import main

__all__: list[str] = []

sys.exit(main())

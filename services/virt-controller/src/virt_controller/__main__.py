"""`python -m virt_controller`."""

import sys

from .app import main

__all__: list[str] = []

sys.exit(main())

"""`python -m virt_api`."""

import sys

from .server import main

__all__: list[str] = []

sys.exit(main())

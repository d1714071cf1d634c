"""`python -m virt_exportserver`."""

import sys

from .app import main

__all__: list[str] = []

sys.exit(main())

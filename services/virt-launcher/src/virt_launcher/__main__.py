"""``python -m virt_launcher``: the launcher image's entry point."""

import sys

from virt_launcher.main import main

__all__: list[str] = []

sys.exit(main())

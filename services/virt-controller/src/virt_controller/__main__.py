"""`python -m virt_controller`."""

import sys

from .app import main

sys.exit(main())

"""`python -m virt_handler`."""

import sys

from .app import main

sys.exit(main())

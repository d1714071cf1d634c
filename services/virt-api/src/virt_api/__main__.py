"""`python -m virt_api`."""

import sys

from .server import main

sys.exit(main())

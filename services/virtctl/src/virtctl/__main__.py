"""`python -m virtctl`."""

from virtctl.cli import main

__all__: list[str] = []

raise SystemExit(main())

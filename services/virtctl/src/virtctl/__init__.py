"""The kubevirt-py command line: ``virtctl`` (entry point :func:`virtctl.cli.main`)."""

from virtctl.cli import main
from virtctl.validation import Problem, validate

__all__ = ["Problem", "main", "validate"]

"""Structured JSON logging with context carried in contextvars.

One line per event, JSON, with ``timestamp``, ``level``, ``component``, ``logger`` and
``msg`` (KubeVirt's key for the message), plus whatever is bound in the current
context (e.g. ``namespace``, ``name``, ``uid`` of the object being reconciled).
Context lives in contextvars, so each asyncio task sees its own, and it survives
``asyncio.to_thread`` (but not ``loop.run_in_executor``, which does not copy it).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TextIO

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

__all__ = [
    "DEFAULT_VERBOSITY",
    "LiveVerbosity",
    "bind_context",
    "bound_context",
    "clear_context",
    "configure_logging",
    "get_context",
    "get_logger",
    "level_for_verbosity",
    "set_log_level",
    "unbind_context",
]


def _level_number(level: int | str) -> int:
    if isinstance(level, int):
        return level
    number = logging.getLevelNamesMapping().get(level.upper())
    if number is None:
        valid = ", ".join(sorted(n.lower() for n in logging.getLevelNamesMapping()))
        raise ValueError(f"log level {level!r} is not one of: {valid}")
    return number


def _add_component(component: str | None) -> Processor:
    def processor(_logger: WrappedLogger, _name: str, event: EventDict) -> EventDict:
        if component is not None:
            event.setdefault("component", component)
        return event

    return processor


class _CurrentStderrHandler(logging.StreamHandler[TextIO]):
    """Writes to whatever `sys.stderr` is when a record is emitted, not the one of the
    moment of configuration: a test harness swaps and closes its capture streams, and a
    record logged later must not hit a closed file ("--- Logging error ---")."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
        pass  # always the current sys.stderr


#: Upstream KubeVirt's default log verbosity for every component.
DEFAULT_VERBOSITY = 2


def level_for_verbosity(verbosity: int) -> int:
    """The logging level a klog-style verbosity (0-9) means here.

    Upstream logs errors and warnings at every verbosity, its info lines from 2 (the
    default), and its detail lines (``V(3)``… ``V(9)``) only above that; our services have
    one debug level for all of those, so 4 and above turn it on.
    """
    if verbosity < DEFAULT_VERBOSITY:
        return logging.WARNING
    if verbosity < 4:
        return logging.INFO
    return logging.DEBUG


def set_log_level(level: int | str) -> bool:
    """Change the level `configure_logging` set, live; True if it changed."""
    number = _level_number(level)
    root = logging.getLogger()
    if root.level == number:
        return False
    root.setLevel(number)
    return True


class LiveVerbosity:
    """The level a service logs at: its own flag's, unless the cluster sets a verbosity.

    Services call `apply` with the verbosity the KubeVirt CR gives them (None when it
    gives none) each time the CR changes; the level changes at once, no restart.
    """

    def __init__(self, base_level: int | str) -> None:
        self.base_level = _level_number(base_level)

    def apply(self, verbosity: int | None) -> bool:
        """Log at `verbosity`'s level (None: the base level); True if the level changed."""
        level = self.base_level if verbosity is None else level_for_verbosity(verbosity)
        changed = set_log_level(level)
        if changed:
            logging.getLogger(__name__).warning(
                "log level is now %s (verbosity %s)",
                logging.getLevelName(level).lower(),
                "unset" if verbosity is None else verbosity,
            )
        return changed


def configure_logging(
    level: int | str = "info",
    *,
    component: str | None = None,
    json: bool = True,
    stream: TextIO | None = None,
) -> None:
    """Route structlog and the standard library's logging to ``stream`` (stderr).

    ``json=False`` renders for humans (a terminal); services keep the default.
    Calling it again replaces the previous configuration. Raises ValueError for an
    unknown level name.
    """
    number = _level_number(level)
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True, key="timestamp"),
        _add_component(component),
    ]
    renderer: Processor
    if json:
        renderer = structlog.processors.JSONRenderer(sort_keys=False)
        tail: list[Processor] = [
            structlog.processors.dict_tracebacks,
            structlog.processors.EventRenamer("msg"),
        ]
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=False)
        tail = []

    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            *tail,
            renderer,
        ],
    )
    handler: logging.Handler = (
        logging.StreamHandler(stream) if stream is not None else _CurrentStderrHandler()
    )
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, "_service_kit", False):
            root.removeHandler(old)
    handler._service_kit = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(number)

    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *shared,
            structlog.processors.StackInfoRenderer(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )


def get_logger(name: str | None = None, **initial: Any) -> structlog.stdlib.BoundLogger:
    """A logger named ``name`` (the module, usually) with ``initial`` values bound."""
    logger: structlog.stdlib.BoundLogger = structlog.stdlib.get_logger(name)
    return logger.bind(**initial) if initial else logger


def bind_context(**values: Any) -> None:
    """Add ``values`` to every log line of the current context (task) from now on."""
    structlog.contextvars.bind_contextvars(**values)


def unbind_context(*keys: str) -> None:
    """Remove ``keys`` from the current context."""
    structlog.contextvars.unbind_contextvars(*keys)


def clear_context() -> None:
    """Remove every bound value from the current context."""
    structlog.contextvars.clear_contextvars()


def get_context() -> Mapping[str, Any]:
    """The values bound in the current context."""
    return structlog.contextvars.get_contextvars()


@contextmanager
def bound_context(**values: Any) -> Iterator[None]:
    """Bind ``values`` inside the ``with`` block; the previous values come back after."""
    with structlog.contextvars.bound_contextvars(**values):
        yield

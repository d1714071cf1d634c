"""Progress lines on stderr: what is being built, what is cached, how long each step took."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

__all__ = ["Progress"]


class Progress:
    """Prints `[kv-images] <subject>: <message>` lines; `quiet` keeps only results and errors."""

    def __init__(self, out: TextIO | None = None, verbose: bool = False) -> None:
        self._out = out if out is not None else sys.stderr
        self.verbose = verbose

    def say(self, subject: str, message: str) -> None:
        print(f"[kv-images] {subject}: {message}", file=self._out, flush=True)

    def detail(self, subject: str, line: str) -> None:
        """A line of a tool's own output, shown only when verbose."""
        if self.verbose:
            print(f"[kv-images] {subject}:   | {line}", file=self._out, flush=True)

    @contextmanager
    def step(self, subject: str, message: str) -> Iterator[None]:
        """Announce a step, then say how long it took once it is done."""
        self.say(subject, f"{message} ...")
        start = time.monotonic()
        yield
        self.say(subject, f"{message}: done in {time.monotonic() - start:.1f} s")

"""The hotplug attachment pod's program: hold the hotplugged claims, make a blank one's image.

Upstream's attachment pod only keeps the claims mounted on the VMI's node; virt-handler
then bind-mounts each filesystem claim's ``disk.img`` into the launcher pod. A blank
filesystem claim has no ``disk.img`` yet, so this program (in the launcher image) first
creates the missing ones exactly as the launcher does for its own claim volumes
(`virt_launcher.disks.create_claim_image`: the claim's size within the 10 % toleration,
sparse, O_EXCL|O_NOFOLLOW, mode 0660, owned by the running user), then waits.

Command line (console script ``virt-launcher-attachment``, or
``python3 -m virt_launcher.attachment``)::

    virt-launcher-attachment --volume NAME=DIR [--claim-info NAME=JSON] ...

- ``--volume NAME=DIR`` (repeatable): the VMI volume ``NAME`` is a claim mounted at
  ``DIR`` (absolute, no ``..``); its image is ``DIR/disk.img``.
- ``--claim-info NAME=JSON`` (repeatable, at most one per volume): the volume's
  ``status.volumeStatus[].persistentVolumeClaimInfo`` as JSON (``capacity``,
  ``requests``, ``volumeMode`` ...). Needed only to create a missing image; a claim in
  ``volumeMode: Block`` gets none (virt-handler uses the device).

It prints one JSON line per volume, in command-line order:
``{"volume": NAME, "image": PATH, "created": BOOL, "size": BYTES}`` (for a block claim
``{"volume": NAME, "block": true}``), then blocks until SIGTERM or SIGINT and exits 0.
Exit 2: a bad command line; exit 1: an image that cannot be used or made (the reason on
stderr), before any waiting.
"""

from __future__ import annotations

import argparse
import json
import os
import posixpath
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kubevirt_api import InvalidObjectError, load
from kubevirt_api.models import PersistentVolumeClaimInfo

from virt_launcher.disks import ClaimImageError, create_claim_image

__all__ = ["IMAGE", "AttachmentVolume", "main", "parse_args", "prepare", "wait_for_termination"]

#: A filesystem claim's image, at the claim's root (as in the launcher's own claims).
IMAGE = "disk.img"


@dataclass(frozen=True, slots=True)
class AttachmentVolume:
    """One hotplugged claim the pod holds: where it is mounted and what the VMI says of it."""

    name: str
    directory: str
    info: PersistentVolumeClaimInfo | None = None

    @property
    def image(self) -> str:
        """The claim's ``disk.img``."""
        return posixpath.join(self.directory, IMAGE)


def _pair(option: str, value: str) -> tuple[str, str]:
    name, sep, rest = value.partition("=")
    if not sep or not name or not rest:
        raise ValueError(f"{option} {value!r}: expected NAME=VALUE")
    return name, rest


def parse_args(argv: Sequence[str]) -> list[AttachmentVolume]:
    """The volumes a command line names, in its order. Raises ValueError saying what is wrong."""
    parser = argparse.ArgumentParser(
        prog="virt-launcher-attachment",
        description="Hold hotplugged claims; create a blank filesystem claim's disk.img.",
        exit_on_error=False,
    )
    parser.add_argument("--volume", action="append", default=[], metavar="NAME=DIR")
    parser.add_argument("--claim-info", action="append", default=[], metavar="NAME=JSON")
    try:
        # parse_known_args: Python 3.11's parse_args exits on an unknown argument.
        args, unknown = parser.parse_known_args(list(argv))
    except argparse.ArgumentError as exc:
        raise ValueError(str(exc)) from None
    if unknown:
        raise ValueError(f"unrecognized arguments: {' '.join(unknown)}")
    directories: dict[str, str] = {}
    for value in args.volume:
        name, directory = _pair("--volume", value)
        if name in directories:
            raise ValueError(f"--volume {name}: given twice")
        if not posixpath.isabs(directory) or ".." in directory.split("/"):
            raise ValueError(f"--volume {name}: {directory!r} must be absolute, without '..'")
        directories[name] = posixpath.normpath(directory)
    infos: dict[str, PersistentVolumeClaimInfo] = {}
    for value in args.claim_info:
        name, text = _pair("--claim-info", value)
        if name not in directories:
            raise ValueError(f"--claim-info {name}: no --volume {name}=DIR")
        if name in infos:
            raise ValueError(f"--claim-info {name}: given twice")
        try:
            infos[name] = load(PersistentVolumeClaimInfo, json.loads(text))
        except (ValueError, InvalidObjectError) as exc:
            raise ValueError(
                f"--claim-info {name}: not a persistentVolumeClaimInfo: {exc}"
            ) from None
    if not directories:
        raise ValueError("give at least one --volume NAME=DIR")
    return [AttachmentVolume(n, d, infos.get(n)) for n, d in directories.items()]


def prepare(volumes: Sequence[AttachmentVolume]) -> list[dict[str, object]]:
    """Create every missing image of a filesystem claim; what was found, per volume.

    Raises ClaimImageError (naming the volume) for an image that cannot be used or made.
    """
    report: list[dict[str, object]] = []
    for volume in volumes:
        if volume.info is not None and volume.info.volume_mode == "Block":
            report.append({"volume": volume.name, "block": True})
            continue
        try:
            created = create_claim_image(volume.image, volume.info)
        except ClaimImageError as exc:
            raise ClaimImageError(f"volume {volume.name}: {exc}") from None
        size = os.lstat(volume.image).st_size
        report.append(
            {"volume": volume.name, "image": volume.image, "created": created, "size": size}
        )
    return report


_STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}


def wait_for_termination() -> None:
    """Block until SIGTERM or SIGINT (blocked by `main` first, so none is lost)."""
    signal.sigwait(_STOP_SIGNALS)


def main(argv: Sequence[str] | None = None, wait: Callable[[], None] = wait_for_termination) -> int:
    """Run the program (see the module's docstring); returns the exit status."""
    # Held pending from the start: a SIGTERM while images are made ends the wait at once.
    signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        volumes = parse_args(sys.argv[1:] if argv is None else argv)
    except ValueError as exc:
        print(f"virt-launcher-attachment: {exc}", file=sys.stderr)
        return 2
    try:
        report = prepare(volumes)
    except (ClaimImageError, OSError) as exc:
        print(f"virt-launcher-attachment: {exc}", file=sys.stderr)
        return 1
    for line in report:
        print(json.dumps(line, sort_keys=True), flush=True)
    wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())

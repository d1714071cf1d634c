"""The hotplug attachment pod's program: hold the hotplugged claims, make a blank one's image.

Upstream's attachment pod only keeps the claims mounted on the VMI's node; virt-handler
then bind-mounts each filesystem claim's ``disk.img`` into the launcher pod. A blank
filesystem claim has no ``disk.img`` yet, so this program (in the launcher image) first
creates the missing ones exactly as the launcher does for its own claim volumes
(`virt_launcher.disks.create_claim_image`: the claim's size within the 10 % toleration,
sparse, O_EXCL|O_NOFOLLOW, mode 0660, owned by the running user), then waits.

A memoryDump volume's claim is held the same way, but virt-handler binds its directory
(not an image) into the launcher, where libvirt writes the dump as the launcher's user:
the program only makes sure that directory is one the running user can write.

Command line (console script ``virt-launcher-attachment``, or
``python3 -m virt_launcher.attachment``)::

    virt-launcher-attachment --volume NAME=DIR [--claim-info NAME=JSON] ...
                             [--dump-dir NAME=DIR] ...

- ``--volume NAME=DIR`` (repeatable): the VMI volume ``NAME`` is a claim mounted at
  ``DIR`` (absolute, no ``..``); its image is ``DIR/disk.img``.
- ``--claim-info NAME=JSON`` (repeatable, at most one per ``--volume``): the volume's
  ``status.volumeStatus[].persistentVolumeClaimInfo`` as JSON (``capacity``,
  ``requests``, ``volumeMode`` ...). Needed only to create a missing image; a claim in
  ``volumeMode: Block`` gets none (virt-handler uses the device).
- ``--dump-dir NAME=DIR`` (repeatable): the VMI volume ``NAME`` is a memoryDump volume's
  claim mounted at ``DIR`` (absolute, no ``..``; a NAME is either a ``--volume`` or a
  ``--dump-dir``). No image is made; ``DIR`` must be a directory (not a symlink) the
  running user can write: one it owns but cannot write gets ``u+rwx``.

At least one ``--volume`` or ``--dump-dir`` is needed. It prints one JSON line per
volume, in command-line order: ``{"volume": NAME, "image": PATH, "created": BOOL,
"size": BYTES}`` (for a block claim ``{"volume": NAME, "block": true}``, for a dump
directory ``{"volume": NAME, "directory": DIR}``), then blocks until SIGTERM or SIGINT
and exits 0. Exit 2: a bad command line; exit 1: an image that cannot be used or made,
or a dump directory that is missing, not a directory or not writable (the reason on
stderr, naming the volume), before any waiting.
"""

from __future__ import annotations

import argparse
import json
import os
import posixpath
import signal
import stat
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kubevirt_api import InvalidObjectError, load
from kubevirt_api.models import PersistentVolumeClaimInfo

from virt_launcher.disks import ClaimImageError, create_claim_image

__all__ = [
    "IMAGE",
    "AttachmentVolume",
    "DumpDirectoryError",
    "main",
    "parse_args",
    "prepare",
    "wait_for_termination",
]

#: A filesystem claim's image, at the claim's root (as in the launcher's own claims).
IMAGE = "disk.img"


class DumpDirectoryError(Exception):
    """A memoryDump volume's directory cannot take the dump; the message names the volume."""


@dataclass(frozen=True, slots=True)
class AttachmentVolume:
    """One hotplugged claim the pod holds: where it is mounted and what the VMI says of it."""

    name: str
    directory: str
    info: PersistentVolumeClaimInfo | None = None
    #: A memoryDump volume's claim: its directory takes the dump, no image is made.
    memory_dump: bool = False

    @property
    def image(self) -> str:
        """The claim's ``disk.img``."""
        return posixpath.join(self.directory, IMAGE)


def _pair(option: str, value: str) -> tuple[str, str]:
    name, sep, rest = value.partition("=")
    if not sep or not name or not rest:
        raise ValueError(f"{option} {value!r}: expected NAME=VALUE")
    return name, rest


class _InOrder(argparse.Action):
    """Appends (option, value) to one list, so --volume and --dump-dir keep their order."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        getattr(namespace, self.dest).append((option_string, values))


def parse_args(argv: Sequence[str]) -> list[AttachmentVolume]:
    """The volumes a command line names, in its order. Raises ValueError saying what is wrong."""
    parser = argparse.ArgumentParser(
        prog="virt-launcher-attachment",
        description="Hold hotplugged claims; create a blank filesystem claim's disk.img.",
        exit_on_error=False,
    )
    parser.add_argument("--volume", dest="claims", action=_InOrder, default=[], metavar="NAME=DIR")
    parser.add_argument("--dump-dir", dest="claims", action=_InOrder, metavar="NAME=DIR")
    parser.add_argument("--claim-info", action="append", default=[], metavar="NAME=JSON")
    try:
        # parse_known_args: Python 3.11's parse_args exits on an unknown argument.
        args, unknown = parser.parse_known_args(list(argv))
    except argparse.ArgumentError as exc:
        raise ValueError(str(exc)) from None
    if unknown:
        raise ValueError(f"unrecognized arguments: {' '.join(unknown)}")
    directories: dict[str, str] = {}
    given: dict[str, str] = {}  # the option each name came with
    for option, value in args.claims:
        name, directory = _pair(option, value)
        if name in given:
            first = given[name]
            twice = "given twice" if first == option else f"already given as {first}"
            raise ValueError(f"{option} {name}: {twice}")
        if not posixpath.isabs(directory) or ".." in directory.split("/"):
            raise ValueError(f"{option} {name}: {directory!r} must be absolute, without '..'")
        directories[name] = posixpath.normpath(directory)
        given[name] = option
    infos: dict[str, PersistentVolumeClaimInfo] = {}
    for value in args.claim_info:
        name, text = _pair("--claim-info", value)
        if given.get(name) == "--dump-dir":
            raise ValueError(f"--claim-info {name}: a --dump-dir gets no image, nor claim info")
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
        raise ValueError("give at least one --volume NAME=DIR or --dump-dir NAME=DIR")
    return [
        AttachmentVolume(n, d, infos.get(n), memory_dump=given[n] == "--dump-dir")
        for n, d in directories.items()
    ]


_WRITABLE = os.W_OK | os.X_OK


def _prepare_dump_dir(volume: AttachmentVolume) -> None:
    where = f"volume {volume.name}: {volume.directory}"
    try:
        # O_PATH|O_NOFOLLOW pins the directory itself (a link is refused, even one swapped
        # in later); access and chmod then act on that inode through /proc/self/fd.
        fd = os.open(volume.directory, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise DumpDirectoryError(f"{where} does not exist (the claim is not mounted)") from None
    except NotADirectoryError:
        raise DumpDirectoryError(
            f"{where} is not a directory (symlinks are not followed)"
        ) from None
    try:
        pinned = f"/proc/self/fd/{fd}"
        if os.access(pinned, _WRITABLE):
            return
        found = os.fstat(fd)
        if found.st_uid == os.geteuid():
            os.chmod(pinned, stat.S_IMODE(found.st_mode) | stat.S_IRWXU)
            if os.access(pinned, _WRITABLE):
                return
        raise DumpDirectoryError(
            f"{where} is not writable by uid {os.geteuid()} (owner {found.st_uid}, "
            f"mode {stat.S_IMODE(found.st_mode):o}); the memory dump could not be written"
        )
    finally:
        os.close(fd)


def prepare(volumes: Sequence[AttachmentVolume]) -> list[dict[str, object]]:
    """Create every missing image of a filesystem claim and make sure every dump
    directory is writable; what was found, per volume.

    Raises ClaimImageError for an image that cannot be used or made, DumpDirectoryError
    for a dump directory that is missing, not a directory or not writable (both naming
    the volume).
    """
    report: list[dict[str, object]] = []
    for volume in volumes:
        if volume.memory_dump:
            _prepare_dump_dir(volume)
            report.append({"volume": volume.name, "directory": volume.directory})
            continue
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
    except (ClaimImageError, DumpDirectoryError, OSError) as exc:
        print(f"virt-launcher-attachment: {exc}", file=sys.stderr)
        return 1
    for line in report:
        print(json.dumps(line, sort_keys=True), flush=True)
    wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())

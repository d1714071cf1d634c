"""Build Go commands from the Go module proxy once, into a cache keyed by version.

Layout of one build (`<cache>/<name>/<version>/`):

```
src/go.mod, src/go.sum, src/tools.go   a throwaway module that requires the commands
bin/<command>                          the binaries
build.log                              `go build -v` output of the last build
COMPLETE                               JSON marker, written only after a successful build
```

A warm cache (COMPLETE present, every binary there) costs nothing. Builds of the same
cache entry are serialised with a file lock, and a `go build` that some other tool started
in the same src dir is waited for rather than raced.
"""

from __future__ import annotations

import datetime
import fcntl
import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TextIO

__all__ = [
    "BuildError",
    "GoBuild",
    "ensure_built",
    "kubernetes_build",
]

MARKER = "COMPLETE"
# Seconds between progress lines: often on a terminal (one line, rewritten), rarely in logs.
_REPORT_EVERY_TTY = 1.0
_REPORT_EVERY = 15.0


class BuildError(RuntimeError):
    """The Go toolchain is missing or a build step failed (the message says which and where)."""


@dataclass(frozen=True)
class GoBuild:
    """What to build: a module requiring `requires`, building `packages` into bin/."""

    name: str
    version: str
    requires: tuple[tuple[str, str], ...]
    packages: tuple[str, ...]
    ldflags: str = "-s -w"
    # Go build tags (`-tags`), e.g. to leave out parts of a command the cluster never uses.
    tags: tuple[str, ...] = ()
    # Computes go.mod `replace` lines once the required modules are downloaded.
    replaces: Callable[[], list[str]] | None = field(default=None, compare=False)
    module: str = "kubevirtpy.local/build"

    @property
    def binaries(self) -> tuple[str, ...]:
        return tuple(pkg.rsplit("/", 1)[-1] for pkg in self.packages)

    def root(self, cache_dir: Path) -> Path:
        return cache_dir / self.name / self.version

    def bin_dir(self, cache_dir: Path) -> Path:
        return self.root(cache_dir) / "bin"

    def binary(self, cache_dir: Path, command: str) -> Path:
        """The path of one built command (it exists once `ensure_built` returned)."""
        if command not in self.binaries:
            raise KeyError(f"{command} is not built by {self.name}; known: {self.binaries}")
        return self.bin_dir(cache_dir) / command

    def is_complete(self, cache_dir: Path) -> bool:
        """True when the marker is there and every binary exists and is executable."""
        root = self.root(cache_dir)
        if not (root / MARKER).is_file():
            return False
        return all(os.access(self.bin_dir(cache_dir) / b, os.X_OK) for b in self.binaries)


def kubernetes_build(version: str) -> GoBuild:
    """kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy at `version`.

    k8s.io/kubernetes replaces its staging modules with local paths; a consumer must
    replace each with the published `k8s.io/<name> v0.<minor>.<patch>` instead.
    """
    match = re.fullmatch(r"v1\.(\d+)\.(\d+)", version)
    if match is None:
        raise BuildError(f"Kubernetes version must look like v1.37.2, not {version!r}")
    minor, patch = match.groups()
    staging_version = f"v0.{minor}.{patch}"

    def replaces() -> list[str]:
        gomod = _download_gomod("k8s.io/kubernetes", version)
        return [f"{mod} => {mod} {staging_version}" for mod in _staging_replaces(gomod.read_text())]

    ldflags = (
        f"-s -w -X k8s.io/component-base/version.gitVersion={version}"
        f" -X k8s.io/component-base/version.gitMajor=1"
        f" -X k8s.io/component-base/version.gitMinor={minor}"
    )
    return GoBuild(
        name="kubernetes",
        version=version,
        requires=(("k8s.io/kubernetes", version),),
        packages=tuple(
            f"k8s.io/kubernetes/cmd/{cmd}"
            for cmd in (
                "kube-apiserver",
                "kube-controller-manager",
                "kube-scheduler",
                "kubelet",
                "kube-proxy",
            )
        ),
        ldflags=ldflags,
        replaces=replaces,
        module="kubevirtpy.local/k8sbuild",
    )


def _staging_replaces(gomod: str) -> list[str]:
    """Module paths that k8s.io/kubernetes's go.mod replaces with ./staging/... paths."""
    return re.findall(r"^\s*(k8s\.io/[\w.-]+)\s*=>\s*\./staging/", gomod, flags=re.MULTILINE)


def _go() -> str:
    for candidate in ("go", "/usr/local/go/bin/go", "/usr/lib/go/bin/go"):
        try:
            subprocess.run([candidate, "version"], check=True, capture_output=True)
        except (OSError, subprocess.CalledProcessError):
            continue
        return candidate
    raise BuildError("the Go toolchain (`go`) is not on PATH; install Go >= 1.26 first")


def _download_gomod(module: str, version: str) -> Path:
    out = subprocess.run(
        [_go(), "mod", "download", "-json", f"{module}@{version}"],
        capture_output=True,
        text=True,
        cwd="/",
    )
    if out.returncode != 0:
        raise BuildError(f"go mod download {module}@{version} failed:\n{out.stdout}{out.stderr}")
    return Path(json.loads(out.stdout)["GoMod"])


def _write_module(spec: GoBuild, src: Path, progress: TextIO) -> None:
    """Write go.mod/tools.go and resolve go.sum, unless an earlier build already did."""
    if (src / "go.mod").is_file() and (src / "go.sum").is_file() and (src / "tools.go").is_file():
        return
    src.mkdir(parents=True, exist_ok=True)
    lines = [f"module {spec.module}", "", "go 1.26.0", ""]
    lines += [f"require {mod} {ver}" for mod, ver in spec.requires]
    replaces = spec.replaces() if spec.replaces else []
    if replaces:
        lines += ["", "replace ("] + [f"\t{r}" for r in replaces] + [")"]
    (src / "go.mod").write_text("\n".join(lines) + "\n")
    imports = "\n".join(f'\t_ "{pkg}"' for pkg in spec.packages)
    package = re.sub(r"\W", "", spec.module.rsplit("/", 1)[-1]) or "build"
    (src / "tools.go").write_text(
        f"//go:build tools\n\npackage {package}\n\nimport (\n{imports}\n)\n"
    )
    print(f"kv-cluster: resolving Go modules for {spec.name} {spec.version}", file=progress)
    tidy = subprocess.run([_go(), "mod", "tidy"], cwd=src, capture_output=True, text=True)
    if tidy.returncode != 0:
        (src / "go.sum").unlink(missing_ok=True)
        raise BuildError(f"go mod tidy in {src} failed:\n{tidy.stderr[-4000:]}")


def _foreign_builds(src: Path) -> list[int]:
    """PIDs of `go build` processes (not ours) whose working directory is `src`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if len(cmd) > 1 and cmd[0].endswith(b"go") and cmd[1] == b"build" and Path(cwd) == src:
            found.append(int(entry.name))
    return found


@contextmanager
def _locked(path: Path, progress: TextIO, what: str) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"kv-cluster: waiting for another build of {what}", file=progress)
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _fmt(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s"


def _count_deps(spec: GoBuild, src: Path) -> int | None:
    out = subprocess.run(
        [
            _go(),
            "list",
            "-deps",
            "-f",
            "{{if not .Standard}}{{.ImportPath}}{{end}}",
            *_tag_flags(spec),
            *spec.packages,
        ],
        cwd=src,
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        return None
    return sum(1 for line in out.stdout.splitlines() if line.strip())


def _tag_flags(spec: GoBuild) -> list[str]:
    return [f"-tags={','.join(spec.tags)}"] if spec.tags else []


def _pump(stream: IO[str], sink: queue.Queue[str | None]) -> None:
    for line in stream:
        sink.put(line)
    sink.put(None)


def _run_build(spec: GoBuild, cache_dir: Path, progress: TextIO) -> float:
    root = spec.root(cache_dir)
    src = root / "src"
    _write_module(spec, src, progress)
    total = _count_deps(spec, src)
    argv = [
        _go(),
        "build",
        "-v",
        "-trimpath",
        f"-ldflags={spec.ldflags}",
        *_tag_flags(spec),
        "-o",
        "../bin/",
        *spec.packages,
    ]
    (root / "bin").mkdir(parents=True, exist_ok=True)
    log_path = root / "build.log"
    print(
        f"kv-cluster: building {spec.name} {spec.version} ({', '.join(spec.binaries)}); "
        f"log: {log_path}",
        file=progress,
    )
    started = time.monotonic()
    compiled = 0
    last_report = started
    tty = progress.isatty()
    every = _REPORT_EVERY_TTY if tty else _REPORT_EVERY
    with log_path.open("w") as log:
        proc = subprocess.Popen(argv, cwd=src, stdout=log, stderr=subprocess.PIPE, text=True)
        assert proc.stderr is not None
        # A reader thread, so progress keeps coming while go links and prints nothing.
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=_pump, args=(proc.stderr, lines), daemon=True).start()
        done = False
        while not done:
            try:
                line = lines.get(timeout=min(every, 1.0) or 0.01)
            except queue.Empty:
                line = ""
            if line is None:
                done = True
            elif line:
                log.write(line)
                if not line.startswith((" ", "\t", "#")) and "/" in line:
                    compiled += 1
            now = time.monotonic()
            if now - last_report >= every and not done:
                last_report = now
                of = f"/{total}" if total else ""
                msg = f"kv-cluster: {spec.name}: {compiled}{of} packages compiled, {_fmt(now - started)}"
                print(("\r" + msg) if tty else msg, end="" if tty else "\n", file=progress)
                progress.flush()
        code = proc.wait()
    if tty:
        print(file=progress)
    elapsed = time.monotonic() - started
    if code != 0:
        tail = log_path.read_text()[-4000:]
        raise BuildError(f"go build of {spec.name} {spec.version} failed (log {log_path}):\n{tail}")
    return elapsed


def ensure_built(spec: GoBuild, cache_dir: Path, progress: TextIO = sys.stderr) -> Path:
    """Return the bin dir of `spec`, building it first unless the cache is complete."""
    if spec.is_complete(cache_dir):
        return spec.bin_dir(cache_dir)
    root = spec.root(cache_dir)
    with _locked(root / ".lock", progress, f"{spec.name} {spec.version}"):
        if spec.is_complete(cache_dir):
            return spec.bin_dir(cache_dir)
        src = root / "src"
        waited = time.monotonic()
        while others := _foreign_builds(src):
            if time.monotonic() - waited < 0.5:
                print(
                    f"kv-cluster: a go build (pid {', '.join(map(str, others))}) is already "
                    f"building in {src}; waiting for it",
                    file=progress,
                )
            time.sleep(5.0)
        (root / MARKER).unlink(missing_ok=True)
        elapsed = _run_build(spec, cache_dir, progress)
        missing = [b for b in spec.binaries if not (spec.bin_dir(cache_dir) / b).is_file()]
        if missing:
            raise BuildError(f"go build finished but {', '.join(missing)} are missing")
        marker = {
            "name": spec.name,
            "version": spec.version,
            "binaries": list(spec.binaries),
            "build_seconds": round(elapsed, 1),
            "finished": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        }
        (root / MARKER).write_text(json.dumps(marker, indent=2) + "\n")
        print(f"kv-cluster: built {spec.name} {spec.version} in {_fmt(elapsed)}", file=progress)
    return spec.bin_dir(cache_dir)

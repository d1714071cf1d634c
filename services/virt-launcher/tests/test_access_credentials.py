"""Access credentials through the guest agent: which ones, what the Secrets hold, and the
deprecated guest-file path for an agent without the ssh commands."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from pathlib import Path

from virt_domain.layout import LauncherLayout
from virt_launcher.access_credentials import (
    AGENT_OFFLINE,
    AgentCredential,
    CredentialKind,
    WantedCredentials,
    agent_credentials,
    propagate,
    read_wanted,
)
from virt_launcher.errors import LibvirtError


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _mount(private: Path, secret: str, files: dict[str, str]) -> None:
    volume = private / "secret" / f"{secret}-access-cred"
    data = volume / "..2026_12_01"
    data.mkdir(parents=True)
    (volume / "..data").symlink_to(data.name)
    for name, text in files.items():
        (data / name).write_text(text)
        (volume / name).symlink_to(f"..data/{name}")


def test_only_agent_propagated_credentials_are_the_launchers() -> None:
    vmi = {
        "spec": {
            "accessCredentials": [
                {
                    "sshPublicKey": {
                        "source": {"secret": {"secretName": "a"}},
                        "propagationMethod": {"qemuGuestAgent": {"users": ["root", "fedora"]}},
                    }
                },
                {
                    "sshPublicKey": {
                        "source": {"secret": {"secretName": "b"}},
                        "propagationMethod": {"noCloud": {}},
                    }
                },
                {
                    "userPassword": {
                        "source": {"secret": {"secretName": "c"}},
                        "propagationMethod": {"qemuGuestAgent": {}},
                    }
                },
                {"userPassword": {"source": {"secret": {"secretName": "d"}}}},
            ]
        }
    }
    assert agent_credentials(vmi) == (
        AgentCredential("a", ("root", "fedora")),
        AgentCredential("c", (), CredentialKind.USER_PASSWORD),
    )
    assert agent_credentials({}) == ()


def test_the_secrets_give_keys_per_user_and_a_password_per_file(tmp_path: Path) -> None:
    layout = LauncherLayout(private_dir=str(tmp_path))
    _mount(tmp_path, "k1", {"a": "ssh-ed25519 A1 a\n\n  ssh-ed25519 A2 b  \n", "b": "ssh-rsa B1"})
    _mount(tmp_path, "k2", {"x": "ssh-ed25519 C1 c\n"})
    _mount(tmp_path, "pw", {"root": "  hunter2\n", "empty": "\n"})
    wanted = read_wanted(
        layout,
        [
            AgentCredential("k1", ("root",)),
            AgentCredential("k2", ("root", "admin")),
            AgentCredential("pw", (), CredentialKind.USER_PASSWORD),
        ],
    )
    assert wanted.keys == {
        "root": ("ssh-ed25519 A1 a", "ssh-ed25519 A2 b", "ssh-rsa B1", "ssh-ed25519 C1 c"),
        "admin": ("ssh-ed25519 C1 c",),
    }
    assert wanted.passwords == {"root": "hunter2"}
    assert wanted.errors == ()


def test_an_unmounted_secret_is_an_error_and_its_users_are_left_alone(tmp_path: Path) -> None:
    layout = LauncherLayout(private_dir=str(tmp_path))
    wanted = read_wanted(layout, [AgentCredential("missing", ("root",))])
    assert wanted.keys == {}
    (error,) = wanted.errors
    assert error.startswith(
        "error occurred while reading the list of secrets files from the base directory "
        f"{tmp_path}/secret/missing-access-cred"
    )


class OldAgent:
    """qemu-ga without the ssh commands: guest-exec and guest-file-* on a fake filesystem."""

    def __init__(self) -> None:
        self.files: dict[str, str] = {}
        self.modes: dict[str, str] = {}
        self.owners: dict[str, str] = {}
        self.commands: list[str] = []
        self._handles: dict[int, tuple[str, str]] = {}
        self._exec: dict[int, Mapping[str, object]] = {}

    async def agent_command(
        self, command: str, arguments: Mapping[str, object] | None = None, wait: int = 10
    ) -> object:
        args = dict(arguments or {})
        self.commands.append(command)
        if command == "guest-ping":
            return {}
        if command == "guest-ssh-add-authorized-keys":
            raise LibvirtError("The command guest-ssh-add-authorized-keys has not been found", 86)
        if command == "guest-exec":
            argv = [str(args["path"]), *[str(a) for a in args["arg"]]]  # type: ignore[attr-defined]
            out = ""
            if argv[:2] == ["getent", "passwd"]:
                out = "fedora:x:1000:1001:Fedora:/home/fedora:/bin/bash\n"
            elif argv[0] == "chmod":
                self.modes[argv[2]] = argv[1]
            elif argv[0] == "chown":
                self.owners[argv[2]] = argv[1]
            pid = len(self._exec) + 1
            self._exec[pid] = {"exited": True, "exitcode": 0, "out-data": _b64(out)}
            return {"pid": pid}
        if command == "guest-exec-status":
            return self._exec[int(args["pid"])]  # type: ignore[call-overload]
        if command == "guest-file-open":
            path, mode = str(args["path"]), str(args["mode"])
            if mode == "r" and path not in self.files:
                raise LibvirtError(f"failed to open file '{path}': No such file or directory", 1)
            handle = len(self._handles) + 100
            self._handles[handle] = (path, mode)
            return handle
        if command == "guest-file-read":
            path, _ = self._handles[int(args["handle"])]  # type: ignore[call-overload]
            data = self.files[path]
            return {"count": len(data), "buf-b64": _b64(data), "eof": True}
        if command == "guest-file-write":
            path, _ = self._handles[int(args["handle"])]  # type: ignore[call-overload]
            self.files[path] = base64.b64decode(str(args["buf-b64"])).decode()
            return {"count": len(self.files[path]), "eof": False}
        if command == "guest-file-close":
            return {}
        raise AssertionError(command)


async def test_an_agent_without_the_ssh_commands_gets_the_file_written() -> None:
    agent = OldAgent()
    wanted = WantedCredentials(keys={"fedora": ("ssh-ed25519 A1 a", "ssh-ed25519 A2 b")})
    result = await propagate(agent, wanted)
    assert result.succeeded
    assert result.deprecated_flow
    path = "/home/fedora/.ssh/authorized_keys"
    assert agent.files[path] == "ssh-ed25519 A1 a\nssh-ed25519 A2 b"
    assert agent.modes == {"/home/fedora/.ssh": "700", path: "600"}
    assert agent.owners == {"/home/fedora/.ssh": "1000:1001", path: "1000:1001"}
    # The same keys again: read, compared, nothing written.
    agent.commands.clear()
    assert (await propagate(agent, wanted)).succeeded
    assert "guest-file-write" not in agent.commands


async def test_an_offline_agent_is_upstreams_message() -> None:
    class Offline:
        async def agent_command(
            self, command: str, arguments: Mapping[str, object] | None = None, wait: int = 10
        ) -> object:
            raise LibvirtError("Guest agent is not responding", 86)

    result = await propagate(Offline(), WantedCredentials(keys={"root": ("k",)}))
    assert (result.succeeded, result.message) == (False, AGENT_OFFLINE)

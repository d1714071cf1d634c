"""nftables through libnftables' JSON API (Debian `libnftables1`), loaded with ctypes.

The same library the `nft` CLI and Debian's `python3-nftables` use, without a subprocess
and without that package's module (the image's venv does not see Debian's site-packages).
A context talks netlink in the network namespace of the thread that runs the command, so
callers run it from a thread that joined the pod's netns. Blocking: never on the loop.
"""

from __future__ import annotations

import ctypes
import json
from collections.abc import Mapping
from typing import Any

__all__ = ["LIBRARY", "NftablesError", "run"]

LIBRARY = "libnftables.so.1"
_OUTPUT_JSON = 1 << 4  # NFT_CTX_OUTPUT_JSON


class NftablesError(Exception):
    """libnftables is missing or refused a command (the message is nft's)."""


def _load() -> ctypes.CDLL:
    try:
        lib = ctypes.CDLL(LIBRARY)
    except OSError as error:
        raise NftablesError(f"{LIBRARY} is not installed (Debian libnftables1): {error}") from None
    lib.nft_ctx_new.restype = ctypes.c_void_p
    lib.nft_ctx_new.argtypes = [ctypes.c_uint32]
    lib.nft_ctx_free.argtypes = [ctypes.c_void_p]
    lib.nft_ctx_output_set_flags.argtypes = [ctypes.c_void_p, ctypes.c_uint]
    lib.nft_ctx_buffer_output.argtypes = [ctypes.c_void_p]
    lib.nft_ctx_buffer_error.argtypes = [ctypes.c_void_p]
    lib.nft_ctx_get_output_buffer.restype = ctypes.c_char_p
    lib.nft_ctx_get_output_buffer.argtypes = [ctypes.c_void_p]
    lib.nft_ctx_get_error_buffer.restype = ctypes.c_char_p
    lib.nft_ctx_get_error_buffer.argtypes = [ctypes.c_void_p]
    lib.nft_run_cmd_from_buffer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.nft_run_cmd_from_buffer.restype = ctypes.c_int
    return lib


_LIB: ctypes.CDLL | None = None


def run(command: str | Mapping[str, Any]) -> Any:
    """Run one command (nft syntax, or a JSON batch as a mapping) in this thread's netns.

    A JSON batch is one transaction: all of it applies or none. Returns the JSON output
    decoded (None when the command prints nothing). Raises NftablesError.
    """
    global _LIB
    if _LIB is None:
        _LIB = _load()
    lib = _LIB
    # The context (and its netlink socket) is made here, in the caller's thread and netns.
    ctx = lib.nft_ctx_new(0)
    if not ctx:
        raise NftablesError("nft_ctx_new failed")
    try:
        lib.nft_ctx_output_set_flags(ctx, _OUTPUT_JSON)
        lib.nft_ctx_buffer_output(ctx)
        lib.nft_ctx_buffer_error(ctx)
        text = command if isinstance(command, str) else json.dumps(command)
        rc = lib.nft_run_cmd_from_buffer(ctx, text.encode())
        out = (lib.nft_ctx_get_output_buffer(ctx) or b"").decode()
        err = (lib.nft_ctx_get_error_buffer(ctx) or b"").decode()
    finally:
        lib.nft_ctx_free(ctx)
    if rc != 0:
        raise NftablesError(err.strip() or f"nft failed ({rc})")
    return json.loads(out) if out.strip() else None

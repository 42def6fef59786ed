"""Bounded, safe access to one session log file, shared by every reader.

Session logs are untrusted input. Whatever a file holds, reading it costs at most
MAX_LOG_BYTES of log data (plain size, or decompressed size for `.zst`/`.zstd`): a larger log,
or a zstd bomb, is a SessionReadError for that session alone. Only regular files are read:
discovery skips FIFOs, folders, sockets and symlink loops named like session files (with a
warning), and opening never blocks on a FIFO swapped in after discovery.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable
from pathlib import Path

from dsh_memory.errors import SessionReadError

MAX_LOG_BYTES = 128 * 1024 * 1024  # per session log, after decompression
_MIB = 1024 * 1024
# Compressed bytes fed to the decoder per call. One zstd byte can stand for ~128 KiB (RLE
# blocks), so a small feed keeps every single decoder output small enough to check the cap.
_ZSTD_FEED = 512

log = logging.getLogger("dsh_memory.readers")


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def regular_stat(entry: os.DirEntry[str]) -> os.stat_result | None:
    """The stat of a session-file candidate (symlinks followed) when it is a regular file; else
    None, with a warning naming it (FIFO, directory, socket, symlink loop, vanished)."""
    try:
        st = entry.stat()
    except OSError as exc:
        log.warning("%s: skipped: not a regular file (%s)", entry.path, exc.strerror or exc)
        return None
    if not stat.S_ISREG(st.st_mode):
        log.warning("%s: skipped: not a regular file (%s)", entry.path, _kind(st.st_mode))
        return None
    return st


def _over_cap(size: int, what: str) -> str:
    return f"{what} {size / _MIB:.0f} MB exceeds the {MAX_LOG_BYTES // _MIB} MB cap per session log"


def read_log_bytes(path: Path) -> bytes:
    """The bytes of one log file, refusing what is not a regular file or is over the cap."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise SessionReadError(path, f"cannot read file: {exc.strerror or exc}") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SessionReadError(path, f"not a regular file ({_kind(st.st_mode)})")
        if st.st_size > MAX_LOG_BYTES:
            raise SessionReadError(path, _over_cap(st.st_size, "log size"))
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(MAX_LOG_BYTES + 1)
    except OSError as exc:
        raise SessionReadError(path, f"cannot read file: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)
    if len(data) > MAX_LOG_BYTES:  # grew while being read
        raise SessionReadError(path, _over_cap(len(data), "log size"))
    return data


def decompress_zstd(path: Path, data: bytes, *, keep_torn_tail: bool, warn: Callable[[str], None]) -> bytes:
    """Concatenated independent zstd frames → their bytes, at most MAX_LOG_BYTES in all.

    A corrupt frame ends the data (what came before is kept; a corrupt first frame is an error).
    A torn last frame is dropped, or with `keep_torn_tail` its decoded prefix is kept (JSONL
    readers then drop the incomplete last line). Over the cap: SessionReadError, whatever the
    compression ratio (the decoder is fed a few hundred bytes at a time).
    """
    import zstandard

    dctx = zstandard.ZstdDecompressor()
    out: list[bytes] = []
    total = pos = frames = 0
    while pos < len(data):
        dobj = dctx.decompressobj()
        parts: list[bytes] = []
        complete = False
        while pos < len(data):
            feed = data[pos : pos + _ZSTD_FEED]
            pos += len(feed)
            try:
                chunk = dobj.decompress(feed)
            except zstandard.ZstdError as exc:
                if frames == 0:
                    raise SessionReadError(path, f"not a valid zstd stream: {exc}") from exc
                warn(f"zstd frame {frames + 1} is corrupt ({exc}); it and everything after it dropped")
                return b"".join(out)
            total += len(chunk)
            if total > MAX_LOG_BYTES:
                raise SessionReadError(path, _over_cap(total, "decompressed size (so far)") + " (a zstd bomb?)")
            parts.append(chunk)
            if dobj.eof:
                pos -= len(dobj.unused_data)  # the next frame starts inside this feed
                complete = True
                break
        if not complete:
            if keep_torn_tail and (frames or any(parts)):
                out.append(b"".join(parts))
                warn(f"zstd frame {frames + 1} is truncated (torn tail); kept its complete lines")
            elif frames == 0:
                raise SessionReadError(path, "no complete zstd frame (torn or truncated file)")
            else:
                warn(f"torn zstd tail: incomplete last frame dropped (frame {frames + 1})")
            break
        out.append(b"".join(parts))
        frames += 1
    return b"".join(out)

"""Bounded, safe access to one session log file, shared by every reader.

Session logs are untrusted input. Whatever a file holds, reading it costs at most
MAX_LOG_BYTES of log data (plain size, or decompressed size for `.zst`/`.zstd`): a larger log,
or a zstd bomb, is a SessionReadError for that session alone. Reading holds a bounded window,
never the whole file: `LogLines` yields one line at a time from 1 MiB reads, a `.zst` log is
decoded twice as a stream (once to check the cap and find its intact frames, decoding to
nothing, then to yield them), and a line over MAX_LINE_BYTES is skipped as it streams by.
Only regular files are read: discovery skips FIFOs, folders, sockets and symlink loops named
like session files (with a warning), and opening never blocks on a FIFO swapped in after
discovery.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, suppress
from pathlib import Path
from typing import BinaryIO

from dsh_memory.errors import SessionReadError

MAX_LOG_BYTES = 128 * 1024 * 1024  # per session log, after decompression
MAX_LINE_BYTES = 64 * 1024 * 1024  # per line; a longer line is skipped with a warning
_MIB = 1024 * 1024
_READ = _MIB  # bytes read from the file per call
# Compressed bytes fed to the decoder per call. One zstd byte can stand for ~128 KiB (RLE
# blocks), so a small feed keeps every single decoder output small (≤ 4 MiB).
_ZSTD_FEED = 128
_FRAME_END = None
_TORN = "torn"

log = logging.getLogger("dsh_memory.readers")


def _kind(mode: int) -> str:
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def scandir(path: str | os.PathLike) -> list[os.DirEntry[str]]:
    """The entries of a folder; none when it cannot be listed."""
    try:
        with os.scandir(path) as it:
            return list(it)
    except OSError:
        return []


def is_dir(entry: os.DirEntry[str], follow_symlinks: bool = True) -> bool:
    try:
        return entry.is_dir(follow_symlinks=follow_symlinks)
    except OSError:
        return False


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


class LogLines(AbstractContextManager):
    """The lines of one log file, read a bounded window at a time. Use as a context manager.

    Opening refuses what is not a regular file, a plain log over the cap, and a `.zst` log that
    decodes to more than the cap or whose first frame is corrupt or torn. Iterating yields each
    complete line without its newline; afterwards `count` is how many and `tail` holds the bytes
    after the last newline. `file_size` is the size on disk, `size` the log data to read.

    Frames of a `.zst` log: a corrupt frame ends the data (what came before is kept); a torn last
    frame is dropped, or with `keep_torn_tail` its decoded prefix is kept (JSONL readers then
    drop the incomplete last line). Problems that do not refuse the log go to `warn`.
    """

    def __init__(self, path: Path, *, zstd: bool, keep_torn_tail: bool, warn: Callable[[str], None]):
        self.path, self.zstd, self.warn = path, zstd, warn
        self.count, self.tail = 0, b""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:
            raise SessionReadError(path, f"cannot read file: {exc.strerror or exc}") from exc
        self._fh: BinaryIO = os.fdopen(fd, "rb")
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise SessionReadError(path, f"not a regular file ({_kind(st.st_mode)})")
            self.file_size = st.st_size
            if not zstd and st.st_size > MAX_LOG_BYTES:
                raise SessionReadError(path, _over_cap(st.st_size, "log size"))
            self.size = self._scan(keep_torn_tail) if zstd and st.st_size else st.st_size
        except OSError as exc:
            self._fh.close()
            raise SessionReadError(path, f"cannot read file: {exc.strerror or exc}") from exc
        except BaseException:
            self._fh.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self._fh.close()

    def __iter__(self) -> Iterator[bytes]:
        parts: list[bytes] = []
        pending = 0  # bytes in parts; -1 while skipping an over-long line
        for chunk in self._chunks():
            start = 0
            while (nl := chunk.find(b"\n", start)) >= 0:
                self.count += 1
                if pending < 0:
                    yield b""  # the skipped line keeps its number
                else:
                    yield b"".join((*parts, chunk[start:nl])) if parts else chunk[start:nl]
                parts, pending, start = [], 0, nl + 1
            if start < len(chunk) and pending >= 0:
                parts.append(chunk[start:])
                pending += len(chunk) - start
                if pending > MAX_LINE_BYTES:
                    self.warn(f"line {self.count + 1}: skipped: longer than {MAX_LINE_BYTES // _MIB} MB")
                    parts, pending = [], -1
        self.tail = b"".join(parts)

    def _chunks(self) -> Iterator[bytes]:
        self._fh.seek(0)
        if self.zstd:
            yield from self._decoded(self.size)
            return
        total = 0
        while chunk := self._fh.read(_READ):
            total += len(chunk)
            if total > MAX_LOG_BYTES:  # grew while being read
                raise SessionReadError(self.path, _over_cap(total, "log size"))
            yield chunk

    def _scan(self, keep_torn_tail: bool) -> int:
        """Decode to nothing: refuse over the cap; the decoded bytes to keep."""
        import zstandard

        total = kept = frames = 0
        try:
            for piece in _zstd_pieces(self._fh):
                if piece is _FRAME_END:
                    frames, kept = frames + 1, total
                elif piece is _TORN:
                    if keep_torn_tail and (frames or total):
                        self.warn(f"zstd frame {frames + 1} is truncated (torn tail); kept its complete lines")
                        return total
                    if frames == 0:
                        raise SessionReadError(self.path, "no complete zstd frame (torn or truncated file)")
                    self.warn(f"torn zstd tail: incomplete last frame dropped (frame {frames + 1})")
                else:
                    total += len(piece)
                    if total > MAX_LOG_BYTES:
                        what = _over_cap(total, "decompressed size (so far)")
                        raise SessionReadError(self.path, what + " (a zstd bomb?)")
        except zstandard.ZstdError as exc:
            if frames == 0:
                raise SessionReadError(self.path, f"not a valid zstd stream: {exc}") from exc
            self.warn(f"zstd frame {frames + 1} is corrupt ({exc}); it and everything after it dropped")
        return kept

    def _decoded(self, keep: int) -> Iterator[bytes]:
        """The first `keep` decoded bytes, as `_scan` found them."""
        import zstandard

        with suppress(zstandard.ZstdError):
            for piece in _zstd_pieces(self._fh):
                if keep <= 0:
                    return
                if isinstance(piece, bytes):  # not a frame end or torn mark
                    yield piece[:keep]
                    keep -= len(piece)
        if keep > 0:
            raise SessionReadError(self.path, "file changed while being read")


def _zstd_pieces(fh: BinaryIO) -> Iterator[bytes | str | None]:
    """Decoded bytes of consecutive zstd frames, a bounded piece at a time; _FRAME_END after each
    complete frame, _TORN if the file ends inside one. Raises zstandard.ZstdError when corrupt."""
    import zstandard

    dctx = zstandard.ZstdDecompressor()
    dobj = None
    buf, pos = b"", 0
    while True:
        if pos >= len(buf):
            buf, pos = fh.read(_READ), 0
            if not buf:
                if dobj is not None:
                    yield _TORN
                return
        if dobj is None:
            dobj = dctx.decompressobj()
        feed = buf[pos : pos + _ZSTD_FEED]
        pos += len(feed)
        if piece := dobj.decompress(feed):
            yield piece
        if dobj.eof:
            pos -= len(dobj.unused_data)  # the next frame starts inside this feed
            dobj = None
            yield _FRAME_END

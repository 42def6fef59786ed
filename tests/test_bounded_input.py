"""Bounded input: hostile session logs fail (or shrink) one session with a clear error, never the
run, and `render` stays within 300 MB whatever the log holds.

Hostile files are generated here (zstd bombs, a 50 MB prompt, lone surrogates, FIFOs, folders and
self-links named like session files); peak RSS is read from a fresh parent whose only child is
the `render` command.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
import zstandard

from dsh_memory import readers
from dsh_memory.errors import SessionReadError
from dsh_memory.models import SessionRef
from dsh_memory.readers import dsh as dsh_reader
from dsh_memory.readers._input import MAX_LINE_BYTES, MAX_LOG_BYTES
from dsh_memory.readers._jsonl import read_jsonl
from dsh_memory.settings import SourceRoots
from dsh_memory.transcript.render import MAX_EVENT_CHARS, render_transcript

CLAUDE_ID = "0b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d"
CODEX_ID = "01a2b3c4-d5e6-7f80-9a1b-2c3d4e5f6a7b"
DSH_ID = "7d1e2f3a-4b5c-4d6e-8f7a-9b0c1d2e3f4a"
RSS_LIMIT_KB = 300 * 1024


def _claude_line(text: str, uuid: str = "u1", parent: str | None = None) -> str:
    rec = {
        "parentUuid": parent,
        "isSidechain": False,
        "type": "user",
        "uuid": uuid,
        "sessionId": CLAUDE_ID,
        "cwd": "/home/alice/src/app",
        "timestamp": "2026-10-01T10:00:00.000Z",
        "message": {"role": "user", "content": text},
    }
    return json.dumps(rec)


def _claude_root(tmp_path: Path) -> Path:
    project = tmp_path / "claude" / "projects" / "-home-alice-src-app"
    project.mkdir(parents=True)
    return project


def _zstd_bomb(dst: Path, first_line: str, zeros: int) -> None:
    """`first_line`, then `zeros` NUL bytes, as one zstd frame (a few KB on disk)."""
    cctx = zstandard.ZstdCompressor(level=3)
    with open(dst, "wb") as fh, cctx.stream_writer(fh) as w:
        w.write(first_line.encode() + b"\n")
        chunk = b"\0" * (16 * 1024 * 1024)
        for _ in range(zeros // len(chunk)):
            w.write(chunk)


def _dsh_header() -> str:
    return json.dumps(
        {"type": "session", "version": 4, "id": DSH_ID, "cwd": "/home/alice/src/app", "createdAt": 1792830475102}
    )


def _peak_rss_kb(args: list[str], env: dict[str, str]) -> tuple[int, subprocess.CompletedProcess]:
    """Run `dsh-memory *args` under a fresh parent; (peak RSS of that child in KB, its result)."""
    code = (
        "import json, resource, subprocess, sys\n"
        "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "print(json.dumps({'rss': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,"
        " 'rc': p.returncode, 'out': p.stdout[-200000:], 'err': p.stderr[-4000:]}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, sys.executable, "-m", "dsh_memory.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    data = json.loads(out.stdout)
    return data["rss"], subprocess.CompletedProcess(args, data["rc"], data["out"], data["err"])


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSH_", "PREFECT_API"))}
    env.update(
        HOME=str(tmp_path),
        DSH_HOME=str(tmp_path / "dsh"),
        CODEX_HOME=str(tmp_path / "codex"),
        CLAUDE_CONFIG_DIR=str(tmp_path / "claude"),
        DSH_MEMORY_ROOT=str(tmp_path / "mem"),
    )
    return env


# ---------------------------------------------------------------- decompression cap


def test_dsh_zstd_bomb_is_one_clear_session_error_within_300_mb(tmp_path):
    sdir = tmp_path / "dsh" / "sessions" / "--home-alice-src-app--" / DSH_ID
    sdir.mkdir(parents=True)
    _zstd_bomb(sdir / "session.v4.jsonl.zstd", _dsh_header(), 1024**3)
    assert (sdir / "session.v4.jsonl.zstd").stat().st_size < 256 * 1024
    (ref,) = readers.discover(SourceRoots(dsh_sessions=tmp_path / "dsh" / "sessions"))
    with pytest.raises(SessionReadError, match="decompressed"):
        readers.load(ref)
    rss, res = _peak_rss_kb(["render", DSH_ID], _env(tmp_path))
    assert res.returncode != 0 and "Traceback" not in res.stderr
    assert "decompressed" in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert rss <= RSS_LIMIT_KB, f"peak RSS {rss // 1024} MB"


def test_codex_zst_bomb_is_a_session_error_and_the_others_still_list(tmp_path):
    day = tmp_path / "codex" / "sessions" / "2026" / "10" / "01"
    day.mkdir(parents=True)
    meta = {"timestamp": "2026-10-01T10:00:00Z", "type": "session_meta", "payload": {"id": CODEX_ID, "cwd": "/x"}}
    _zstd_bomb(day / f"rollout-2026-10-01T10-00-00-{CODEX_ID}.jsonl.zst", json.dumps(meta), 512 * 1024**2)
    project = _claude_root(tmp_path)
    (project / f"{CLAUDE_ID}.jsonl").write_text(_claude_line("please fix the flaky test") + "\n")
    rss, res = _peak_rss_kb(["sessions", "--json"], _env(tmp_path))
    assert res.returncode == 0, res.stderr
    rows = {r["id"]: r for r in json.loads(res.stdout)}
    assert "decompressed" in rows[CODEX_ID]["error"]
    assert rows[CLAUDE_ID]["error"] is None and rows[CLAUDE_ID]["human_prompts"] == 1
    assert rss <= RSS_LIMIT_KB, f"peak RSS {rss // 1024} MB"


def test_plain_log_over_the_cap_is_refused_before_reading(tmp_path):
    project = _claude_root(tmp_path)
    path = project / f"{CLAUDE_ID}.jsonl"
    with open(path, "wb") as fh:
        fh.write(_claude_line("hello").encode() + b"\n")
        fh.truncate(MAX_LOG_BYTES + 1)  # sparse: costs nothing on disk
    (ref,) = readers.discover(SourceRoots(claude_projects=project.parent))
    with pytest.raises(SessionReadError, match="cap"):
        readers.load(ref)


# ---------------------------------------------------------------- per-message cap


def test_a_50_mb_prompt_is_capped_before_tokenizing(tmp_path):
    project = _claude_root(tmp_path)
    big = "deploy " * (50 * 1024 * 1024 // 7)
    lines = [_claude_line("First: run `make test`, not pytest."), _claude_line(big, "u2", "u1")]
    (project / f"{CLAUDE_ID}.jsonl").write_text("\n".join(lines) + "\n")
    rss, res = _peak_rss_kb(["render", CLAUDE_ID, "--json"], _env(tmp_path))
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert "make test" in data["text"] and "characters omitted" in data["text"]
    assert len(data["text"]) < 2 * MAX_EVENT_CHARS + 10_000
    assert rss <= RSS_LIMIT_KB, f"peak RSS {rss // 1024} MB"


def test_event_text_cap_keeps_head_and_tail():
    from dsh_memory.transcript.render import cap_text

    text = "HEAD " + "x" * (MAX_EVENT_CHARS * 2) + " TAIL"
    out = cap_text(text)
    assert out.startswith("HEAD ") and out.endswith(" TAIL") and len(out) < MAX_EVENT_CHARS + 200
    assert "characters omitted" in out
    assert cap_text("short") == "short"


# ---------------------------------------------------------------- lone surrogates


def test_lone_surrogates_are_replaced_not_fatal(tmp_path):
    project = _claude_root(tmp_path)
    line = _claude_line("PLACEHOLDER keep this prompt").replace("PLACEHOLDER", "\\ud800 broken \\udfff")
    (project / f"{CLAUDE_ID}.jsonl").write_text(line + "\n")
    (ref,) = readers.discover(SourceRoots(claude_projects=project.parent))
    transcript = render_transcript(readers.load(ref), budget_tokens=None)
    transcript.text.encode("utf-8")  # strict: no surrogate survives
    assert "\ufffd broken \ufffd keep this prompt" in transcript.text
    res = subprocess.run(
        [sys.executable, "-m", "dsh_memory.cli", "render", CLAUDE_ID],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0 and "keep this prompt" in res.stdout, res.stderr


# ---------------------------------------------------------------- odd files under the roots


@pytest.mark.parametrize("kind", ["fifo", "directory", "self-link"])
def test_non_regular_session_files_are_skipped_with_a_warning(kind, tmp_path, caplog):
    good = _claude_root(tmp_path)
    (good / f"{CLAUDE_ID}.jsonl").write_text(_claude_line("a real prompt") + "\n")
    odd_claude = good / "1a2b3c4d-0000-4000-8000-000000000001.jsonl"
    day = tmp_path / "codex" / "sessions" / "2026" / "10" / "01"
    day.mkdir(parents=True)
    odd_codex = day / f"rollout-2026-10-01T10-00-00-{CODEX_ID}.jsonl"
    odd_dsh = tmp_path / "dsh" / "sessions" / "--p--" / DSH_ID / "session.v4.jsonl"
    odd_dsh.parent.mkdir(parents=True)
    for odd in (odd_claude, odd_codex, odd_dsh):
        if kind == "fifo":
            os.mkfifo(odd)
        elif kind == "directory":
            odd.mkdir()
        else:
            odd.symlink_to(odd.name)
    roots = SourceRoots(
        dsh_sessions=tmp_path / "dsh" / "sessions",
        codex_sessions=tmp_path / "codex" / "sessions",
        claude_projects=good.parent,
    )
    with caplog.at_level(logging.WARNING, logger="dsh_memory.readers"):
        refs = readers.discover(roots)
    assert [r.id for r in refs] == [CLAUDE_ID]
    warned = " ".join(r.getMessage() for r in caplog.records)
    for odd in (odd_claude, odd_codex, odd_dsh):
        assert str(odd) in warned, (odd, warned)
    assert "not a regular file" in warned


# ---------------------------------------------------------------- a bounded window


def _peak_alloc(fn) -> int:
    """Peak bytes Python allocated while `fn()` ran (it may raise)."""
    tracemalloc.start()
    try:
        fn()
    except SessionReadError:
        pass
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


WINDOW = 32 * 1024 * 1024


@pytest.mark.parametrize("reader", ["dsh", "codex"])
def test_a_zstd_bomb_is_refused_without_holding_what_it_decodes_to(reader, tmp_path):
    if reader == "dsh":
        path = tmp_path / "session.v4.jsonl.zstd"
        _zstd_bomb(path, _dsh_header(), MAX_LOG_BYTES + 32 * 1024**2)
        read = lambda: dsh_reader.load(SessionRef(id=DSH_ID, source="dsh", path=path, mtime_ns=0, size=0))  # noqa: E731
    else:
        path = tmp_path / f"rollout-2026-10-01T10-00-00-{CODEX_ID}.jsonl.zst"
        _zstd_bomb(path, json.dumps({"type": "session_meta"}), MAX_LOG_BYTES + 32 * 1024**2)
        read = lambda: read_jsonl(path)  # noqa: E731
    with pytest.raises(SessionReadError, match="decompressed"):
        read()
    peak = _peak_alloc(read)
    assert peak < WINDOW, f"peak {peak / 2**20:.0f} MiB while refusing a zstd bomb"


@pytest.mark.parametrize("compressed", [False, True])
def test_a_large_log_is_read_a_line_at_a_time(compressed, tmp_path):
    """~100 MB of log data, one record in it: reading holds a line, not the file."""
    path = tmp_path / (f"{CLAUDE_ID}.jsonl" + (".zst" if compressed else ""))
    blank = b" " * 1023 + b"\n"
    with open(path, "wb") as raw:
        out = zstandard.ZstdCompressor(level=1).stream_writer(raw) if compressed else raw
        out.write(_claude_line("keep this prompt").encode() + b"\n")
        for _ in range(100):
            out.write(blank * 1024)
        out.close()
    peak = _peak_alloc(lambda: read_jsonl(path))
    result = read_jsonl(path)
    assert [seq for seq, _ in result.records] == [0] and result.last_seq == 100 * 1024
    assert peak < WINDOW, f"peak {peak / 2**20:.0f} MiB reading a 100 MB log"


def test_a_line_over_the_line_cap_is_skipped_and_keeps_its_number(tmp_path):
    path = tmp_path / f"{CLAUDE_ID}.jsonl"
    with open(path, "wb") as fh:
        fh.write(b"x" * (MAX_LINE_BYTES + 1024 * 1024) + b"\n")
        fh.write(_claude_line("after the long line").encode() + b"\n")
    peak = _peak_alloc(lambda: read_jsonl(path))
    result = read_jsonl(path)
    assert [seq for seq, _ in result.records] == [1]
    assert any("line 1: skipped: longer than" in w for w in result.warnings), result.warnings
    assert peak < MAX_LINE_BYTES + WINDOW, f"peak {peak / 2**20:.0f} MiB"


def test_sessions_holds_one_session_at_a_time(tmp_path):
    """`sessions` reads every log: the one it read before is let go before the next is read.
    Three 40 MB logs: a `sessions` that kept each log's session measures about 1.5x one log's peak
    (as with 60 MB logs), well over the 1.3x bound; letting each go measures 1.0x."""
    project = _claude_root(tmp_path)
    for i in range(3):
        sid = f"{i}b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d"
        line = _claude_line("x" * 2000).replace(CLAUDE_ID, sid)
        with open(project / f"{sid}.jsonl", "w") as fh:
            fh.write((line + "\n") * (40 * 1024 * 1024 // (len(line) + 1)))
    one, _ = _peak_rss_kb(["sessions", "--json"], _env(tmp_path))
    for i in range(1, 3):
        (project / f"{i}b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d.jsonl").unlink()
    alone, res = _peak_rss_kb(["sessions", "--json"], _env(tmp_path))
    assert res.returncode == 0, res.stderr
    assert one < alone * 1.3, f"three logs: {one >> 10} MB, one alone: {alone >> 10} MB"

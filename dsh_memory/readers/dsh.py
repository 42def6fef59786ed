"""DSH (DeepSeek Harness) session reader.

Layout: `$DSH_HOME/sessions/<project>/<encoded session id>/session[.vN].jsonl[.zstd]`
(reference/dsh-session-format.md sections 1-3). `discover` only lists directories and stats the
picked file; `load` reads one file, validates its header and hands the body to `dsh_events.parse_body`.
A session id is a key everywhere downstream (state, run names, file names, the model's prompt), so
an id with the shape of a secret is refused: its directory is not listed, its header not read.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from dsh_memory.errors import SessionReadError
from dsh_memory.models import Session, SessionRef
from dsh_memory.readers._input import LogLines, is_dir, regular_stat, scandir
from dsh_memory.readers._jsonl import as_str
from dsh_memory.readers.dsh_events import parse_body
from dsh_memory.readers.dsh_records import Warnings, ms_to_datetime
from dsh_memory.transcript.redact import contains_secret

GENERATION_RE = re.compile(r"^session(?:\.v(\d+))?\.jsonl(?:\.zstd)?$")
KNOWN_MAX_VERSION = 4
MAX_SAFE_INTEGER = 2**53 - 1
_ESCAPE_RUN = re.compile(r"(?:~[0-9A-Fa-f]{4})+")


def decode_segment(name: str) -> str:
    """Invert DSH `encodeSegment`: every `~XXXX` is one UTF-16 code unit (hex); a run of them is
    decoded as one, so that a surrogate pair becomes its character."""
    return _ESCAPE_RUN.sub(lambda m: bytes.fromhex(m[0].replace("~", "")).decode("utf-16-be", "surrogatepass"), name)


def _pick(session_dir: str) -> tuple[str, os.stat_result] | None:
    """(path, stat) of the highest generation file in one session directory (decoys such as
    session.v5.jsonl.bak and older generations are not picked)."""
    found = []
    for entry in scandir(session_dir):
        if not entry.name.startswith("session") or (st := regular_stat(entry)) is None:
            continue
        if m := GENERATION_RE.match(entry.name):  # else a decoy
            found.append(((int(m.group(1) or 0), entry.name.endswith(".zstd")), entry.path, st))
    best = max(found, key=lambda f: f[0], default=None)
    return None if best is None else best[1:]


def discover(root: Path) -> list[SessionRef]:
    """One ref per session directory under `root` (= `$DSH_HOME/sessions`), highest generation."""
    found: list[tuple[str, os.stat_result, str]] = []
    for project in scandir(root):
        if not is_dir(project):
            continue
        for session_dir in scandir(project.path):
            picked = _pick(session_dir.path) if is_dir(session_dir) else None
            if picked is not None and not contains_secret(decode_segment(session_dir.name)):
                found.append((*picked, session_dir.name))
    found.sort(key=lambda item: item[0])
    construct = SessionRef.model_construct  # stat-only facts we built ourselves: skip validation
    return [
        construct(id=decode_segment(name), source="dsh", path=Path(path), size=st.st_size, mtime_ns=st.st_mtime_ns)
        for path, st, name in found
    ]


def _describe(value: object) -> str:
    kind = {str: "a string", bool: "a boolean", float: "a number", list: "a list", dict: "an object"}
    return f"{kind.get(type(value), type(value).__name__)} ({str(value)[:40]!r})"


def _parse_header(path: Path, raw: bytes) -> dict:
    try:
        header = json.loads(raw.decode("utf-8", errors="replace"))
    except (ValueError, RecursionError):
        raise SessionReadError(path, "invalid header (line 1): not JSON") from None
    if not isinstance(header, dict):
        raise SessionReadError(path, "invalid header (line 1): not a JSON object")
    problems = []
    if header.get("type") != "session":
        problems.append(f"type is {str(header.get('type'))[:40]!r}, expected 'session'")
    sid = header.get("id")
    if sid is None:
        problems.append("missing id")
    elif not isinstance(sid, str) or not sid:
        problems.append(f"id is {_describe(sid)}, expected a non-empty string")
    elif contains_secret(sid):
        problems.append("id has the shape of a secret")
    version = header.get("version")
    if version is None:
        problems.append("missing version")
    elif _opt_int(version) is None:
        problems.append(f"version is {_describe(version)}, expected an integer >= 0")
    created = header.get("createdAt")
    if isinstance(created, float) and created.is_integer():
        created = int(created)
    if created is None:
        problems.append("missing createdAt")
    elif _opt_int(created) is None or created > MAX_SAFE_INTEGER or ms_to_datetime(created) is None:
        problems.append(f"createdAt is not epoch ms: {_describe(created)}")
    if problems:
        raise SessionReadError(path, "invalid header (line 1): " + "; ".join(problems))
    header["createdAt"] = created
    return header


def _opt_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def load(ref: SessionRef) -> Session:
    """Read one DSH session log. Raises SessionReadError (naming the file) when unreadable."""
    path = Path(ref.path)
    warn = Warnings(str(path))
    with LogLines(path, zstd=path.name.endswith(".zstd"), keep_torn_tail=False, warn=warn.add) as log:
        if not log.file_size:
            raise SessionReadError(path, "empty file (no header line)")
        lines = iter(log)
        first = next(lines, None)
        if first is None or not first.strip():
            raise SessionReadError(path, "no complete header line")
        header = _parse_header(path, first)
        version: int = header["version"]
        meta: dict = {"format_version": version}
        if version > KNOWN_MAX_VERSION:
            warn.add(f"unknown format version {version} (newest known is {KNOWN_MAX_VERSION}); read best-effort")
            meta["unknown_version"] = True

        body = parse_body(
            enumerate(lines, start=2),
            version=version,
            seed_length=_opt_int(header.get("seedLength")),
            is_seeded=header.get("isSeeded") if isinstance(header.get("isSeeded"), bool) else None,
            warn=warn,
        )
        if log.tail.strip():
            warn.add(f"incomplete last line dropped ({len(log.tail)} bytes, no trailing newline)", log.count + 1)
    origin = as_str(header.get("origin")) or None
    depth = _opt_int(header.get("delegationDepth")) or 0
    session_id: str = header["id"]
    if ref.id and ref.id != session_id:
        warn.add(f"header id {session_id!r} differs from the directory name {ref.id!r}; using the header")
    updated = ms_to_datetime(body.max_time_ms) or ms_to_datetime(ref.mtime_ns / 1e6)
    meta.update(
        origin=origin,
        delegation_depth=depth,
        event_count=body.event_count,
        turns=body.turns,
        compactions=body.compactions,
    )
    return Session(
        id=session_id,
        source="dsh",
        path=path,
        cwd=as_str(header.get("cwd")) or None,
        created_at=ms_to_datetime(header["createdAt"]),
        updated_at=updated,
        is_root=not (origin == "subagent" or depth > 0),
        parent_id=as_str(header.get("parentSession")) or None,
        title=body.title,
        format_version=version,
        events=body.events,
        last_seq=body.last_seq,
        inherited_cut=body.inherited_cut,
        warnings=warn.result(),
        meta=meta,
    )

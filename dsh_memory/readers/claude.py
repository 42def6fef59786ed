"""Claude Code transcripts: `$CLAUDE_CONFIG_DIR/projects/<encoded-cwd>/<session-uuid>.jsonl`.

Records carry a top-level `type` (user, assistant, system, attachment, queue-operation, summary,
file-history-snapshot, progress, …): claude_events.py maps them to events, claude_records.py
reads what one record means. The session is the live branch of the `parentUuid` tree: rewound
branches are dropped. Subagent transcripts (`<sessionId>/subagents/agent-*.jsonl`, legacy
`agent-<8hex>.jsonl`) are not sessions.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from dsh_memory.models import Session, SessionRef
from dsh_memory.readers._input import is_dir, regular_stat, scandir
from dsh_memory.readers._jsonl import UUID_RE, prompt_title, read_jsonl
from dsh_memory.readers.claude_events import EventBuilder
from dsh_memory.readers.claude_records import abandoned_records

FILE_RE = re.compile(r"^(?P<id>" + UUID_RE + r")\.jsonl$")


def discover(root: Path) -> list[SessionRef]:
    refs: list[SessionRef] = []
    for project in scandir(root):
        if not is_dir(project, follow_symlinks=False):
            continue
        for entry in scandir(project.path):
            m = FILE_RE.match(entry.name)  # agent-*.jsonl never matches: not a uuid
            if m and (st := regular_stat(entry)) is not None:
                path, size, mtime = Path(entry.path), st.st_size, st.st_mtime_ns
                sid = m.group("id").lower()
                refs.append(SessionRef(id=sid, source="claude", path=path, size=size, mtime_ns=mtime, hint_root=True))
    return sorted(refs, key=lambda r: str(r.path))


def load(ref: SessionRef) -> Session:
    f = read_jsonl(ref.path)
    session = Session(id=ref.id, source="claude", path=ref.path, last_seq=f.last_seq, warnings=f.warnings)
    convo = [o for _, o in f.records if o.get("type") in ("user", "assistant")]
    sidechain_file = bool(convo) and all(o.get("isSidechain") is True for o in convo)
    sidechain_file = sidechain_file or ref.hint_root is False or "subagents" in ref.path.parts
    session.is_root = not sidechain_file

    recorded_id = next((o["sessionId"] for o in convo if isinstance(o.get("sessionId"), str)), None)
    if recorded_id and not sidechain_file and recorded_id.lower() != ref.id.lower():
        session.warnings.append(f"{ref.path}: records name session {recorded_id}, the file name says {ref.id}")
    if recorded_id:
        session.meta["session_id"] = recorded_id  # for a subagent file: the parent's session id
    if sidechain_file:
        session.parent_id = recorded_id
        agent = next((o.get("agentId") for o in convo if o.get("agentId")), None)
        if agent:
            session.meta["agent_id"] = agent
    session.cwd = next((o["cwd"] for _, o in f.records if isinstance(o.get("cwd"), str) and o["cwd"]), None)
    for key, field in (("version", "version"), ("git_branch", "gitBranch")):
        value = next((o.get(field) for o in convo if o.get(field)), None)
        if value:
            session.meta[key] = value

    records = f.records
    if not sidechain_file:
        abandoned, anchor = abandoned_records(records)
        if abandoned:
            session.meta["abandoned_records"] = len(abandoned)
            records = [(q, o) for q, o in records if q not in abandoned and anchor.get(q) not in abandoned]
    b = EventBuilder(skip_sidechain=not sidechain_file)
    for seq, obj in records:
        b.record(seq, obj)
    session.events = b.finish()
    times = [t for t in b.times if t is not None]
    session.created_at = min(times) if times else None
    session.updated_at = max(times) if times else ref.updated_at
    uuids = {o.get("uuid") for o in convo}
    session.title = b.custom_title or _pick_summary(b.summaries, uuids) or prompt_title(session)
    return session


def _pick_summary(summaries: list[tuple[str, Any]], uuids: set) -> str | None:
    """The summary labelling a leaf of this file, else the last one (it names the resumed work)."""
    for text, leaf in reversed(summaries):
        if leaf in uuids:
            return text
    return summaries[-1][0] if summaries else None

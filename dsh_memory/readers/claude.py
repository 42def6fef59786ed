"""Claude Code transcripts: `$CLAUDE_CONFIG_DIR/projects/<encoded-cwd>/<session-uuid>.jsonl`.

Records carry a top-level `type` (user, assistant, system, attachment, queue-operation, summary,
file-history-snapshot, progress, …): claude_events.py maps them to events and reads what a user
text means. Subagent transcripts (`<sessionId>/subagents/agent-*.jsonl`, legacy
`agent-<8hex>.jsonl`) are not sessions.

The session is the live branch of the `parentUuid` tree (`abandoned_records`): Claude Code rewinds
(Esc Esc) by writing the new prompt as a sibling of the one rewound to; the transcript keeps the
abandoned branch. The session is the `parentUuid` chain from the last message (across compaction
boundaries through `logicalParentUuid`) plus what hangs off it without being a rewound branch:
parallel tool calls also branch (the second `tool_use` line hangs off the first), and a prompt
queued during a tool call can hang off the `tool_use` it interrupted. An abandoned branch is a
side branch that opens with a typed prompt and holds an answer to it. A parent missing from the
file (selected lines, a boundary naming a message that was never saved) continues at the previous
record in file order.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from dsh_memory.models import Session, SessionRef
from dsh_memory.readers._input import is_dir, regular_stat, scandir
from dsh_memory.readers._jsonl import UUID_RE, as_dict, prompt_title, read_jsonl
from dsh_memory.readers.claude_events import EventBuilder, classify_text, flag_label

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
    session.created_at = min(b.times, default=None)
    session.updated_at = max(b.times, default=ref.updated_at)
    uuids = {o.get("uuid") for o in convo}
    session.title = b.custom_title or _pick_summary(b.summaries, uuids) or prompt_title(session)
    return session


def _pick_summary(summaries: list[tuple[str, Any]], uuids: set) -> str | None:
    """The summary labelling a leaf of this file, else the last one (it names the resumed work)."""
    return next((text for text, leaf in reversed(summaries) if leaf in uuids), summaries[-1][0] if summaries else None)


def opens_with_prompt(obj: dict) -> bool:
    """A user record carrying typed words (a rewound branch starts with one)."""
    if obj.get("type") != "user" or flag_label(obj) is not None:
        return False
    content = as_dict(obj.get("message")).get("content")
    if isinstance(content, str):
        return bool(classify_text(content).human)
    if isinstance(content, list):
        blocks = [c for c in content if isinstance(c, dict)]
        if any(c.get("type") == "tool_result" for c in blocks):
            return False
        return any(c.get("type") == "text" and classify_text(str(c.get("text", ""))).human for c in blocks)
    return False


def abandoned_records(records: list[tuple[int, dict]]) -> tuple[set[int], dict[int, int]]:
    """(seqs of records on abandoned branches, record seq → seq of its uuid-carrying anchor).

    Records without a uuid (queue operations, snapshots) are anchored to the previous record
    that has one, so they share its fate. Sidechain records are not part of the tree.
    """
    nodes: dict[str, tuple[int, dict]] = {}  # in file order
    anchor: dict[int, int] = {}
    last_seq: int | None = None
    for seq, obj in records:
        uid = obj.get("uuid")
        if isinstance(uid, str) and uid and obj.get("isSidechain") is not True and uid not in nodes:
            nodes[uid] = (seq, obj)
            last_seq = seq
        elif last_seq is not None:
            anchor[seq] = last_seq
    if not nodes:
        return set(), anchor
    parent: dict[str, str | None] = {}
    children: dict[str | None, list[str]] = {}
    previous: str | None = None
    for uid, (_, obj) in nodes.items():
        p = obj.get("parentUuid")
        p = obj.get("logicalParentUuid") if p is None else p
        if p is not None and (not isinstance(p, str) or p not in nodes or p == uid):
            p = previous  # broken chain: continue at the previous record in file order
        parent[uid] = p
        children.setdefault(p, []).append(uid)
        previous = uid
    # the last message, else the last node (`previous`, after the loop)
    leaf = next((u for u in reversed(nodes) if nodes[u][1].get("type") in ("user", "assistant")), previous)
    live: set[str] = set()
    cur: str | None = leaf
    while cur is not None and cur not in live:
        live.add(cur)
        cur = parent[cur]
    abandoned: set[int] = set()
    for u in live:  # (separate roots are not compared: a chain may restart mid-file)
        for c in children.get(u, []):
            if c in live or not opens_with_prompt(nodes[c][1]):
                continue
            branch = _subtree(c, children)
            if any(nodes[x][1].get("type") == "assistant" for x in branch):
                abandoned.update(nodes[x][0] for x in branch)
    return abandoned, anchor


def _subtree(root: str, children: dict[str | None, list[str]]) -> list[str]:
    out, stack = [], [root]
    while stack:
        x = stack.pop()
        out.append(x)
        stack.extend(children.get(x, []))
    return out

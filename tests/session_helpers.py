"""Helpers shared by the reader tests."""

from __future__ import annotations

import json

from dsh_memory.models import Session


def event_strings(session: Session) -> list[str]:
    """Every string an Event carries that could reach a transcript (text, arguments, label)."""
    out = []
    for e in session.events:
        out.append(e.text)
        if e.arguments is not None:
            out.append(e.arguments if isinstance(e.arguments, str) else json.dumps(e.arguments, ensure_ascii=False))
        if e.label:
            out.append(e.label)
    return out


def make_session(*turns, cwd: str = "/home/demo/src/scraper", source: str = "codex", sid: str = "s1") -> Session:
    """A Session from plain turns, as a reader would give it:
    ("user", text) · ("assistant", text) · ("tool", name, arguments, result_text, is_error)."""
    from pathlib import Path

    from dsh_memory.models import Event, EventKind

    events, seq = [], 0
    for t in turns:
        if t[0] in ("user", "assistant"):
            kind = EventKind.HUMAN if t[0] == "user" else EventKind.ASSISTANT
            events.append(Event(seq=seq, kind=kind, text=t[1]))
        else:
            _, name, args, result, error = t
            call_id = f"call-{seq}"
            events.append(
                Event(seq=seq, kind=EventKind.TOOL_CALL, tool_name=name, arguments=args, tool_call_id=call_id)
            )
            seq += 1
            events.append(
                Event(
                    seq=seq,
                    kind=EventKind.TOOL_RESULT,
                    text=result,
                    is_error=error,
                    tool_name=name,
                    tool_call_id=call_id,
                )
            )
        seq += 1
    return Session(id=sid, source=source, path=Path(f"/tmp/{sid}.jsonl"), cwd=cwd, events=events, last_seq=seq - 1)


def codex_run(cmd: str, out: str, code: int, cwd: str) -> tuple:
    """A Codex `exec_command` turn for `make_session`: the command run in `cwd`, its output under
    the header Codex writes (the exit code is in the header, not an error flag)."""
    head = f"Chunk ID: 1\nWall time: 0.1 seconds\nProcess exited with code {code}\nOriginal token count: 3\nOutput:\n"
    return ("tool", "exec_command", {"cmd": cmd, "workdir": cwd}, head + out, False)


def extract_with(llm, session: Session, writer: str = "model", **kw):
    """`extraction.call_model` on a session as Phase 1 prepares it (its evidence, and its
    transcript for the model writer), with the usual options."""
    from dsh_memory.phase1 import extraction

    options = dict(cwd=session.cwd, source=session.source, delta_watermark=None, max_tokens=4096, reasoning_effort="")
    options.update(kw)
    return extraction.call_model(llm, extraction.material_for(session, writer=writer), writer=writer, **options)

"""Generated DSH sessions for tests and benches: small, idle, each with a planted secret."""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

PLANTED_SECRET = "ghp_" + "Zq7" * 12  # a GitHub token shape the redactor knows


def make_sessions(dsh_home: Path, n: int) -> list[str]:
    """n small DSH v4 sessions under `dsh_home`/sessions, one turn each, quiet for an hour; each
    states a rule (so the no-op gate sends it to the model) and mentions PLANTED_SECRET
    (redaction must catch it). Returns their ids."""
    ids = []
    t0 = int(time.time() * 1000) - 7200_000
    old = time.time() - 3600
    for i in range(n):
        sid = str(uuid.UUID(int=i + 1))
        folder = dsh_home / "sessions" / "--home-w-src-proj--" / sid
        folder.mkdir(parents=True)
        msg = {"id": "u1", "role": "user", "source": {"kind": "user"}}
        text = f"Session {i}: fix test_{i} (token {PLANTED_SECRET}). Always run `make test` before committing."
        msg["content"] = [{"type": "text", "text": text}]  # a standing rule: worth a model call
        reply = {"id": "a2", "role": "assistant", "source": {"kind": "model"}}
        reply["content"] = [{"type": "text", "text": f"Fixed test_{i}; `make test` passes."}]
        lines = [
            {"type": "session", "version": 4, "id": sid, "createdAt": t0, "cwd": "/home/w/src/proj"},
            {"type": "turn/start", "seq": 0, "time": t0, "data": {"turn": 1}},
            {"type": "user/message", "seq": 1, "time": t0 + 1, "surfaceOp": "append", "data": msg},
            {
                "type": "assistant/message",
                "seq": 2,
                "time": t0 + 2,
                "surfaceOp": "append",
                "data": {"turn": 1, "step": 1, "message": reply},
            },
            {"type": "turn/end", "seq": 3, "time": t0 + 3, "data": {"turn": 1, "reason": {"kind": "completed"}}},
        ]
        path = folder / "session.v4.jsonl"
        path.write_text("".join(json.dumps(x) + "\n" for x in lines))
        os.utime(path, (old, old))
        ids.append(sid)
    return ids


def write_session(
    dsh_home: Path, cwd: Path | str, n: int, prompts: list[str], days_ago: float, reply: str = "Done."
) -> str:
    """A DSH v4 session in `cwd` started `days_ago` days ago, one turn per prompt (each answered
    with `reply`), quiet for an hour; id `00000000-0000-4000-8000-<n>`. Returns its id. For
    histories in time order (`dsh-memory replay`'s test and bench)."""
    sid = f"00000000-0000-4000-8000-{n:012d}"
    folder = dsh_home / "sessions" / "--history--" / sid
    folder.mkdir(parents=True)
    t0 = int((time.time() - days_ago * 86400) * 1000)
    lines: list[dict] = [{"type": "session", "version": 4, "id": sid, "createdAt": t0, "cwd": str(cwd)}]
    for turn, prompt in enumerate(prompts, 1):
        seq, t = (turn - 1) * 4, t0 + turn * 1000
        user = {
            "id": f"u{turn}",
            "role": "user",
            "source": {"kind": "user"},
            "content": [{"type": "text", "text": prompt}],
        }
        answer = {"id": f"a{turn}", "role": "assistant", "source": {"kind": "model"}}
        answer["content"] = [{"type": "text", "text": reply}]
        lines += [
            {"type": "turn/start", "seq": seq, "time": t, "data": {"turn": turn}},
            {"type": "user/message", "seq": seq + 1, "time": t + 1, "surfaceOp": "append", "data": user},
            {
                "type": "assistant/message",
                "seq": seq + 2,
                "time": t + 2,
                "surfaceOp": "append",
                "data": {"turn": turn, "step": 1, "message": answer},
            },
            {
                "type": "turn/end",
                "seq": seq + 3,
                "time": t + 3,
                "data": {"turn": turn, "reason": {"kind": "completed"}},
            },
        ]
    path = folder / "session.v4.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    old = time.time() - 3600
    os.utime(path, (old, old))
    return sid

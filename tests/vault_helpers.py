"""A memory root for the vault tests: real files written through the real stores, one processed
session with its rollout summary, a retired summary, a note, and memory content that tries to
run script in the page (model output and session text are untrusted)."""

from __future__ import annotations

import re
import socket
import threading
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

from dsh_memory.settings import MemorySettings
from dsh_memory.storage.state import StateStore
from dsh_memory.storage.store import MemoryStore

SESSION = "7f3c2a10-0000-4000-8000-00000000abcd"
# Each payload sets a marker the tests look for: if any of them ran, the page shows it.
XSS_SCRIPT = "<script>document.title='PWNED';window.__pwned=1</script>"
XSS_IMG = "<img src=x onerror=\"document.title='PWNED';window.__pwned=2\">"
XSS_LINK = "[click me](javascript:window.__pwned=3)"


def make_memory(tmp: Path) -> MemorySettings:
    store = MemoryStore(tmp / "mem")
    store.ensure_layout()
    now = datetime.now(UTC)
    (store.root / "MEMORY.md").write_text(
        "# Handbook\n\n## Releases\n\n- Deploy with `make release`; tag first.\n"
        f"- Planted by a model: {XSS_SCRIPT}\n- {XSS_IMG}\n- {XSS_LINK}\n"
        "- See [the recap](rollout_summaries/release-fix.md).\n"
    )
    (store.root / "memory_summary.md").write_text(
        "v1\n## Navigation\n- releases: MEMORY.md#releases\n- the settlement test fails on Mondays\n"
    )
    store.write_rollout_summary(
        "release-fix",
        {
            "session_id": SESSION,
            "source": "dsh",
            "cwd": "/home/dev/payments",
            "path": "/home/dev/.dsh/sessions/x.jsonl",
            "updated_at": (now - timedelta(days=2)).isoformat(),
            "part": 1,
            "extracted_at": now.isoformat(),
            "model": "deepseek-chat",
            "provider": "openai",
        },
        f"# Release fix\n\nmake release failed: the tag was missing.\n\n{XSS_SCRIPT}\n",
    )
    store.write_rollout_summary(
        "old-deploy",
        {"session_id": "0ld-session", "source": "codex", "cwd": "/srv/old", "part": 1},
        "# Old deploy\n\nthe old deploy script used rsync\n",
    )
    store.retire_summary("old-deploy")
    skill = store.root / "skills" / "release-checklist"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: release-checklist\n---\n# Release checklist\n1. tag\n2. make release\n")
    store.add_note("The settlement test is flaky on Mondays: rerun it once.", title="settlement flake")
    with StateStore(store.root) as state:
        state.try_start(SESSION, now - timedelta(hours=1), source="dsh")
        state.finish(SESSION, "done", 41, now - timedelta(hours=1), slug="release-fix", source="dsh")
        state.mark_retired("old-deploy", now - timedelta(days=1))
    return MemorySettings.from_env(env={"DSH_MEMORY_ROOT": str(store.root)})


def token(html: str, action: str, marker: str = "") -> str:
    """The CSRF token of the first form posting to `action` (after `marker`, when given)."""
    start = html.index(marker) if marker else 0
    m = re.search(
        rf'action="/vault/act/{action}"[^>]*>\s*<input type="hidden" name="csrf" value="([0-9a-f]+)"', html[start:]
    )
    assert m, f"no {action} form on the page"
    return m.group(1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def served(app):
    """The app on a real uvicorn, configured as the commands that serve configure it, on an
    ephemeral loopback port; yields its base URL."""
    import httpx
    import uvicorn

    from dsh_memory.serve.bounded_http import server_config

    port = free_port()
    server = uvicorn.Server(server_config(app, "127.0.0.1", port))
    t = threading.Thread(target=server.run, daemon=True)
    t.start()
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(400):
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                threading.Event().wait(0.05)
        yield base
    finally:
        server.should_exit = True
        t.join(timeout=10)


# The corrections that start a flow: (action, the page that has its button, its fields).
FLOW_ACTIONS = (("extract", "/vault/sessions", {"session": SESSION}), ("consolidate", "/", {}))


def plan_and_confirm(client, action: str, page: str, fields: dict):
    """Post an action's form as its page has it (the confirm step), then its confirm form."""
    tok = token(client.get(page).text, action)
    plan = client.post(f"/vault/act/{action}", data={"csrf": tok, **fields})
    return plan, client.post(f"/vault/act/{action}", data={"csrf": tok, "confirm": "yes", **fields})

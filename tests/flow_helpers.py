"""Helpers for flow tests: a memory pipeline environment over copies of the in-repo fixture corpus."""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from dsh_memory.testing.fake_openai import Reply


def copy_tree_aged(src: Path, dst: Path, age_seconds: float = 3600) -> Path:
    """Copy a fixture tree and date every file `age_seconds` in the past (idle, not too old)."""
    shutil.copytree(src, dst)
    t = time.time() - age_seconds
    for p in dst.rglob("*"):
        os.utime(p, (t, t))
    return dst


def pipeline_env(monkeypatch, tmp_path: Path, fixtures: Path, fake_url: str, *, codex=False, claude=False) -> Path:
    """Point every root and the model route at test locations. Returns the memory root."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    dsh = copy_tree_aged(fixtures / "dsh" / "plain", tmp_path / "dsh")
    monkeypatch.setenv("DSH_HOME", str(dsh))
    monkeypatch.setenv(
        "CODEX_HOME", str(copy_tree_aged(fixtures / "codex", tmp_path / "codex") if codex else tmp_path / "none")
    )
    monkeypatch.setenv(
        "CLAUDE_CONFIG_DIR",
        str(copy_tree_aged(fixtures / "claude-code", tmp_path / "claude") if claude else tmp_path / "none"),
    )
    root = tmp_path / "memories"
    monkeypatch.setenv("DSH_MEMORY_ROOT", str(root))
    monkeypatch.setenv("DSH_MEMORY_BASE_URL", fake_url)
    monkeypatch.setenv("DSH_MEMORY_API_KEY", "test-key")
    monkeypatch.setenv("DSH_MEMORY_MODEL", "fake-model")
    monkeypatch.setenv("DSH_MEMORY_MAX_ROLLOUT_AGE_DAYS", "0")
    monkeypatch.setenv("DSH_MEMORY_CONCURRENCY", "4")
    return root


def user_text(request: dict) -> str:
    return "\n".join(m.get("content") or "" for m in request.get("messages", []) if m.get("role") == "user")


def memory_reply(request: dict) -> Reply:
    """A plausible extraction: empty for chit-chat, otherwise facts quoting the first prompt line."""
    text = user_text(request)
    if "hi there" in text:
        return Reply.tool({"raw_memory": "", "rollout_summary": "", "rollout_slug": ""})
    marker = "\n[user] "
    # The whole first line: a line cut mid-sentence would be dropped by the post-processing.
    first = text.split(marker, 1)[1].strip().splitlines()[0] if marker in text else "a task"
    return Reply.tool(
        {
            "raw_memory": f"- The user asked: {first}\n- Tests run with `uv run pytest`.",
            "rollout_summary": f"## Task\n{first}\n\n## Outcome\ndone",
            "rollout_slug": "Fix: " + first[:40],
        }
    )


def all_text_under(root: Path) -> str:
    chunks = []
    for p in root.rglob("*"):
        if p.is_file() and ".state" not in p.parts:
            chunks.append(p.read_text(errors="replace"))
    return "\n".join(chunks)


def dumps(obj) -> str:
    return json.dumps(obj, ensure_ascii=False)


@contextmanager
def prefect_proxy(prefect_api: str, answer):
    """A Prefect API behind a loopback proxy: `answer(path, forward)` returns a
    request's (status, body, content type), `forward()` being the server's own answer."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import httpx

    upstream = prefect_api.removesuffix("/api")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def _answer(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}

            def forward():
                r = httpx.request(self.command, upstream + self.path, content=body, headers=headers, timeout=30)
                return r.status_code, r.content, r.headers.get("content-type", "application/json")

            status, content, ctype = answer(self.path, forward)
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

        do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _answer

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/api"
    finally:
        server.shutdown()


def task_runs_of(flow_run_id, until=lambda tasks: True, timeout: float = 120.0) -> list:
    """The task runs of one flow run (or of all runs when `flow_run_id` is None), read until
    `until(tasks)` holds or `timeout` passes.

    Prefect records task runs from events after the flow has returned, so on a busy machine the
    last ones (and their last states) land a moment later than the flow's result."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    flows = FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])) if flow_run_id else None
    deadline = time.monotonic() + timeout
    with get_client(sync_client=True) as client:
        while True:
            tasks = client.read_task_runs(flow_run_filter=flows)
            if until(tasks) or time.monotonic() > deadline:
                return tasks
            time.sleep(0.5)

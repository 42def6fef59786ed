"""The loopback HTTP app: RPC methods in-process (Starlette TestClient), the self-guard table,
and one real uvicorn server on an ephemeral loopback port."""

from __future__ import annotations

import json
from datetime import UTC

import httpx
import pytest
from starlette.testclient import TestClient

from dsh_memory.serve.http_app import RPC_PATH, create_app
from dsh_memory.settings import MemorySettings
from dsh_memory.storage.state import StateStore
from dsh_memory.storage.store import MemoryStore
from tests.vault_helpers import served


@pytest.fixture()
def settings(tmp_path) -> MemorySettings:
    s = MemoryStore(tmp_path / "mem")
    s.ensure_layout()
    (s.root / "MEMORY.md").write_text("# Handbook\nDeploy with make release.\n")
    (s.root / "memory_summary.md").write_text("v1\n- releases\n")
    (s.root / "raw_memories.md").write_text("# Raw Memories\n")
    (s.rollout_dir / "release-fix.md").write_text("# Release fix\nmake release failed: missing tag.\n")
    (s.retired_dir / "old.md").write_text("# Old\nold release notes\n")
    return MemorySettings.from_env(env={"DSH_MEMORY_ROOT": str(s.root)})


@pytest.fixture()
def client(settings):
    with TestClient(create_app(settings, mcp=False), base_url="http://127.0.0.1:8765") as c:
        yield c


def rpc(client, method, params=None, **kw):
    body = {"method": method} if params is None else {"method": method, "params": params}
    return client.post(RPC_PATH, json=body, **kw)


def test_rpc_read_path_methods(client, settings):
    s = rpc(client, "summary").json()["result"]
    assert s["content"] == "v1\n- releases" and s["injection"].endswith("===== MEMORY SUMMARY ENDS =====\n")
    entries = rpc(client, "list", {"path": "rollout_summaries"}).json()["result"]["entries"]
    assert [e["path"] for e in entries] == ["rollout_summaries/.retired", "rollout_summaries/release-fix.md"]
    r = rpc(client, "read", {"path": "rollout_summaries/release-fix.md", "start_line": 2}).json()["result"]
    assert (r["start_line"], r["content"]) == (2, "make release failed: missing tag.")
    hits = rpc(client, "search", {"queries": ["make release"]}).json()["result"]["matches"]
    assert [(m["path"], m["match_line"]) for m in hits] == [("MEMORY.md", 2), ("rollout_summaries/release-fix.md", 2)]
    ranked = rpc(client, "search", {"queries": ["missing tag"], "mode": "ranked"}).json()["result"]
    assert ranked["matches"][0]["path"] == "rollout_summaries/release-fix.md"
    added = rpc(client, "add", {"note": "Tags are required for releases.", "title": "tags", "cwd": "/src/app"})
    added = added.json()["result"]
    assert (settings.memory_root / added["path"]).read_text().rstrip().endswith("Tags are required for releases.")
    # read + search of the active summary were recorded as usage (once per call)
    assert StateStore(settings.memory_root).usage()["rollout_summaries/release-fix.md"][0] == 3


def test_rpc_add_is_for_the_project_of_cwd_and_global_only_when_asked(client, settings):
    """The RPC's `add` wrote every note as global, injected into every project's sessions."""
    added = rpc(client, "add", {"note": "Run `make ci` before pushing.", "cwd": "/src/app"}).json()["result"]
    assert added["scope"] == "project /src/app"
    assert "\nproject: /src/app\n" in (settings.memory_root / added["path"]).read_text()
    assert rpc(client, "add", {"note": "Answer in French.", "scope": "global"}).json()["result"]["scope"] == "global"
    for params in ({}, {"cwd": "/src/app\n# Scope: global"}, {"cwd": "src/app"}, {"scope": "everywhere"}):
        r = rpc(client, "add", {"note": "x", **params})
        assert r.status_code == 400 and "\n" not in r.json()["error"]["message"], params
    assert len(MemoryStore(settings.memory_root).list_notes()) == 2


def test_rpc_parameter_names_are_the_core_names(client):
    """start_line / next_start_line, path (also the search scope), context_lines: the names the
    CLI (--start-line, --path, --context-lines) and the MCP tools use too."""
    r = rpc(client, "read", {"path": "MEMORY.md", "start_line": 1, "max_lines": 1}).json()["result"]
    assert (r["start_line"], r["end_line"], r["truncated"], r["next_start_line"]) == (1, 1, True, 2)
    r = rpc(client, "read", {"path": "MEMORY.md", "start_line": r["next_start_line"]}).json()["result"]
    assert (r["start_line"], r["content"], r["next_start_line"]) == (2, "Deploy with make release.", None)
    res = rpc(client, "search", {"queries": ["tag"], "path": "rollout_summaries", "context_lines": 1}).json()
    assert res["result"]["path"] == "rollout_summaries"
    ((m),) = res["result"]["matches"]
    assert (m["path"], m["start_line"], m["match_line"], m["end_line"]) == ("rollout_summaries/release-fix.md", 1, 2, 2)
    for method, old in (
        ("search", {"queries": ["tag"], "path_prefix": "x"}),
        ("read", {"path": "MEMORY.md", "line_offset": 1}),
    ):
        err = rpc(client, method, old)
        assert err.status_code == 400 and "Extra inputs are not permitted" in err.json()["error"]["message"]
    assert rpc(client, "summary", {"max_chars": 5}).status_code == 400  # summary takes no params


def test_rpc_search_refuses_text_that_is_no_unicode_in_one_line(client):
    """JSON may escape a lone surrogate (`"\\udce9"`): as a query or a search path it was a 500
    (the echoed query, or the path in the error, could not be written as JSON); now a 400."""
    for params in ({"queries": ["zeb\udce9"]}, {"queries": ["zebra"], "path": "notes/caf\udce9.md"}):
        body = json.dumps({"method": "search", "params": params})  # ensure_ascii: "\\udce9"
        r = client.post(RPC_PATH, content=body, headers={"content-type": "application/json"})
        assert r.status_code == 400 and "not UTF-8" in r.json()["error"]["message"], (params, r.text)


def test_rpc_search_names_the_files_it_could_not_search(client, settings):
    (settings.memory_root / "rollout_summaries" / "latin.md").write_bytes("- release caf\xe9\n".encode("latin-1"))
    for mode in ("any", "ranked"):
        res = rpc(client, "search", {"queries": ["release"], "mode": mode}).json()["result"]
        assert res["matches"] and res["skipped"] == "skipped 1 file: rollout_summaries/latin.md (not UTF-8)", mode


def test_get_state_reports_flags_meta_and_claim_counts(client, settings):
    from datetime import datetime

    st = StateStore(settings.memory_root)
    now = datetime(2026, 3, 1, tzinfo=UTC)
    st.try_start("sess-a", now)
    st.set_pending(True)
    st.record_phase2_failure("model said no", now)
    data = rpc(client, "get-state").json()["result"]
    # the running claim started long ago: stale, so Phase 1 is not considered in flight
    assert data["phase1_running"] is False and data["phase2_running"] is False
    assert data["pending_consolidation"] is True and data["phase2_consecutive_failures"] == 1
    assert "model said no" in data["phase2_error"]
    assert data["counts"]["running"] == 1 and sum(data["counts"].values()) == 1
    st.try_start("sess-b", datetime.now(UTC))
    data = rpc(client, "get-state").json()["result"]
    assert data["phase1_running"] is True and data["phase1_running_sessions"] == ["sess-b"]


def test_get_state_sees_a_running_phase(client, settings):
    from dsh_memory.storage.locks import phase_lock

    with phase_lock(settings.memory_root, "phase2"):
        assert rpc(client, "get-state").json()["result"]["phase2_running"] is True
    assert rpc(client, "get-state").json()["result"]["phase2_running"] is False


@pytest.mark.parametrize(
    "params,status,kind",
    [
        ({"path": "../etc/passwd"}, 403, "PathGuardError"),
        ({"path": "/etc/passwd"}, 403, "PathGuardError"),
        ({"path": ".state/state.sqlite3"}, 403, "PathGuardError"),
        ({"path": "a\u0000b"}, 403, "PathGuardError"),
        ({"path": "%2e%2e/%2e%2e/etc/passwd"}, 404, "NotFoundError"),
        ({"path": "nope.md"}, 404, "NotFoundError"),
        ({"path": "MEMORY.md", "start_line": 0}, 400, "UserInputError"),
        ({"path": "MEMORY.md", "line_offset": 1}, 400, "UserInputError"),  # the old name is refused
        ({"path": "MEMORY.md", "bogus": 1}, 400, "UserInputError"),
        ({"path": "a" * 256}, 400, "UserInputError"),  # a name over 255 bytes, not an OSError
        ({"path": "é" * 128}, 400, "UserInputError"),  # 128 characters, 256 bytes
        ({"path": f"rollout_summaries/{'a' * 256}/x.md"}, 400, "UserInputError"),
    ],
)
def test_rpc_errors_map_to_statuses(client, params, status, kind):
    r = rpc(client, "read", params)
    assert r.status_code == status and r.json()["error"]["type"] == kind


def test_rpc_errors_carry_the_stable_code_the_cli_prints(client):
    r = rpc(client, "read", {"path": "x" * 300})
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "user_input" and "255 bytes" in r.json()["error"]["message"]
    assert rpc(client, "read", {"path": "nope.md"}).json()["error"]["code"] == "not_found"


def test_rpc_rejects_malformed_bodies(client):
    assert rpc(client, "nope").status_code == 400
    assert client.post(RPC_PATH, content=b"{not json", headers={"content-type": "application/json"}).status_code == 400
    assert client.post(RPC_PATH, json=["list"]).status_code == 400
    assert client.post(RPC_PATH, json={"method": "list", "params": [1]}).status_code == 400
    for params in ([], 0, "", False):  # not an object, even when falsy
        assert client.post(RPC_PATH, json={"method": "list", "params": params}).status_code == 400
    assert client.post(RPC_PATH, json={"method": "list", "params": None}).status_code == 200
    deep = b"[" * 100_000  # nested past the parser's recursion limit: bad input, not a 500
    r = client.post(RPC_PATH, content=deep, headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["type"] == "UserInputError"
    assert client.get(RPC_PATH).status_code == 405


def test_a_param_named_like_the_cores_own_arguments_is_an_unknown_param(client):
    """A param named `model` (the validator's own argument) was a TypeError: HTTP 500 and a
    traceback in the server's log; it is an unknown param like any other (400, one line)."""
    for method, params in (("summary", {}), ("read", {"path": "MEMORY.md"}), ("add", {"note": "x", "scope": "global"})):
        r = rpc(client, method, {**params, "model": "x"})
        assert r.status_code == 400, (method, r.text)
        assert r.json()["error"]["message"] == "invalid arguments: model: Extra inputs are not permitted"


@pytest.mark.parametrize(
    "headers,status",
    [
        ({}, 200),
        ({"host": "localhost:8765"}, 200),
        ({"host": "[::1]:8765"}, 200),
        ({"origin": "http://127.0.0.1:3000"}, 200),
        ({"origin": "http://localhost:5173"}, 200),
        ({"host": "evil.example:8765"}, 403),  # DNS rebinding
        ({"host": "127.0.0.1.evil.example"}, 403),
        ({"host": "0.0.0.0:8765"}, 403),
        ({"origin": "https://evil.example"}, 403),
        ({"origin": "null"}, 403),
        ({"origin": "http://127.0.0.1.evil.example"}, 403),
        ({"origin": "file://"}, 403),
    ],
)
def test_host_and_origin_guard(client, headers, status):
    r = client.post(RPC_PATH, json={"method": "summary"}, headers=headers)
    assert r.status_code == status
    h = client.get("/healthz", headers=headers)
    assert h.status_code == status


def test_content_type_and_body_size(client):
    body = json.dumps({"method": "summary"}).encode()
    for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        assert client.post(RPC_PATH, content=body, headers={"content-type": ctype}).status_code == 415
    assert client.post(RPC_PATH, content=body).status_code == 415  # no content type at all
    ok = client.post(RPC_PATH, content=body, headers={"content-type": "application/json; charset=utf-8"})
    assert ok.status_code == 200
    big = json.dumps({"method": "add", "params": {"note": "x" * (1024 * 1024 + 10)}}).encode()
    assert client.post(RPC_PATH, content=big, headers={"content-type": "application/json"}).status_code == 413

    def chunked():  # no Content-Length: the cap is enforced while reading
        for _ in range(3):
            yield b" " * (512 * 1024)

    assert client.post(RPC_PATH, content=chunked(), headers={"content-type": "application/json"}).status_code == 413


def test_delete_file_refusals_and_allowed_delete(client, settings):
    for path in (
        "MEMORY.md",
        "memory_summary.md",
        "raw_memories.md",
        "raw_memories.archive.md",
        "rollout_summaries/.retired/old.md",
        "rollout_summaries/.retired",
        "../x",
        ".state/state.sqlite3",
    ):
        r = rpc(client, "delete-file", {"path": path})
        assert r.status_code == 403, path
    root = settings.memory_root
    assert (root / "MEMORY.md").exists() and (root / "rollout_summaries/.retired/old.md").exists()
    ok = rpc(client, "delete-file", {"path": "rollout_summaries/release-fix.md"})
    assert ok.status_code == 200 and ok.json()["result"] == {
        "path": "rollout_summaries/release-fix.md",
        "deleted": True,
    }
    assert not (root / "rollout_summaries/release-fix.md").exists()
    assert rpc(client, "delete-file", {"path": "rollout_summaries/release-fix.md"}).status_code == 404


def test_extra_routes_are_mounted_behind_the_guard(settings):
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    async def hook(request):
        return PlainTextResponse("got " + (await request.body()).decode())

    app = create_app(settings, mcp=False, extra_routes=[Route("/hooks/turn-ended", hook, methods=["POST"])])
    with TestClient(app, base_url="http://127.0.0.1") as c:
        assert c.post("/hooks/turn-ended", json={"a": 1}).text == 'got {"a":1}'
        assert c.post("/hooks/turn-ended", json={}, headers={"origin": "https://evil.example"}).status_code == 403


def test_real_loopback_uvicorn_smoke(settings):
    with served(create_app(settings)) as base:
        r = httpx.post(f"{base}{RPC_PATH}", json={"method": "search", "params": {"queries": ["release"]}}, timeout=10)
        assert r.status_code == 200 and r.json()["result"]["matches"][0]["path"] == "MEMORY.md"
        evil = httpx.post(f"{base}{RPC_PATH}", json={"method": "summary"}, headers={"Host": "evil.example"}, timeout=10)
        assert evil.status_code == 403
        # MCP is served on the same port (streamable HTTP)
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        m = httpx.post(f"{base}/mcp", json=init, headers={"accept": "application/json, text/event-stream"}, timeout=10)
        assert m.status_code == 200 and '"name":"dsh-memory"' in m.text


def test_mcp_answers_on_the_host_allow_remote_serves_and_the_guard_still_refuses_others(settings):
    """`http --host memory.lan --allow-remote` says "MCP at /mcp": the MCP SDK's own Host check
    knew loopback only and answered 421 there, while the RPC answered."""
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    accept = {"accept": "application/json, text/event-stream"}
    with TestClient(create_app(settings, allowed_hosts=["memory.lan"]), base_url="http://memory.lan:8765") as c:
        assert rpc(c, "summary").status_code == 200
        m = c.post("/mcp", json=init, headers=accept)
        assert m.status_code == 200 and '"name":"dsh-memory"' in m.text
        assert c.post("/mcp", json=init, headers={**accept, "host": "evil.example:8765"}).status_code == 403
        assert c.post("/mcp", json=init, headers={**accept, "origin": "https://evil.example"}).status_code == 403


def test_http_command_refuses_non_loopback_host_without_allow_remote(settings):
    from typer.testing import CliRunner

    from dsh_memory.cli import app

    r = CliRunner().invoke(
        app, ["http", "--host", "0.0.0.0", "--port", "8765"], env={"DSH_MEMORY_ROOT": str(settings.memory_root)}
    )
    assert r.exit_code == 2 and "--allow-remote" in r.stderr


def test_http_command_refuses_port_0(settings):
    """`http --port 0` bound a random port and printed `http://127.0.0.1:0/…` as the vault's,
    the RPC's and the hook's address: no one could find it. A port is 1–65535, as for `serve`."""
    from typer.testing import CliRunner

    from dsh_memory.cli import app

    r = CliRunner().invoke(app, ["http", "--port", "0"], env={"DSH_MEMORY_ROOT": str(settings.memory_root)})
    assert r.exit_code == 2 and "Invalid value for '--port'" in r.stderr, r.output
    assert "127.0.0.1:0" not in r.output


def test_http_command_on_a_busy_port_fails_with_one_line(settings):
    """Like `serve`: no banner announcing a server that never starts, one line naming the port
    and its option, exit 1 (uvicorn's own exit 3 means "not found" here)."""
    import socket

    from typer.testing import CliRunner

    from dsh_memory.cli import app

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        r = CliRunner().invoke(app, ["http", "--port", str(port)], env={"DSH_MEMORY_ROOT": str(settings.memory_root)})
    assert r.exit_code == 1, r.output
    assert r.stderr.strip().splitlines() == [
        f"error: port {port} on 127.0.0.1 (the memory API) is in use by another "
        "process: stop it, or choose another port with --port"
    ]


def test_rpc_list_and_read_answer_a_name_that_is_no_utf8_in_one_line(client, settings):
    """A memory file whose name is no UTF-8 (`caf\\xe9.md`) made `list` over the RPC a 500 (its
    name could not be written as JSON), and so did a JSON `"\\udce9"` in a `list` or `read` path.
    `list` shows the name escaped; a path that is no UTF-8 is refused in one line."""
    notes = settings.memory_root / "rollout_summaries"
    notes.mkdir(parents=True, exist_ok=True)
    (notes / b"caf\xe9.md".decode("utf-8", "surrogateescape")).write_text("- a note\n")
    r = rpc(client, "list", {"path": "rollout_summaries"})
    assert r.status_code == 200, r.text
    assert "rollout_summaries/caf\\xe9.md" in [e["path"] for e in r.json()["result"]["entries"]]
    for method in ("list", "read", "delete-file"):  # delete-file deleted the file, then answered 500
        body = json.dumps({"method": method, "params": {"path": "rollout_summaries/caf\udce9.md"}})
        r = client.post(RPC_PATH, content=body, headers={"content-type": "application/json"})
        assert r.status_code == 400 and "not UTF-8" in r.json()["error"]["message"], (method, r.text)
    assert "rollout_summaries/caf\\xe9.md" in [
        e["path"] for e in rpc(client, "list", {"path": "rollout_summaries"}).json()["result"]["entries"]
    ]

"""Settings as Prefect Blocks: mirrored fields, validation, precedence, and a real server round trip.

Server tests use the session's real Prefect server (`prefect_api`) and delete the "default"
blocks they save, so other tests keep running on the environment and defaults.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from dsh_memory.errors import ConfigError
from dsh_memory.settings import MemorySettings, ModelRoute
from dsh_memory.settings_loader import resolve_settings


def load_settings():
    r = resolve_settings()
    return r.settings, r.route


REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
KEY = "sk-test-NEVER-PRINT-ME-4711"
FIX_IT = "prefect block delete dsh-memory-settings/default"


def _env(tmp_path: Path, api_url: str | None = None, **extra: str) -> dict[str, str]:
    """A clean environment: only HOME (so the defaults are predictable), the API URL and `extra`."""
    env = {"HOME": str(tmp_path)}
    if api_url:
        env["PREFECT_API_URL"] = api_url
    env.update(extra)
    return env


def _bounds(field) -> dict:
    out = {}
    for meta in field.metadata:
        for attr in ("ge", "gt", "le", "lt"):
            if getattr(meta, attr, None) is not None:
                out[attr] = getattr(meta, attr)
    return out


# ---------------------------------------------------------------- the blocks themselves (no server)


def test_blocks_mirror_every_settings_field_with_the_same_bounds():
    from dsh_memory.blocks import MemorySettingsBlock, ModelRouteBlock

    mem = MemorySettingsBlock.model_fields
    for name, field in MemorySettings.model_fields.items():
        if name == "roots":
            continue
        assert name in mem, f"MemorySettingsBlock lacks {name}"
        assert _bounds(mem[name]) == _bounds(field), name
    assert {"dsh_sessions_dir", "codex_sessions_dir", "claude_projects_dir"} <= set(mem)
    route = ModelRouteBlock.model_fields
    for name, field in ModelRoute.model_fields.items():
        assert name in route, f"ModelRouteBlock lacks {name}"
        assert _bounds(route[name]) == _bounds(field), name
    for cls in (MemorySettingsBlock, ModelRouteBlock):
        for name, field in cls.model_fields.items():
            assert field.default is None, f"{cls.__name__}.{name} must be optional (empty = env/default)"
            assert field.description and "Empty" in field.description, f"{cls.__name__}.{name} undescribed"
    assert "SecretStr" in str(route["api_key"].annotation)
    assert MemorySettingsBlock.get_block_type_slug() == "dsh-memory-settings"
    assert ModelRouteBlock.get_block_type_slug() == "dsh-memory-model-route"


@pytest.mark.parametrize(
    "cls, field, value",
    [
        ("MemorySettingsBlock", "idle_seconds", -1),
        ("MemorySettingsBlock", "debounce_seconds", 0),
        ("MemorySettingsBlock", "phase2_cooldown_seconds", -60),
        ("MemorySettingsBlock", "concurrency", 0),
        ("MemorySettingsBlock", "concurrency", 65),
        ("MemorySettingsBlock", "retry_limit", 21),
        ("MemorySettingsBlock", "max_rollout_age_days", 3651),
        ("MemorySettingsBlock", "max_unused_days", -1),
        ("MemorySettingsBlock", "transcript_budget_tokens", 10),
        ("MemorySettingsBlock", "stale_claim_seconds", 0),
        ("MemorySettingsBlock", "idle_seconds", "soon"),
        ("MemorySettingsBlock", "memory_root", "relative/memories"),
        ("MemorySettingsBlock", "codex_sessions_dir", "sessions"),
        ("ModelRouteBlock", "provider", "anthropic"),
        ("ModelRouteBlock", "base_url", "ftp://example.com"),
        ("ModelRouteBlock", "timeout_seconds", 0),
        ("ModelRouteBlock", "phase1_max_tokens", 100),
        ("ModelRouteBlock", "phase2_max_tokens", 10**6),
        ("ModelRouteBlock", "local_threads", 0),
        ("ModelRouteBlock", "phase1_reasoning_effort", "HIGH; drop"),
        ("ModelRouteBlock", "phase1_model", ""),
        ("ModelRouteBlock", "model_path", "models/q.gguf"),
        # A NUL can be saved in a block (not in the environment): every command then failed in a traceback.
        ("MemorySettingsBlock", "memory_root", "/tmp/mem\x00ory"),
        ("MemorySettingsBlock", "codex_sessions_dir", "/tmp/co\x00dex"),
        ("MemorySettingsBlock", "exclude_projects", ["/work/cli\x00ent"]),
        ("ModelRouteBlock", "model_path", "/models/q\x00.gguf"),
    ],
)
def test_bad_values_are_rejected_naming_the_field(cls, field, value):
    from dsh_memory import blocks

    with pytest.raises(ValidationError) as info:
        getattr(blocks, cls)(**{field: value})
    assert [e["loc"][0] for e in info.value.errors()] == [field]


@pytest.mark.parametrize(
    "value, expected",
    [("true", "on"), ("ON", "on"), (" Yes ", "on"), ("1", "on"), (True, "on"), ("false", "off"), (False, "off")],
)
def test_semantic_search_takes_the_same_switch_words_in_a_block_the_api_and_the_environment(tmp_path, value, expected):
    """A block set through the Python API (or the UI) took only auto/on/off while the environment
    took 1/true/yes/0/false/no too; now the three routes agree (a bool is a switch as well)."""
    from dsh_memory.blocks import MemorySettingsBlock

    assert MemorySettingsBlock(semantic_search=value).semantic_search == expected
    assert MemorySettings(memory_root=tmp_path, semantic_search=value).semantic_search == expected
    if isinstance(value, str):
        env = _env(tmp_path, DSH_MEMORY_SEMANTIC_SEARCH=value)
        assert MemorySettings.from_env(env).semantic_search == expected
    for bad in ("maybe", 2):
        with pytest.raises(ValidationError, match="Input should be 'auto', 'on' or 'off'"):
            MemorySettingsBlock(semantic_search=bad)


def test_block_values_win_over_env_over_defaults(tmp_path):
    from dsh_memory.blocks import MemorySettingsBlock, ModelRouteBlock
    from dsh_memory.blocks.memory_settings import settings_sources

    env = _env(tmp_path, DSH_MEMORY_IDLE_SECONDS="42", DSH_MEMORY_CONCURRENCY="7", DSH_MEMORY_API_KEY="env-key")
    block = MemorySettingsBlock(idle_seconds=5, codex_sessions_dir="off", claude_projects_dir="~/cc", memory_root=" ")
    s = block.to_settings(env)
    assert (s.idle_seconds, s.concurrency, s.retry_limit) == (5, 7, 3)  # block, env, default
    assert s.roots.codex_sessions is None  # 'off' disables a source
    assert s.roots.claude_projects == tmp_path / "cc"
    assert s.roots.dsh_sessions == tmp_path / ".dsh" / "sessions"
    assert s.memory_root == tmp_path / ".dsh" / "memories"  # a blank field is unset
    src = settings_sources(block, env)
    assert (src["idle_seconds"], src["concurrency"], src["retry_limit"]) == ("block", "env", "default")
    assert MemorySettingsBlock().to_settings(env) == MemorySettings.from_env(env)  # empty block = no block

    route = ModelRouteBlock(phase2_model="big", model_path="~/m.gguf").to_route(env)
    assert route.api_key.get_secret_value() == "env-key"
    assert (route.phase1_model, route.phase2_model) == ("deepseek-chat", "big")
    assert route.model_path == tmp_path / "m.gguf"
    assert ModelRouteBlock(api_key=KEY).to_route(env).api_key.get_secret_value() == KEY
    assert KEY not in repr(ModelRouteBlock(api_key=KEY))


def test_the_environment_layer_reads_only_the_mapping_it_is_given(tmp_path, monkeypatch):
    """The environment layer reads the given mapping (a test's dict), never os.environ beside it; empty
    values are unset; a phase's own model variable wins over DSH_MEMORY_MODEL; DEEPSEEK_API_KEY is
    the key's fallback."""
    monkeypatch.setenv("DSH_MEMORY_IDLE_SECONDS", "999")
    monkeypatch.setenv("DSH_MEMORY_PHASE1_MAX_TOKENS", "999")
    env = _env(tmp_path, DSH_MEMORY_CONCURRENCY="", DSH_MEMORY_ROOT="~/mem", DSH_MEMORY_SEMANTIC_SEARCH="0")
    s = MemorySettings.from_env(env)
    assert (s.idle_seconds, s.concurrency, s.semantic_search) == (180, 4, "off")
    assert s.memory_root == Path("~/mem").expanduser()
    env = _env(
        tmp_path,
        DSH_MEMORY_MODEL="both",
        DSH_MEMORY_PHASE2_MODEL="second",
        DSH_MEMORY_API_KEY="",
        DEEPSEEK_API_KEY="fallback",
        DSH_MEMORY_LOCAL_THREADS="3",
    )
    route = ModelRoute.from_env(env)
    assert (route.phase1_model, route.phase2_model, route.local_threads) == ("both", "second", 3)
    assert route.phase1_max_tokens == 4096
    assert route.api_key.get_secret_value() == "fallback"


def test_settings_show_names_every_variable_the_environment_layer_reads(tmp_path):
    """The sources `settings show` prints come from the same layer the values do."""
    from dsh_memory.blocks.memory_settings import settings_sources
    from dsh_memory.blocks.model_route import route_sources

    env = _env(tmp_path, DSH_MEMORY_PHASE1_MAX_TOKENS="512", DSH_MEMORY_PHASE2_MODEL="m", DSH_MEMORY_ROOT="/m")
    src = route_sources(None, env)
    assert (src["phase1_max_tokens"], src["phase2_model"], src["phase1_model"]) == ("env", "env", "default")
    assert settings_sources(None, env)["memory_root"] == "env"


def test_settings_show_says_env_for_a_variable_set_in_another_case(tmp_path):
    """The environment layer matches variable names in any case, so a value a lowercase variable
    set is reported as coming from the environment, not as the default; an empty one is unset."""
    from dsh_memory.blocks.memory_settings import settings_sources
    from dsh_memory.settings import MemorySettings

    env = _env(tmp_path, dsh_memory_concurrency="5", DSH_MEMORY_RETRY_LIMIT="")
    assert MemorySettings.from_env(env).concurrency == 5
    src = settings_sources(None, env)
    assert (src["concurrency"], src["retry_limit"]) == ("env", "default")
    # The name as written wins over another case, wherever each stands in the environment.
    pairs = [("DSH_MEMORY_IDLE_SECONDS", "5"), ("dsh_memory_idle_seconds", "9")]
    for order in (pairs, pairs[::-1]):
        assert MemorySettings.from_env(_env(tmp_path, **dict(order))).idle_seconds == 5


def test_block_metadata_comes_from_the_name_docstring_and_loader():
    from dsh_memory.blocks import MemorySettingsBlock, ModelRouteBlock

    for cls, method in ((MemorySettingsBlock, "to_settings"), (ModelRouteBlock, "to_route")):
        assert cls.get_description() == inspect.cleandoc(cls.__doc__)
        example = cls.get_code_example()
        assert f"from dsh_memory.blocks import {cls.__name__}" in example
        assert f'{cls.__name__}.load("default").{method}()' in example and callable(getattr(cls, method))


def test_invalid_environment_is_a_config_error_naming_the_variable(tmp_path):
    """The variable that set the bad value and the value (cut at 80 characters), each problem
    once, no pydantic URL; a value given in code is named by its field; a secret's value is never
    shown. The same wording as a broken block's (settings.problems)."""
    from dsh_memory.blocks import MemorySettingsBlock
    from dsh_memory.settings import ModelRoute

    with pytest.raises(ConfigError) as info:
        env = _env(tmp_path, DSH_MEMORY_CONCURRENCY="lots", DSH_MEMORY_DEBOUNCE_SECONDS="0")
        MemorySettingsBlock(idle_seconds=5).to_settings(env)
    assert str(info.value) == (
        "invalid dsh-memory setting: DSH_MEMORY_DEBOUNCE_SECONDS: Input should be greater than or equal to 1 (got "
        "'0'); DSH_MEMORY_CONCURRENCY: Input should be a valid integer, unable to parse string as an integer (got 'lots')"
    )
    with pytest.raises(ConfigError) as info:
        ModelRoute.from_env(_env(tmp_path, DSH_MEMORY_TIMEOUT_SECONDS="-1"), api_key=["sk-not-shown"], local_threads=0)
    assert str(info.value) == (
        "invalid dsh-memory model setting: api_key: Input should be a valid string; DSH_MEMORY_TIMEOUT_SECONDS: "
        "Input should be greater than 0 (got '-1'); local_threads: Input should be greater than or equal to 1 (got 0)"
    )
    with pytest.raises(ConfigError) as info:  # a long value is shown cut
        MemorySettingsBlock().to_settings(_env(tmp_path, DSH_MEMORY_CONCURRENCY="9" * 500))
    assert str(info.value).endswith("(got '" + "9" * 79 + "…)")


@pytest.mark.parametrize(
    "variable, value",
    [
        ("DSH_MEMORY_BASE_URL", "api.example.com/v1"),  # a call would fail as a 'connection error', retried
        ("DSH_MEMORY_BASE_URL", "http://[::1/v1"),  # every call: a traceback (ValueError: Invalid IPv6 URL)
        ("DSH_MEMORY_BASE_URL", "http://127.0.0.1:99999/v1"),  # no such port
        ("DSH_MEMORY_TIMEOUT_SECONDS", "inf"),  # every call: OverflowError from the socket
        ("DSH_MEMORY_TIMEOUT_SECONDS", "1e10"),
        ("DSH_MEMORY_MODEL_PATH", "models/q.gguf"),  # would depend on the directory each flow runs in
    ],
)
def test_the_environment_is_checked_as_the_block_is(tmp_path, variable, value):
    """A value the model route block refuses is refused from the environment too, naming the
    variable, before any model call."""
    from dsh_memory.settings import ModelRoute

    with pytest.raises(ConfigError, match=f"^invalid dsh-memory model setting: {variable}: "):
        ModelRoute.from_env(_env(tmp_path, **{variable: value}))


def test_an_api_key_is_trimmed_and_one_that_cannot_be_a_header_is_refused_unshown(tmp_path):
    """A key pasted with its line break (a key file, the UI's secret field) made every call fail
    as a 'connection error' that showed the key (`Illegal header value b'Bearer sk-…\\n'`: the
    escaped key escaped redaction); a non-ASCII one a UnicodeEncodeError. Whitespace around a key
    is not part of it; a control or non-ASCII character inside is an invalid setting, never shown."""
    from dsh_memory.blocks import ModelRouteBlock

    route = ModelRoute.from_env(_env(tmp_path, DSH_MEMORY_API_KEY=f"  {KEY}\r\n"))
    assert route.api_key.get_secret_value() == KEY
    assert ModelRouteBlock(api_key=f"{KEY}\n").to_route(_env(tmp_path)).api_key.get_secret_value() == KEY
    for bad in (f"{KEY}\nX", f"{KEY}\x00", f"{KEY}é"):
        with pytest.raises(ConfigError) as info:
            ModelRoute.from_env(_env(tmp_path, DSH_MEMORY_API_KEY=bad))
        assert str(info.value).startswith("invalid dsh-memory model setting: DSH_MEMORY_API_KEY")
        assert KEY not in str(info.value)


def test_without_a_server_nothing_is_imported_or_contacted(tmp_path):
    code = (
        "import sys, json\n"
        "from dsh_memory.settings_loader import resolve_settings\n"
        "r = resolve_settings()\n"
        "print(json.dumps({'prefect': 'prefect' in sys.modules, 'idle': r.settings.idle_seconds,"
        " 'blocks': r.blocks}))\n"
    )
    env = dict(_env(tmp_path, DSH_MEMORY_IDLE_SECONDS="31"), PATH=os.environ.get("PATH", ""))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["prefect"] is False and data["idle"] == 31
    assert all("PREFECT_API_URL is unset" in s for s in data["blocks"].values())


def _resolve_in_a_process(tmp_path: Path, api_url: str, idle: str) -> subprocess.CompletedProcess:
    """`resolve_settings()` in a fresh process of this checkout's code, against `api_url`."""
    code = (
        "from dsh_memory.settings_loader import resolve_settings\n"
        "r = resolve_settings(); print(r.settings.idle_seconds, r.memory_block)\n"
    )
    env = dict(
        _env(tmp_path, api_url, DSH_MEMORY_IDLE_SECONDS=idle),
        PATH=os.environ.get("PATH", ""),
        PREFECT_HOME=str(tmp_path / "ph"),
        PYTHONPATH=str(Path(__file__).resolve().parents[1]),
    )
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)


def test_unreachable_server_falls_back_to_env_with_a_warning(tmp_path):
    from dsh_memory.serve.prefect_server import free_port

    url = f"http://ops:s3cr3t-pw@127.0.0.1:{free_port()}/api"  # a proxy's basic auth: said nowhere
    out = _resolve_in_a_process(tmp_path, url, "33")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["33", "None"]
    assert "unreachable" in out.stderr and "127.0.0.1" in out.stderr and "s3cr3t" not in out.stderr


@pytest.mark.parametrize("silent", [False, True], ids=["hangs up", "never answers"])
def test_a_server_that_takes_the_request_but_never_answers_falls_back_too(tmp_path, silent):
    """A Prefect API that accepts the connection, then hangs up or stays silent (a stuck or
    stopped server): the settings fall back to the environment like an unreachable one, at the
    block query's timeout; Prefect's own client retried for minutes (a session-start hook, an MCP
    server's start) and then ended in a traceback."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()
    held: list[socket.socket] = []

    def take() -> None:
        with contextlib.suppress(OSError):
            while not stop.is_set():
                conn, _ = listener.accept()
                conn.recv(65536)
                held.append(conn) if silent else conn.close()

    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    try:
        out = _resolve_in_a_process(tmp_path, f"http://127.0.0.1:{listener.getsockname()[1]}/api", "34")
    finally:
        stop.set()
        listener.close()
        for conn in held:
            conn.close()
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["34", "None"]
    # its HTTP timeout or the lookup's bound (both 10 s), whichever comes first
    assert "not consulted (Prefect API http://127.0.0.1:" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("status", [502, 503])
def test_a_server_behind_a_proxy_that_is_down_falls_back_too(tmp_path, status):
    """A proxy whose Prefect server is stopped or starting answers 502/503: that is no answer
    either, so the settings fall back to the environment at once; Prefect's client retried it for
    two minutes, then every command (a hook's search, `status`) failed with exit 4."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Down(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST = _answer

        def log_message(self, *args) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Down)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        out = _resolve_in_a_process(tmp_path, f"http://127.0.0.1:{httpd.server_address[1]}/api", "35")
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["35", "None"]
    assert f"unreachable: HTTP {status}" in out.stderr and "Traceback" not in out.stderr


def test_save_without_a_server_says_how_to_configure_one(tmp_path):
    """Either way works: `dsh-memory serve` (every command then uses its server) or a Prefect
    server named by PREFECT_API_URL; the message named only the second."""
    env = dict(_env(tmp_path), PATH=os.environ.get("PATH", ""), PREFECT_HOME=str(tmp_path / "ph"))
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])  # this checkout's code
    out = subprocess.run(
        [str(BIN / "dsh-memory"), "settings", "save"], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == ConfigError.exit_code
    assert "prefect server start" in out.stderr and "PREFECT_API_URL" in out.stderr
    assert "dsh-memory serve" in out.stderr


def test_save_to_a_server_that_refuses_says_so_in_one_line(tmp_path):
    """A protected Prefect server without credentials (or something else at PREFECT_API_URL)
    answers 401: one line naming the status and what to check, exit 4; it was a traceback."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Refuse(BaseHTTPRequestHandler):
        def _refuse(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(401)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST = do_PUT = do_PATCH = _refuse

        def log_message(self, *args) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    env = dict(
        _env(tmp_path, f"http://127.0.0.1:{httpd.server_address[1]}/api"),
        PATH=os.environ.get("PATH", ""),
        PREFECT_HOME=str(tmp_path / "ph"),
        PYTHONPATH=str(REPO),
    )
    try:
        out = subprocess.run(
            [str(BIN / "dsh-memory"), "settings", "save"], env=env, capture_output=True, text=True, timeout=120
        )
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert "Traceback" not in out.stderr
    assert out.returncode == ConfigError.exit_code, out.stderr
    assert out.stderr.startswith("error: could not save the dsh-memory blocks") and "HTTP 401" in out.stderr
    assert len(out.stderr.splitlines()) == 1


@pytest.mark.parametrize("from_env", [["--from-env"], []])
def test_save_to_a_server_that_is_down_behind_a_proxy_fails_at_once_in_one_line(tmp_path, from_env):
    """A proxy whose Prefect server is stopped answers 503: `settings save` waited through
    Prefect's client retries (6 requests, two minutes) before its one line. It asks once and says
    the API does not answer (exit 6, like an unreachable one)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from dsh_memory.errors import ServiceUnavailableError

    asked: list[str] = []

    class Down(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            asked.append(f"{self.command} {self.path}")
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST = do_PUT = do_PATCH = _answer

        def log_message(self, *args) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Down)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/api"
    authed = url.replace("http://", "http://ops:s3cr3t-pw@")  # a proxy's basic auth: said nowhere
    env = dict(_env(tmp_path, authed), PATH=os.environ.get("PATH", ""), PREFECT_HOME=str(tmp_path / "ph"))
    env["PYTHONPATH"] = str(REPO)
    try:
        argv = [str(BIN / "dsh-memory"), "settings", "save", *from_env]
        out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert out.returncode == ServiceUnavailableError.exit_code, out.stderr
    assert out.stderr.startswith(f"error: the Prefect API at {url} does not answer (HTTP 503)"), out.stderr
    assert len(out.stderr.splitlines()) == 1 and "Traceback" not in out.stderr and "s3cr3t" not in out.stderr
    assert len(asked) == 1, asked


# ---------------------------------------------------------------- on the real Prefect server


@pytest.fixture
def server(prefect_api, monkeypatch, tmp_path):
    """The real server with no "default" blocks before or after; a predictable HOME, no DSH_* env."""
    from dsh_memory.blocks import register_blocks

    for var in list(os.environ):
        if var.startswith(("DSH_", "DEEPSEEK_")) or var in ("CODEX_HOME", "CLAUDE_CONFIG_DIR"):
            monkeypatch.delenv(var)
    monkeypatch.setenv("HOME", str(tmp_path))
    register_blocks()
    _delete_defaults()
    yield prefect_api
    _delete_defaults()


def _delete_defaults() -> None:
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    with get_client(sync_client=True) as client:
        for slug in ("dsh-memory-settings", "dsh-memory-model-route"):
            try:
                doc = client.read_block_document_by_name("default", slug, include_secrets=False)
            except ObjectNotFound:
                continue
            client.delete_block_document(doc.id)


def _overwrite_data(slug: str, data: dict) -> None:
    """Replace a saved document's data as an older version or a hand edit might have left it."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import BlockDocumentUpdate

    with get_client(sync_client=True) as client:
        doc = client.read_block_document_by_name("default", slug)
        client.update_block_document(doc.id, BlockDocumentUpdate(data=data, merge_existing_data=False))


def _cli(*args: str) -> object:
    from dsh_memory.cli import app

    return CliRunner().invoke(app, list(args))


def test_save_is_made_again_when_a_busy_prefect_server_answers_503(server, tmp_path):
    """A Prefect server on a loaded machine answers 503 "Service Unavailable" (its SQLite database
    busy): `settings save`, which asks each request once so that a proxy's 503 fails at once, gave
    up with "does not answer". Its own 503 is retried: the save is made (a proxy in front of the
    real server answers the first two requests so)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import httpx

    busy = [2]  # requests still to answer 503

    class Busy(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if busy[0] > 0:
                busy[0] -= 1
                out, status, kind = b'{"exception_message":"Service Unavailable"}', 503, "application/json"
            else:
                headers = {"Content-Type": self.headers.get("Content-Type", "application/json")}
                r = httpx.request(self.command, server.removesuffix("/api") + self.path, content=body, headers=headers)
                out, status, kind = r.content, r.status_code, r.headers.get("content-type", "application/json")
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

        def log_message(self, *args) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Busy)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    env = dict(_env(tmp_path, f"http://127.0.0.1:{httpd.server_address[1]}/api"), PATH=os.environ.get("PATH", ""))
    env.update(PREFECT_HOME=str(tmp_path / "ph"), PYTHONPATH=str(REPO), DSH_MEMORY_IDLE_SECONDS="77")
    try:
        argv = [str(BIN / "dsh-memory"), "settings", "save"]
        out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert out.returncode == 0, out.stderr
    assert busy == [0] and "idle_seconds" in out.stdout
    assert resolve_settings({"PREFECT_API_URL": server}).settings.idle_seconds == 77


def test_prefect_block_register_cli(server):
    env = dict(os.environ, PREFECT_API_URL=server)
    out = subprocess.run(
        [str(BIN / "prefect"), "block", "register", "-m", "dsh_memory.blocks"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "dsh-memory settings" in out.stdout and "dsh-memory model route" in out.stdout
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        for slug in ("dsh-memory-settings", "dsh-memory-model-route"):
            assert client.read_block_type_by_slug(slug).slug == slug


def test_no_saved_block_means_env_and_defaults(server, tmp_path, monkeypatch):
    r = resolve_settings()
    assert r.api_url == server
    assert set(r.blocks.values()) == {"not saved"} and r.memory_block is None and r.route_block is None
    assert r.settings == MemorySettings.from_env() and r.settings.memory_root == tmp_path / ".dsh" / "memories"
    assert r.route == ModelRoute.from_env()
    monkeypatch.setenv("DSH_MEMORY_IDLE_SECONDS", "42")
    assert load_settings()[0].idle_seconds == 42


def test_save_load_round_trip(server, tmp_path, monkeypatch):
    from prefect.client.orchestration import get_client

    from dsh_memory.blocks import MemorySettingsBlock, ModelRouteBlock

    root = tmp_path / "mem"
    MemorySettingsBlock(
        memory_root=str(root), idle_seconds=5, concurrency=2, codex_sessions_dir="off", stale_claim_seconds=77
    ).save("default", overwrite=True)
    ModelRouteBlock(
        base_url="http://127.0.0.1:9/v1", api_key=KEY, phase1_model="m1", phase2_reasoning_effort="high"
    ).save("default", overwrite=True)
    monkeypatch.setenv("DSH_MEMORY_IDLE_SECONDS", "42")  # the block wins
    monkeypatch.setenv("DSH_MEMORY_RETRY_LIMIT", "9")  # not in the block: env applies

    settings, route = load_settings()
    assert settings.memory_root == root and settings.roots.codex_sessions is None
    assert (settings.idle_seconds, settings.concurrency, settings.retry_limit) == (5, 2, 9)
    assert settings.stale_claim_seconds == 77 and settings.debounce_seconds == 180
    assert (route.base_url, route.phase1_model, route.phase2_model) == ("http://127.0.0.1:9/v1", "m1", "deepseek-chat")
    assert route.phase2_reasoning_effort == "high" and route.api_key.get_secret_value() == KEY
    assert ModelRouteBlock.load("default").api_key.get_secret_value() == KEY
    with get_client(sync_client=True) as client:  # the API hands the key out only when asked
        doc = client.read_block_document_by_name("default", "dsh-memory-model-route", include_secrets=False)
        assert KEY not in json.dumps(doc.data)

    monkeypatch.setenv("DSH_MEMORY_IGNORE_BLOCKS", "1")  # escape hatch: env and defaults only
    settings, route = load_settings()
    assert (settings.idle_seconds, settings.concurrency, route.api_key) == (42, 4, None)


def test_save_with_the_blocks_ignored_keeps_what_they_hold(server, monkeypatch):
    """With DSH_MEMORY_IGNORE_BLOCKS=1 (set for hooks, say) `settings save` did not read the blocks
    and overwrote them with the environment alone: the saved key and values were gone, without a
    word. It refuses, saying why and that --from-env does exactly that on purpose."""
    from dsh_memory.blocks import MemorySettingsBlock, ModelRouteBlock

    MemorySettingsBlock(idle_seconds=7).save("default", overwrite=True)
    ModelRouteBlock(api_key=KEY).save("default", overwrite=True)
    monkeypatch.setenv("DSH_MEMORY_IGNORE_BLOCKS", "1")
    out = _cli("settings", "save")
    assert out.exit_code == ConfigError.exit_code, out.output
    assert "DSH_MEMORY_IGNORE_BLOCKS" in out.stderr and "--from-env" in out.stderr
    monkeypatch.delenv("DSH_MEMORY_IGNORE_BLOCKS")
    settings, route = load_settings()
    assert settings.idle_seconds == 7 and route.api_key.get_secret_value() == KEY
    monkeypatch.setenv("DSH_MEMORY_IGNORE_BLOCKS", "1")
    assert _cli("settings", "save", "--from-env").exit_code == 0  # on purpose: rebuilt from the environment
    monkeypatch.delenv("DSH_MEMORY_IGNORE_BLOCKS")
    assert load_settings()[0].idle_seconds == 180


def test_an_api_url_without_its_api_path_is_a_config_error(server, monkeypatch):
    """PREFECT_API_URL=http://host:port (the UI's address, no /api) reached the server, whose 404s
    read as "not saved": `settings show` said so of saved blocks and every flow ran without them."""
    from dsh_memory.blocks import MemorySettingsBlock

    MemorySettingsBlock(idle_seconds=7).save("default", overwrite=True)
    monkeypatch.setenv("PREFECT_API_URL", server.removesuffix("/api"))
    with pytest.raises(ConfigError, match=r"HTTP 404.*/api"):
        resolve_settings()


def test_settings_show_never_prints_the_key(server, monkeypatch):
    monkeypatch.setenv("DSH_MEMORY_API_KEY", KEY)
    monkeypatch.setenv("DSH_MEMORY_CONCURRENCY", "6")
    before = _cli("settings", "show", "--json")
    assert before.exit_code == 0, before.output
    data = json.loads(before.output)
    assert data["model_route"]["api_key"] == {"value": "********", "source": "env"}
    assert data["memory"]["concurrency"] == {"value": 6, "source": "env"}
    assert data["memory"]["idle_seconds"] == {"value": 180, "source": "default"}

    saved = _cli("settings", "save")
    assert saved.exit_code == 0, saved.output
    assert "api_key (secret)" in saved.output and "concurrency" in saved.output

    monkeypatch.delenv("DSH_MEMORY_API_KEY")
    monkeypatch.setenv("DSH_MEMORY_CONCURRENCY", "8")
    for args in (("settings", "show"), ("settings", "show", "--json")):
        out = _cli(*args)
        assert out.exit_code == 0, out.output
        assert KEY not in out.output and KEY[:12] not in out.output
    data = json.loads(_cli("settings", "show", "--json").output)
    assert data["model_route"]["api_key"] == {"value": "********", "source": "block"}
    assert data["memory"]["concurrency"] == {"value": 6, "source": "block"}  # pinned by save
    assert data["memory"]["idle_seconds"]["source"] == "default"  # defaults stay unpinned
    assert set(data["blocks"].values()) == {"loaded"}
    assert load_settings()[1].api_key.get_secret_value() == KEY


def test_a_broken_block_is_a_config_error_with_the_fix(server, monkeypatch):
    from dsh_memory.blocks import MemorySettingsBlock, ModelRouteBlock

    MemorySettingsBlock(idle_seconds=5).save("default", overwrite=True)
    _overwrite_data("dsh-memory-settings", {"idle_seconds": -5})
    with pytest.raises(ConfigError) as info:
        load_settings()
    msg = str(info.value)
    assert "idle_seconds" in msg and "-5" in msg and FIX_IT in msg and "Blocks → dsh-memory settings" in msg

    out = _cli("settings", "show")
    assert out.exit_code == ConfigError.exit_code and FIX_IT in out.output

    _overwrite_data("dsh-memory-settings", {"idle_secs": 5})  # saved under another schema
    with pytest.raises(ConfigError, match=r"does not know \(idle_secs\)"):
        load_settings()

    repaired = _cli("settings", "save", "--from-env")  # the documented repair
    assert repaired.exit_code == 0, repaired.output
    assert load_settings()[0].idle_seconds == 180

    ModelRouteBlock(phase1_model="m").save("default", overwrite=True)
    _overwrite_data("dsh-memory-model-route", {"api_key": [KEY]})
    with pytest.raises(ConfigError, match="prefect block delete dsh-memory-model-route/default") as info:
        load_settings()
    assert KEY not in str(info.value) and "api_key" in str(info.value)


def test_a_flow_loads_the_saved_block(server):
    from prefect import flow

    from dsh_memory.blocks import MemorySettingsBlock

    MemorySettingsBlock(idle_seconds=11, max_unused_days=0).save("default", overwrite=True)

    @flow(name="settings-probe")
    def probe() -> list[int]:
        settings, _route = load_settings()
        return [settings.idle_seconds, settings.max_unused_days]

    assert probe() == [11, 0]


def test_notify_direct_takes_its_settings_from_the_api_url_it_is_given(server, tmp_path, fixtures_dir):
    """`notify --direct --api-url URL` sent the event to URL but resolved its settings from
    PREFECT_API_URL (unset: the environment), so it recorded the turn end in another memory root
    than the one URL's saved block pins, where the run the event wakes looks for it."""
    from datetime import UTC, datetime, timedelta

    from dsh_memory.blocks import MemorySettingsBlock
    from dsh_memory.storage.state import StateStore
    from dsh_memory.storage.turn_ends import TurnEnds

    pinned = tmp_path / "pinned"
    MemorySettingsBlock(memory_root=str(pinned)).save("default", overwrite=True)
    env = dict(_env(tmp_path), PATH=os.environ.get("PATH", ""), PREFECT_HOME=str(tmp_path / "ph"))
    env.update(
        PYTHONPATH=str(REPO), DSH_MEMORY_ROOT=str(tmp_path / "env-root"), CLAUDE_CONFIG_DIR="/home/alice/.claude"
    )
    out = subprocess.run(
        [str(BIN / "dsh-memory"), "notify", "--kind", "claude", "--direct", "--api-url", server, "--timeout", "30"],
        input=(fixtures_dir / "webhooks/claude-stop.json").read_bytes(),
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert b"not recorded" not in out.stderr
    with StateStore(pinned) as state:
        due = TurnEnds(state).due(datetime.now(UTC) + timedelta(days=1), 0)
    assert list(due) == ["1f3b5d7e-9a2c-4e6f-8b0d-2c4e6a8f0b13"]


def test_settings_show_masks_a_password_in_a_url(tmp_path):
    """A model endpoint or Prefect API behind a proxy with basic auth (`https://user:pass@host`) was
    printed whole by `settings show`; its password is a secret like the API key."""
    code = (
        "import json\n"
        "from dsh_memory.settings_loader import describe_settings, resolve_settings\n"
        "print(json.dumps(describe_settings(resolve_settings())))\n"
    )
    env = dict(
        _env(tmp_path, DSH_MEMORY_BASE_URL="https://alice:Hunter2Pw@llm.example.com/v1", DSH_MEMORY_IGNORE_BLOCKS="1"),
        PATH=os.environ.get("PATH", ""),
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Hunter2Pw" not in out.stdout
    data = json.loads(out.stdout)
    assert data["model_route"]["base_url"]["value"] == "https://alice:********@llm.example.com/v1"

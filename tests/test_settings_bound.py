"""The saved settings' lookup is bounded as a whole, for every command: a Prefect API (or proxy)
that takes the request and then answers a byte at a time, or never, holds no command past
`settings_loader.SETTINGS_LOOKUP_SECONDS`. Past it, a command that reads memory goes on with the
environment and defaults (one line on stderr); one that writes memory is refused (exit 6): the
saved settings may name another memory root. Real CLI processes against a real loopback server.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_memory.errors import ServiceUnavailableError
from tests.flow_helpers import copy_tree_aged
from tests.test_cli_behaviour import SAMPLES, clean_env

BOUND = 1.0  # the lookup's bound in these processes (10 s as shipped)
TRICKLE = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 600\r\n\r\n" + b" " * 600
BYTE_EVERY = 0.2  # the whole answer takes ≥ 120 s; each byte comes well within an HTTP read timeout
# What `_saved_block_slugs` is told in the "prefect client" case: a settings block is saved, so the
# lookup goes on through Prefect's client, whose requests are then trickled.
SAVED = json.dumps([{"name": "default", "block_type": {"slug": "dsh-memory-settings"}}]).encode()


@contextlib.contextmanager
def stalling_api(mode: str) -> Iterator[str]:
    """A loopback "Prefect API" that reads each request and then trickles its answer (`trickle`),
    never answers (`silent`), or answers the block filter at once and trickles every other request
    (`prefect client`). Yields its URL; everything is closed on exit."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()
    conns: list[socket.socket] = []

    def answer(conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            request = conn.recv(65536)
            if mode == "prefect client" and b"/block_documents/filter" in request.split(b"\r\n", 1)[0]:
                head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(SAVED)}\r\n\r\n"
                conn.sendall(head.encode() + SAVED)
                return
            if mode == "silent":
                stop.wait()
                return
            for byte in TRICKLE:
                if stop.wait(BYTE_EVERY):
                    return
                conn.send(bytes([byte]))

    def accept() -> None:
        with contextlib.suppress(OSError):
            while not stop.is_set():
                conn, _ = listener.accept()
                conns.append(conn)
                threading.Thread(target=answer, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://ops:s3cr3t-pw@127.0.0.1:{listener.getsockname()[1]}/api"  # basic auth: said nowhere
    finally:
        stop.set()
        for sock in (listener, *conns):
            sock.close()


def run_clis(commands: list[list[str]], env: dict[str, str]) -> list[tuple[subprocess.CompletedProcess, float]]:
    """Each `dsh-memory ARGS` as its own process (all at once), the lookup's bound lowered to
    BOUND (and `status`'s run-history query's): (its outcome, its seconds). A process still running after 60 s fails the test."""
    code = (
        "import dsh_memory.settings_loader as s\n"
        f"s.SETTINGS_LOOKUP_SECONDS = {BOUND}\n"
        "import dsh_memory.serve.status as st\n"
        f"st.SERVER_QUERY_SECONDS = {BOUND}\n"
        "from dsh_memory.cli import main\n"
        "main()\n"
    )
    started = time.monotonic()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for args in commands
    ]
    done = []
    for args, proc in zip(commands, procs, strict=True):
        try:
            out, err = proc.communicate(timeout=max(1.0, 60 - (time.monotonic() - started)))
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
                p.communicate()
            pytest.fail(f"`dsh-memory {' '.join(args)}` still waits for the Prefect API after 60 s")
        done.append((subprocess.CompletedProcess(args, proc.returncode, out, err), time.monotonic() - started))
    return done


@pytest.mark.parametrize("mode", ["trickle", "silent", "prefect client"])
def test_a_stalling_prefect_api_holds_no_read_command_past_the_bound(tmp_path, mode):
    """`search`, `list`, `status` and the session-start injection go on with the memory the environment
    names, each saying in one line that the saved settings were not consulted and which API did
    not answer (its password not shown). Without the bound, `search` and `list` waited for as long
    as the server trickled (its HTTP timeout bounds each read, not the whole)."""
    env = clean_env(tmp_path)
    (Path(env["DSH_MEMORY_ROOT"]) / "memory_summary.md").parent.mkdir(parents=True)
    (Path(env["DSH_MEMORY_ROOT"]) / "memory_summary.md").write_text("# Memory\n\n- python tooling: uv, pytest\n")
    with stalling_api(mode) as url:
        env["PREFECT_API_URL"] = url
        results = run_clis([["search", "tooling"], ["list"], ["summary", "--inject"], ["status", "--json"]], env)
    for r, seconds in results:
        assert r.returncode == 0, r.stderr
        assert seconds < 60  # the server would trickle for ≥ 120 s
        shown = url.replace("ops:s3cr3t-pw@", "")
        line = f"dsh-memory settings: not consulted (Prefect API {shown} did not answer within {BOUND:g} s)"
        assert [x for x in r.stderr.splitlines() if x.startswith("dsh-memory settings:")] == [
            f"{line}; using the environment and defaults"
        ], r.stderr
        assert "s3cr3t" not in r.stdout + r.stderr and "Traceback" not in r.stderr
    search, listing, inject, status = (r for r, _ in results)
    assert "python tooling: uv, pytest" in search.stdout
    assert "memory_summary.md" in listing.stdout
    assert "python tooling: uv, pytest" in inject.stdout
    # `status` asks the API for its run history too: bounded the same way, and said so
    server = json.loads(status.stdout)["server"]
    assert server["available"] is False and f"did not answer within {BOUND:g} s" in server["reason"]


def test_a_write_command_is_refused_while_the_saved_settings_are_unknown(tmp_path):
    """A saved block may pin another memory root: `add`, `forget`, or `extract` with sessions to
    extract, writing into the one the environment names would put memory where no reader looks.
    Past the bound they are refused in one line, exit 6, and nothing is written to the
    environment's root (`extract` is refused before any Prefect engine starts: the engine's own
    requests to that API would wait as long as it trickled)."""
    env = clean_env(tmp_path, DSH_HOME=str(copy_tree_aged(SAMPLES / "dsh", tmp_path / "dsh")))
    root = Path(env["DSH_MEMORY_ROOT"])
    with stalling_api("trickle") as url:
        env["PREFECT_API_URL"] = url
        commands = [["add", "use uv", "--scope", "global"], ["forget", "some-session", "--json"], ["extract", "--all"]]
        results = run_clis(commands, env)
    (add, _), (forget, _), (extract, _) = results
    for r in (add, forget, extract):
        assert r.returncode == ServiceUnavailableError.exit_code == 6, r.stderr
        assert "Traceback" not in r.stderr and "s3cr3t" not in r.stdout + r.stderr
    errors = [x for x in add.stderr.splitlines() if x.startswith("error: ")]
    assert len(errors) == 1 and f"did not answer within {BOUND:g} s" in errors[0], add.stderr
    assert "not writing memory" in errors[0] and "DSH_MEMORY_IGNORE_BLOCKS=1" in errors[0]
    assert json.loads(forget.stdout)["error"]["code"] == "unavailable"
    assert not root.exists() or not any(p.is_file() for p in root.rglob("*"))

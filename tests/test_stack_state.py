"""The stack state file and lock (dsh_memory/serve/stack_state.py) and the fixed ports of `serve`."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
from dataclasses import asdict

import pytest

from dsh_memory.errors import DshMemoryError
from dsh_memory.serve import stack_state
from dsh_memory.serve.prefect_server import free_port
from dsh_memory.serve.stack import port_free, wait_for_port
from dsh_memory.serve.stack_state import StackAlreadyRunning, StackLock, info_for_this_process, running_stack


def test_state_file_is_published_found_and_removed(tmp_path):
    home = tmp_path / "prefect"
    with StackLock(home) as lock:
        assert running_stack(home) is None  # locked, nothing published yet
        lock.publish(info_for_this_process(home, "http://127.0.0.1:4200/api", 4200, "127.0.0.1", 8765))
        info = running_stack(home)
        assert info is not None and info.pid == os.getpid()
        assert (info.ui_url, info.hook_url) == ("http://127.0.0.1:4200", "http://127.0.0.1:8765/hooks/turn-end")
        assert stack_state.state_path(home).parent == home.parent  # beside the home, not in it
        with pytest.raises(StackAlreadyRunning) as refused:
            StackLock(home).acquire()
        assert refused.value.exit_code == 5 and refused.value.code == "already_running"
        assert f"pid {os.getpid()}" in str(refused.value) and str(home) in str(refused.value)
    assert not stack_state.state_path(home).exists()
    StackLock(home).acquire().release()  # free again


@pytest.mark.parametrize("host,netloc", [("127.0.0.1", "127.0.0.1:8765"), ("::1", "[::1]:8765")])
def test_the_published_urls_are_valid_for_an_ipv6_loopback_too(tmp_path, host, netloc):
    """`serve --host ::1`: `notify` posts to the state file's hook URL, which must be one."""
    import httpx

    info = info_for_this_process(tmp_path / "prefect", "http://127.0.0.1:4200/api", 4200, host, 8765)
    url = httpx.URL(info.hook_url)
    assert (url.host, url.port, url.path) == (host, 8765, "/hooks/turn-end")
    assert info.http_url == f"http://{netloc}"


def test_a_dead_pid_s_state_file_is_ignored(tmp_path):
    home = tmp_path / "prefect"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    info = info_for_this_process(home, "http://127.0.0.1:4200/api", 4200, "127.0.0.1", 8765)
    info.pid = int(dead.stdout)
    stack_state.state_path(home).write_text(json.dumps(asdict(info)))
    assert running_stack(home) is None
    stack_state.state_path(home).write_text("not json")
    assert running_stack(home) is None


def test_use_running_stack_sets_the_api_url_only_when_unset(tmp_path, monkeypatch):
    home = tmp_path / "prefect"
    monkeypatch.setenv("DSH_MEMORY_PREFECT_HOME", str(home))
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    with StackLock(home) as lock:
        lock.publish(info_for_this_process(home, "http://127.0.0.1:4321/api", 4321, "127.0.0.1", 8765))
        assert stack_state.use_running_stack().api_url == "http://127.0.0.1:4321/api"
        assert os.environ["PREFECT_API_URL"] == "http://127.0.0.1:4321/api"
        monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")
        assert stack_state.use_running_stack() is None
        assert os.environ["PREFECT_API_URL"] == "http://127.0.0.1:9/api"


def test_a_busy_port_is_waited_for_then_a_clear_error():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert not port_free("127.0.0.1", port)
        with pytest.raises(DshMemoryError, match=f"port {port} on 127.0.0.1 \\(the Prefect server\\) is in use"):
            wait_for_port("127.0.0.1", port, "the Prefect server", "--prefect-port", seconds=1)


def test_a_port_in_time_wait_is_free():
    """The server side closes first: its socket lingers in TIME_WAIT, which a listener with
    SO_REUSEADDR (uvicorn, `prefect server start`) may bind — the UI keeps its port."""
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        conn, _ = listener.accept()
        conn.close()  # active close on the server side → TIME_WAIT on (127.0.0.1, port)
        client.recv(1)
        client.close()
    assert port_free("127.0.0.1", port)


BUSY_PORTS = [("--prefect-port", "the Prefect server", "--prefect-port"), ("--port", "the memory API", "--port")]


def test_serve_on_a_busy_port_fails_with_one_line_before_starting_anything(tmp_path):
    """Either port taken: one line naming it and its option, and no Prefect server started for
    nothing (a busy memory API port was found only after the Prefect server had started). Both
    cases run at once: each serve waits out its PORT_WAIT_SECONDS for the port."""
    runs = []
    with contextlib.ExitStack() as held:
        for busy, what, option in BUSY_PORTS:
            case = tmp_path / busy.strip("-")
            case.mkdir()
            env = {k: v for k, v in os.environ.items() if not k.startswith(("DSH_", "PREFECT_API_URL"))}
            env.update(
                HOME=str(case),
                DSH_MEMORY_ROOT=str(case / "mem"),
                DSH_MEMORY_PREFECT_HOME=str(case / "prefect-home"),
                DSH_MEMORY_IGNORE_BLOCKS="1",
            )
            listener = held.enter_context(socket.socket())
            listener.bind(("127.0.0.1", 0))
            listener.listen()
            port = listener.getsockname()[1]
            ports = {"--prefect-port": str(free_port()), "--port": str(free_port()), busy: str(port)}
            proc = subprocess.Popen(
                [sys.executable, "-m", "dsh_memory.cli", "serve", *(x for kv in ports.items() for x in kv)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            held.callback(_kill_if_running, proc)
            runs.append((proc, case, port, what, option))
        for proc, case, port, what, option in runs:
            stdout, stderr = proc.communicate(timeout=120)
            assert proc.returncode == 1, stderr
            errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
            assert errors == [
                f"error: port {port} on 127.0.0.1 ({what}) is in use by another process: stop it, "
                f"or choose another port with {option}"
            ], stderr
            assert "Traceback" not in stderr and "starting a local Prefect server" not in stdout + stderr
            home = case / "prefect-home"
            assert not home.exists() and not stack_state.state_path(home).exists()


def _kill_if_running(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.communicate()


def test_the_boot_catch_up_says_one_line_when_the_state_database_cannot_be_read(tmp_path):
    """A damaged state database at boot: the catch-up (a timer's thread of `serve`) says one line
    naming the file and schedules nothing; was an uncaught DshMemoryError, a thread's traceback in
    the stack's log."""
    from dsh_memory.serve.stack import _boot_catch_up
    from dsh_memory.settings import MemorySettings

    db = tmp_path / "mem" / ".state" / "state.sqlite3"
    db.parent.mkdir(parents=True)
    db.write_bytes(b"this is not an SQLite database\n" * 200)
    lines: list[str] = []
    _boot_catch_up(MemorySettings(memory_root=tmp_path / "mem"), lines.append)
    assert len(lines) == 1 and lines[0].startswith("boot catch-up not scheduled: cannot use the state database")
    assert str(db) in lines[0]

"""The shared Prefect server fixture really runs flows and tasks against a server."""

from prefect import flow, task
from prefect.client.orchestration import get_client


@task
def double(x: int) -> int:
    return 2 * x


@flow
def tiny_flow(n: int) -> list[int]:
    return [f.result() for f in double.map(list(range(n)))]


def test_flow_runs_against_real_server(prefect_api):
    assert tiny_flow(3) == [0, 2, 4]

    import anyio

    async def count_runs() -> int:
        async with get_client() as client:
            assert str(client.api_url).startswith(prefect_api.rstrip("/"))
            runs = await client.read_flow_runs()
            return sum(1 for r in runs if r.name and r.state and r.state.is_completed())

    assert anyio.run(count_runs) >= 1


def test_a_started_server_is_not_started_again(tmp_path):
    """`with PrefectServer(home).start() as server:` (two benches) started a second server from
    `__enter__` and lost the first one's handle: `stop()` never stopped it. Starting a running
    server is a no-op."""
    import subprocess
    import sys

    from dsh_memory.serve.prefect_server import PrefectServer

    server = PrefectServer(tmp_path)
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    server.proc = running  # the process start() would have left: alive
    try:
        with server as entered:
            assert entered is server and server.proc is running
    finally:
        running.kill()
        running.wait()
        if server.proc is not running:
            server.stop()

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


def test_servers_we_start_evaluate_the_debounce_every_second(tmp_path, monkeypatch):
    """Prefect evaluates proactive triggers every 5 s by default: a session's run came up to 5 s
    after its debounce. Our servers ask for every second, in a form Prefect's settings parse; a
    value the user set is kept."""
    import subprocess
    import sys

    from dsh_memory.serve.prefect_server import server_env

    monkeypatch.delenv("PREFECT_SERVER_EVENTS_PROACTIVE_GRANULARITY", raising=False)
    env = server_env(tmp_path)
    assert env["PREFECT_SERVER_EVENTS_PROACTIVE_GRANULARITY"] == "PT1S"
    code = "from prefect.settings import get_current_settings as s; print(s().server.events.proactive_granularity.total_seconds())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "1.0"
    monkeypatch.setenv("PREFECT_SERVER_EVENTS_PROACTIVE_GRANULARITY", "PT3S")
    assert server_env(tmp_path)["PREFECT_SERVER_EVENTS_PROACTIVE_GRANULARITY"] == "PT3S"

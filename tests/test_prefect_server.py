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

"""`dsh-memory deploy`: the prefect.yaml deployments on work pools, for `prefect worker start`
(docs/running.md, "Work pools: deploy"): missing pools are created, then every deployment is
applied as `<yaml name>-pool` with the effective settings (again: updated in place).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dsh_memory.errors import ConfigError, ServiceUnavailableError
from dsh_memory.serve.deployments import EXTRACT_POOL, MAIN_POOL, pool_deployments
from dsh_memory.settings import MemorySettings

RESULT_STORAGE_ENV = "PREFECT_RESULTS_DEFAULT_STORAGE_BLOCK"


@dataclass
class DeployReport:
    api_url: str
    pools_created: list[str] = field(default_factory=list)
    pools: list[str] = field(default_factory=list)
    deployments: list[str] = field(default_factory=list)  # "flow/deployment"
    worker_commands: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def check_result_storage(client, slug: str) -> None:
    """`local-file-system/name`, `s3-bucket/name`…: a saved block, or a clear error."""
    from prefect.exceptions import ObjectNotFound

    block_type, _, name = slug.partition("/")
    if not block_type or not name:
        raise ConfigError(f"--result-storage {slug!r}: expected BLOCK-TYPE/NAME, e.g. local-file-system/dsh-results")
    try:
        client.read_block_document_by_name(name=name, block_type_slug=block_type)
    except ObjectNotFound:
        raise ConfigError(
            f"--result-storage {slug!r}: no such block on this Prefect server; create it first "
            "(docs/running.md: Workers on other machines)"
        ) from None


def deploy(
    settings: MemorySettings,
    *,
    pool: str = MAIN_POOL,
    extract_pool: str = EXTRACT_POOL,
    result_storage: str | None = None,
    extract_only: bool = False,
) -> DeployReport:
    """Pools, then deployments (see the module doc). `extract_only`: the extract pool and
    extract-transcripts alone — for a `serve` host whose Phase 1 extracts on workers."""
    from httpx import HTTPError
    from prefect import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.exceptions import ObjectAlreadyExists
    from prefect.settings import get_current_settings

    api_url = get_current_settings().api.url or ""
    if not api_url:
        raise ConfigError(
            "deploy needs a Prefect server: set PREFECT_API_URL (a `prefect server start`, or the one "
            "`dsh-memory serve` started)"
        )
    report = DeployReport(api_url=api_url)
    pools = {MAIN_POOL: pool, EXTRACT_POOL: extract_pool}
    wanted = [extract_pool] if extract_only else list(dict.fromkeys(pools.values()))
    env = {RESULT_STORAGE_ENV: result_storage} if result_storage else None
    try:
        with get_client(sync_client=True) as client:
            if result_storage:
                check_result_storage(client, result_storage)
            for name in wanted:
                # The main pool runs this host's flows: the bound `serve` applies to itself
                # (flow_run_limit). Extract workers may be many machines: no pool-wide bound.
                limit = settings.flow_run_limit if name == pool else None
                try:  # an existing pool is left as it is
                    client.create_work_pool(WorkPoolCreate(name=name, type="process", concurrency_limit=limit))
                    report.pools_created.append(name)
                except ObjectAlreadyExists:
                    has = client.read_work_pool(name).concurrency_limit
                    if has != limit and limit is not None:
                        report.notes.append(
                            f"work pool {name} keeps its concurrency limit {has} (flow_run_limit is {limit}): "
                            f"prefect work-pool set-concurrency-limit {name} {limit}"
                        )
                report.pools.append(name)
        for deployment, work_pool in pool_deployments(settings, pools, extract_env=env):
            if work_pool not in wanted:
                continue
            deployment.apply(work_pool_name=work_pool)
            report.deployments.append(f"{deployment.flow_name}/{deployment.name}")
    except (HTTPError, OSError) as exc:
        raise ServiceUnavailableError(f"the Prefect API at {api_url} did not answer: {exc}") from None
    report.worker_commands = [f"prefect worker start --pool {p} --type process" for p in report.pools]
    if not result_storage:
        report.notes.append(
            f"extract-transcripts runs keep their results in each worker's local storage: workers of "
            f"{extract_pool} on other machines need --result-storage (docs/running.md: Workers on other machines)"
        )
    return report

"""prefect.yaml loads, every entrypoint imports, and serve builds the same deployments."""

from __future__ import annotations

import uuid

from dsh_memory.serve import deployments


def test_prefect_yaml_entrypoints_import_as_flows():
    from prefect import Flow

    specs = deployments.load_spec()
    names = {s["name"] for s in specs}
    assert names == {"catch-up", "extract-session", "consolidate", "extract-transcripts"}
    for spec in specs:
        flow = deployments.import_entrypoint(spec["entrypoint"])
        assert isinstance(flow, Flow), spec["entrypoint"]
        assert f"{flow.name}/{spec['name']}" in (
            deployments.CATCH_UP,
            deployments.EXTRACT_SESSION,
            deployments.CONSOLIDATE,
            deployments.EXTRACT_TRANSCRIPTS,
        )
    pools = {s["name"]: deployments.pool_of(s) for s in specs}
    assert pools == {
        "catch-up": deployments.MAIN_POOL,
        "extract-session": deployments.MAIN_POOL,
        "consolidate": deployments.MAIN_POOL,
        "extract-transcripts": deployments.EXTRACT_POOL,
    }


def test_yaml_intervals_are_the_interval_settings_defaults():
    """The yaml documents the defaults; the settings are what both modes apply."""
    from dsh_memory.settings import MemorySettings

    specs = {s["name"]: s for s in deployments.load_spec()}
    for name, setting in deployments.INTERVAL_SETTINGS.items():
        (schedule,) = specs[name]["schedules"]
        assert schedule["interval"] == MemorySettings.model_fields[setting].default, name


def test_one_extraction_deployment_woken_by_turn_ends_one_run_at_a_time():
    """No per-session trigger (a process per session): one reactive trigger over every session,
    firing at most once per debounce, on a deployment that runs one at a time and queues
    (never cancels) the runs asked for meanwhile, with an interval schedule as the backstop."""
    spec = {s["name"]: s for s in deployments.load_spec()}["extract-session"]
    (trigger,) = spec["triggers"]
    assert trigger["posture"] == "Reactive" and "for_each" not in trigger and "after" not in trigger
    assert trigger["expect"] == ["dsh.turn.ended"] and trigger["threshold"] == 1
    assert trigger["within"] == 180  # the default debounce
    assert "parameters" not in trigger  # the run finds its sessions in the state, not the event
    assert spec["concurrency_limit"] == {"limit": 1, "collision_strategy": "ENQUEUE"}
    assert [s["interval"] for s in spec["schedules"]] == [600]


def _settings(**kw):
    from dsh_memory.settings import MemorySettings

    return MemorySettings(memory_root="/tmp/unused", **kw)


def test_runner_deployments_apply_settings_debounce_intervals_and_consolidation_limit():
    settings = _settings(debounce_seconds=15, catch_up_interval_seconds=600, consolidate_interval_seconds=7200)
    built = {d.name: d for d in deployments.runner_deployments(settings)}
    assert set(built) == {"catch-up", "extract-session", "consolidate"}  # the extract pool's: workers only
    (trigger,) = built["extract-session"].triggers
    assert trigger.within.total_seconds() == 15  # the debounce: it only wakes the run
    for name in ("consolidate", "extract-session"):
        assert built[name].concurrency_limit == 1
        assert built[name].concurrency_options.collision_strategy.value == "ENQUEUE"
    consolidate = built["consolidate"]
    assert [s.schedule.interval.total_seconds() for s in built["catch-up"].schedules] == [600]
    assert [s.schedule.interval.total_seconds() for s in consolidate.schedules] == [7200]


def test_pool_deployments_never_share_serve_names_and_carry_the_result_storage():
    env = {"PREFECT_RESULTS_DEFAULT_STORAGE_BLOCK": "s3-bucket/x"}
    built = deployments.pool_deployments(_settings(), {"dsh-memory": "mine"}, extract_env=env)
    names = {d.name: pool for d, pool in built}
    assert names == {
        "catch-up-pool": "mine",
        "extract-session-pool": "mine",
        "consolidate-pool": "mine",
        "extract-transcripts-pool": deployments.EXTRACT_POOL,
    }
    assert not set(names) & {d.name for d in deployments.runner_deployments(_settings())}
    jobs = {d.name: d.job_variables for d, _ in built}
    assert jobs["extract-transcripts-pool"] == {"env": env} and not jobs["catch-up-pool"]


def test_turn_end_trigger_is_named_and_described():
    """The automation the trigger becomes says what it is (Automations page of the UI)."""
    spec = {s["name"]: s for s in deployments.load_spec()}["extract-session"]
    (trigger,) = spec["triggers"]
    assert trigger["name"] == "extract-session on turn end (wakes the debounced run)"
    assert "dsh.turn.ended" in trigger["description"] and "debounce" in trigger["description"]
    built = {d.name: d for d in deployments.runner_deployments(_settings(debounce_seconds=15))}
    (t,) = built["extract-session"].triggers
    assert (t.name, t.description) == (trigger["name"], trigger["description"])
    t.set_deployment_id(uuid.uuid4())
    automation = t.as_automation()
    assert automation.name == trigger["name"] and automation.description == trigger["description"]

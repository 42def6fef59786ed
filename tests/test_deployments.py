"""prefect.yaml loads, every entrypoint imports, and serve builds the same deployments."""

from __future__ import annotations

import uuid

from dsh_memory.serve import deployments


def test_prefect_yaml_entrypoints_import_as_flows():
    from prefect import Flow

    specs = deployments.load_spec()
    names = {s["name"] for s in specs}
    assert names == {"catch-up", "extract-session", "consolidate"}
    for spec in specs:
        flow = deployments.import_entrypoint(spec["entrypoint"])
        assert isinstance(flow, Flow), spec["entrypoint"]
        assert f"{flow.name}/{spec['name']}" in (
            deployments.CATCH_UP,
            deployments.EXTRACT_SESSION,
            deployments.CONSOLIDATE,
        )


def test_turn_end_trigger_is_a_per_session_trailing_debounce():
    spec = {s["name"]: s for s in deployments.load_spec()}["extract-session"]
    (trigger,) = spec["triggers"]
    assert trigger["posture"] == "Proactive"
    assert trigger["after"] == trigger["expect"] == ["dsh.turn.ended"]
    assert trigger["for_each"] == ["prefect.resource.id"]
    assert trigger["within"] == 180


def test_runner_deployments_apply_settings_debounce_and_consolidation_limit():
    built = {d.name: d for d in deployments.runner_deployments(debounce_seconds=15)}
    assert set(built) == {"catch-up", "extract-session", "consolidate"}
    (trigger,) = built["extract-session"].triggers
    assert trigger.within.total_seconds() == 15
    consolidate = built["consolidate"]
    assert consolidate.concurrency_limit == 1
    assert consolidate.concurrency_options.collision_strategy.value == "ENQUEUE"
    assert built["catch-up"].schedules and built["catch-up"].schedules[0].schedule.interval.total_seconds() == 3600


def test_turn_end_trigger_is_named_and_described():
    """The automation the trigger becomes says what it is (Automations page of the UI)."""
    spec = {s["name"]: s for s in deployments.load_spec()}["extract-session"]
    (trigger,) = spec["triggers"]
    assert trigger["name"] == "extract-session on turn end (debounced per session)"
    assert "dsh.turn.ended" in trigger["description"] and "debounce" in trigger["description"]
    built = {d.name: d for d in deployments.runner_deployments(debounce_seconds=15)}
    (t,) = built["extract-session"].triggers
    assert (t.name, t.description) == (trigger["name"], trigger["description"])
    t.set_deployment_id(uuid.uuid4())
    automation = t.as_automation()
    assert automation.name == trigger["name"] and automation.description == trigger["description"]

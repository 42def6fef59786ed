"""One PhaseModel per phase, built once by `phase_model(route, phase, settings)`: the LLM, its
output cap and effort, the input budget fitted to the model's context, the retry base; and the
Phase 1 cache key built from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_memory.errors import NoModelRouteError
from dsh_memory.llm import factory
from dsh_memory.llm.factory import PhaseModel, phase_model
from dsh_memory.llm.local import LocalLLM
from dsh_memory.llm.openai_compat import OpenAICompatLLM
from dsh_memory.phase1.prompt import PROMPT_VERSION, writer_digest
from dsh_memory.settings import MemorySettings, ModelRoute
from dsh_memory.tasks.extract import cache_key

ENV = {"DSH_MEMORY_BASE_URL": "http://127.0.0.1:9/v1", "DSH_MEMORY_API_KEY": "k", "DSH_MEMORY_MODEL": "m1"}


def _settings(tmp_path: Path, **kw) -> MemorySettings:
    return MemorySettings.from_env({"HOME": str(tmp_path)}, **kw)


def test_a_remote_model_keeps_the_configured_budgets(tmp_path):
    settings = _settings(tmp_path)
    route = ModelRoute.from_env(ENV, phase2_reasoning_effort="high")
    p1 = phase_model(route, "phase1", settings)
    assert isinstance(p1.llm, OpenAICompatLLM) and (p1.phase, p1.provider, p1.model) == ("phase1", "openai", "m1")
    assert p1.max_tokens == route.phase1_max_tokens and p1.reasoning_effort == route.phase1_reasoning_effort
    assert p1.budget_tokens == settings.transcript_budget_tokens
    p2 = phase_model(route, "2", settings)
    assert p2.phase == "phase2" and p2.max_tokens == route.phase2_max_tokens and p2.reasoning_effort == "high"
    assert p2.input_caps == {} and p2.fit(settings) is settings
    assert "llm" not in p1.model_dump()  # run history and results never carry the client


def test_a_local_model_gets_inputs_and_outputs_that_fit_its_context(tmp_path, monkeypatch):
    local = LocalLLM(tmp_path / "model.gguf", context_tokens=8192, output_reserve_tokens=1024)  # lazy: no load
    monkeypatch.setattr(factory, "make_llm", lambda route, phase: local)
    settings = _settings(tmp_path)
    route = ModelRoute.from_env({"DSH_MEMORY_PROVIDER": "local"})
    p1 = phase_model(route, "phase1", settings)
    assert p1.provider == "local" and p1.max_tokens == min(2048, route.phase1_max_tokens)
    assert p1.budget_tokens < settings.transcript_budget_tokens and p1.budget_tokens <= local.max_input_tokens
    p2 = phase_model(route, "phase2", settings)
    assert p2.max_tokens == 3072 and p2.input_caps
    fitted = p2.fit(settings)
    caps = ("max_memory_md_chars", "max_raw_chars", "max_index_chars", "max_notes_chars", "max_summary_chars")
    assert sum(getattr(fitted, k) for k in caps) <= local.max_input_tokens * 3
    assert all(getattr(fitted, k) <= getattr(settings, k) for k in caps)


def test_no_route_is_reported_with_a_fix_it_text(tmp_path):
    route = ModelRoute.from_env({"DSH_MEMORY_PROVIDER": "openai"})
    with pytest.raises(NoModelRouteError, match="DSH_MEMORY_API_KEY"):
        phase_model(route, "phase1", _settings(tmp_path))


def _model(**kw) -> PhaseModel:
    base = dict(
        phase="phase1",
        llm=OpenAICompatLLM("http://127.0.0.1:9/v1", "m1", metadata_lookup=False),
        provider="openai",
        model="m1",
        max_tokens=4096,
        reasoning_effort="",
        budget_tokens=24000,
    )
    return PhaseModel(**{**base, **kw})


def test_the_phase1_cache_key_is_built_from_the_phase_model():
    model = _model()
    key = cache_key("/mem", "sess-1", -1, 42, model)
    assert key == f"p1:/mem:sess-1:-1:42:{PROMPT_VERSION}+{writer_digest()}:openai:m1:24000"
    assert cache_key("/mem", "sess-1", -1, 42, _model(reasoning_effort="high", max_tokens=10)) == key
    others = {
        cache_key("/mem", "sess-1", -1, 42, _model(model="m2")),
        cache_key("/mem", "sess-1", -1, 42, _model(provider="local")),
        cache_key("/mem", "sess-1", -1, 42, model.with_budget(12000)),
        cache_key("/mem", "sess-1", 42, 50, model),
        cache_key("/other", "sess-1", -1, 42, model),
    }
    assert key not in others and len(others) == 5
    assert model.with_budget(12000).budget_tokens == 12000 and model.budget_tokens == 24000  # frozen: a copy


def test_the_writer_digest_changes_with_the_writers_code(tmp_path):
    """An upgrade that changes how a session becomes memory misses the extraction cache (the
    evidence writer's rules are code, not prompt text: a cached answer would be the old rules')."""
    (tmp_path / "phase1").mkdir()
    (tmp_path / "transcript").mkdir()
    (tmp_path / "phase1" / "facts.py").write_text("MAX_FACTS = 8\n")
    before = writer_digest.__wrapped__(tmp_path)
    assert writer_digest.__wrapped__(tmp_path) == before  # stable
    (tmp_path / "phase1" / "facts.py").write_text("MAX_FACTS = 9\n")
    changed = writer_digest.__wrapped__(tmp_path)
    assert changed != before
    (tmp_path / "serve.py").write_text("x = 1\n")  # outside the writer: no change
    assert writer_digest.__wrapped__(tmp_path) == changed

"""Model inputs and outputs fit the model that answers: a local model's context is small."""

from __future__ import annotations

from pathlib import Path

from dsh_memory.llm.factory import output_tokens, phase1_budget, phase2_settings
from dsh_memory.llm.local import LocalLLM
from dsh_memory.llm.openai_compat import OpenAICompatLLM
from dsh_memory.settings import MemorySettings


def _settings(tmp_path: Path) -> MemorySettings:
    return MemorySettings.from_env({"HOME": str(tmp_path)})


def test_remote_models_keep_the_configured_budgets(tmp_path):
    settings = _settings(tmp_path)
    remote = OpenAICompatLLM("http://127.0.0.1:9/v1", "some-model", metadata_lookup=False)
    assert phase1_budget(settings, remote) == settings.transcript_budget_tokens
    assert phase2_settings(settings, remote) is settings
    assert output_tokens(remote, "phase2", 32768) == 32768


def test_local_models_get_inputs_and_outputs_that_fit_their_context(tmp_path):
    settings = _settings(tmp_path)
    local = LocalLLM(tmp_path / "model.gguf", context_tokens=8192, output_reserve_tokens=1024)  # lazy: no load
    budget = phase1_budget(settings, local)
    assert budget < settings.transcript_budget_tokens and budget <= local.max_input_tokens
    small = phase2_settings(settings, local)
    caps = ("max_memory_md_chars", "max_raw_chars", "max_index_chars", "max_notes_chars", "max_summary_chars")
    assert sum(getattr(small, k) for k in caps) <= local.max_input_tokens * 3
    assert all(getattr(small, k) <= getattr(settings, k) for k in caps)
    assert output_tokens(local, "phase1", 4096) == 2048 and output_tokens(local, "phase2", 32768) == 3072
    assert output_tokens(local, "phase1", 1000) == 1000

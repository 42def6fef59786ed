"""Lenient JSON recovery (dsh_memory.llm.parse)."""

from __future__ import annotations

import re
import time

import pytest

from dsh_memory.llm.parse import (
    extract_json_object,
    loads_lenient,
    loads_truncated,
)


def test_strict_json_passes_through():
    assert loads_lenient('{"a": [1, 2, {"b": null}]}') == {"a": [1, 2, {"b": None}]}


def test_raw_newlines_and_tabs_inside_strings():
    text = '{"memory_md": "# Title\n\n- line one\n\t- tabbed"}'
    assert loads_lenient(text) == {"memory_md": "# Title\n\n- line one\n\t- tabbed"}


def test_trailing_commas_in_objects_and_arrays():
    assert loads_lenient('{"a": [1, 2, ], "b": {"c": 3,},\n}') == {"a": [1, 2], "b": {"c": 3}}


def test_comma_inside_string_before_brace_is_kept():
    assert loads_lenient('{"a": "x, }", "b": 1,}') == {"a": "x, }", "b": 1}


def test_comments_are_dropped_but_not_inside_strings():
    text = '{\n  // a comment\n  "url": "http://x/y", /* block */ "n": 1\n}'
    assert loads_lenient(text) == {"url": "http://x/y", "n": 1}


def test_invalid_escape_becomes_literal_backslash():
    assert loads_lenient('{"path": "C:\\Users\\qa"}') == {"path": "C:\\Users\\qa"}


def test_bom_and_whitespace():
    assert loads_lenient('\ufeff  {"a": 1}  ') == {"a": 1}


def test_garbage_raises_value_error():
    with pytest.raises(ValueError):
        loads_lenient("not json at all")


def test_extract_from_json_fence():
    text = 'Here you go:\n```json\n{"raw_memory": "x",\n "rollout_slug": "s"}\n```\nDone.'
    assert extract_json_object(text) == {"raw_memory": "x", "rollout_slug": "s"}


def test_extract_prefers_json_tagged_fence():
    text = '```python\nd = {"a": 1}\n```\n```json\n{"b": 2}\n```'
    assert extract_json_object(text) == {"b": 2}


def test_extract_from_prose_with_nested_braces_in_strings():
    text = 'Sure! The result is {"code": "if (x) { y(); }", "n": {"m": "}"}} and that is all {"other": 1}.'
    assert extract_json_object(text) == {"code": "if (x) { y(); }", "n": {"m": "}"}}


def test_extract_skips_non_json_braces():
    text = 'Use {braces} like {this}. Then {"a": 1}'
    assert extract_json_object(text) == {"a": 1}


def test_extract_with_accept_filter():
    text = '{"x": 1} then {"raw_memory": "r", "rollout_summary": "s"}'
    assert extract_json_object(text, accept=lambda o: "raw_memory" in o) == {"raw_memory": "r", "rollout_summary": "s"}


def test_extract_unterminated_fence():
    assert extract_json_object('```json\n{"a": 1}') == {"a": 1}


def test_extract_none_cases():
    assert extract_json_object("") is None
    assert extract_json_object("no json here") is None
    assert extract_json_object("[1, 2, 3]") is None  # an array is not an object
    assert extract_json_object('{"a": ') is None


def test_extract_raw_newline_in_prose_json():
    text = 'Answer:\n{"memory_md": "line1\nline2", "x": [1,],}'
    assert extract_json_object(text) == {"memory_md": "line1\nline2", "x": [1]}


@pytest.mark.parametrize(
    "cut, expected",
    [
        ('{"a": "abc', {"a": "abc"}),
        ('{"a": "x", "b": [1, 2', {"a": "x", "b": [1, 2]}),
        ('{"a": "x", "b', {"a": "x"}),
        ('{"a": "x", "b":', {"a": "x"}),
        ('{"a": {"b": "c\\', {"a": {"b": "c"}}),
        ('{"a": ["x", "y",', {"a": ["x", "y"]}),
        ('{"a": 1}', {"a": 1}),
    ],
)
def test_truncated_documents_close(cut, expected):
    assert loads_truncated(cut) == expected


def test_a_truncated_document_keeps_raw_newlines_and_comments_apart():
    cut = '{"memory_md": "# M\n- a", // the handbook\n "skills": [{"name": "x", "body": "y'
    assert loads_truncated(cut) == {"memory_md": "# M\n- a", "skills": [{"name": "x", "body": "y"}]}


def test_large_prose_does_not_blow_up():
    text = "{ not json " * 5000 + '{"ok": true}'
    # many unbalanced starts: bounded search returns None rather than hanging
    assert extract_json_object(text) in (None, {"ok": True})


@pytest.mark.parametrize("text", ["{" * 1_000_000, '{"' * 500_000])
def test_a_text_of_unclosed_braces_is_read_once_not_once_per_start(text):
    """An answer of braces that never close (up to 16 MiB): each of the 64 starts tried scanned
    to the end of the text, 64 passes (minutes of a consolidation, under its lock). Measured in
    CPU time against one pass over the text, with room to spare (it takes under 4)."""
    started = time.process_time()
    assert sum(1 for _ in re.finditer(r'[{}\[\]"]', text)) == len(text)
    one_pass = time.process_time() - started
    started = time.process_time()
    assert extract_json_object(text) is None
    assert time.process_time() - started < 16 * one_pass

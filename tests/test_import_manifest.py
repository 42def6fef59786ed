"""`.state/imports.json` stays bounded: every piece ever imported had a record there for good, so
records of sources deleted since (Codex prunes its recaps) grew it until its 16 MiB read cap
stopped every import."""

from __future__ import annotations

import json

from dsh_memory import imports
from tests.test_import import _env, _import, _layout


def test_the_manifest_forgets_the_oldest_pieces_whose_source_is_gone_past_its_bound(monkeypatch, tmp_path):
    lay = _layout(tmp_path)
    root = _env(monkeypatch, tmp_path, lay)
    _import("all")
    manifest_path = root / ".state" / "imports.json"
    present = json.loads(manifest_path.read_text())
    gone = {
        f"{agent}:/gone/{i}.md": {"agent": agent, "sha256": "x", "imported_at": f"2026-01-{1 + i:02d}T00:00:00+00:00"}
        for i in range(9)
        for agent in ("claude", "codex")
    }
    manifest_path.write_text(json.dumps(present | gone))
    monkeypatch.setattr(imports, "MAX_MANIFEST_ENTRIES", len(present) + 13)
    (lay["topic"] / "deploy.md").write_text("- Deploy with `make ship`.\n")  # one new piece
    rows = _import("claude")["rows"]
    assert [r["action"] for r in rows].count("import") == 1
    after = json.loads(manifest_path.read_text())
    assert len(after) == len(present) + 13
    assert set(present) < set(after)  # every piece whose source is there stays
    # Claude's gone pieces go, the oldest first; Codex's stay: this import did not read Codex
    assert sorted(k for k in after if k.startswith("claude:/gone/")) == [f"claude:/gone/{i}.md" for i in (6, 7, 8)]
    assert sum(k.startswith("codex:/gone/") for k in after) == 9

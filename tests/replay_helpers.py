"""What the replay tests share: the environment of a crafted history (its session logs, a live
memory root, the fake endpoint's settings) and the fake model's requests read back."""

from __future__ import annotations

from pathlib import Path


def tool_of(request: dict) -> str:
    """The tool a request to the fake endpoint asks for: `memory_save` (Phase 1), `memory_write` (Phase 2)."""
    return ((request.get("tools") or [{}])[0].get("function") or {}).get("name") or ""


def text_of(request: dict) -> str:
    return "\n".join(str(m.get("content") or "") for m in request.get("messages", []))


def replay_env(tmp_path: Path, monkeypatch) -> dict[str, Path]:
    """The settings of a replay over the DSH sessions under `tmp_path/dsh` (no Codex, no Claude
    logs), with a live memory root holding one file (it must stay as it is) and the temporary
    folder under `tmp_path/tmp`; the endpoint's URL is the test's to set."""
    dsh, live, tmp = tmp_path / "dsh", tmp_path / "live", tmp_path / "tmp"
    (live / ".state").mkdir(parents=True)
    (live / "MEMORY.md").write_text("# Memory\n\n- the live handbook\n")
    (tmp_path / "home").mkdir()
    tmp.mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DSH_HOME", str(dsh))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "none"))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "none"))
    monkeypatch.setenv("DSH_MEMORY_ROOT", str(live))
    monkeypatch.setenv("DSH_MEMORY_API_KEY", "test-key")
    monkeypatch.setenv("DSH_MEMORY_MODEL", "fake-model")
    monkeypatch.setenv("DSH_MEMORY_MAX_ROLLOUT_AGE_DAYS", "0")
    monkeypatch.setenv("TMPDIR", str(tmp))
    return {"dsh": dsh, "live": live, "tmp": tmp}

"""The skills inventory Phase 2 is shown: each skill folder's name, description, project, first
lines and files (no symlinks followed), so the model updates a skill rather than duplicate it."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from dsh_memory.errors import UserInputError

SKILL_NAME_PATTERN = "^[a-z0-9][a-z0-9-]{0,79}$"  # the memory_write tool's too (prompt.py)
SKILL_NAME_RE = re.compile(SKILL_NAME_PATTERN)
SKILL_FILES_LISTED = 20
MAX_SKILL_DEPTH = 8  # folders below a skill's own that its files are listed from
SKILL_MD_HEAD_CHARS = 8192


def one_line(text: Any, limit: int = 200) -> str:
    """`text` on one line, at most `limit` characters."""
    s = re.sub(r"\s+", " ", str(text or "")).strip()
    return s if len(s) <= limit else s[: limit - 1] + "…"


def read_optional(path: os.PathLike) -> str | None:
    """A file's text, or None when it does not exist or is no regular file (never waits on a FIFO)."""
    from dsh_memory.storage.store_format import read_regular

    try:
        return read_regular(path)
    except (FileNotFoundError, NotADirectoryError, UserInputError):
        return None


@dataclass
class SkillInfo:
    name: str
    description: str
    first_lines: list[str]
    files: list[str]
    project: str = ""  # front matter `project:` (a project's procedure); "" is global

    def render(self) -> str:
        out = [f"### skill {self.name}", f"description: {self.description or '(none)'}"]
        if self.project:
            out.append(f"project: {self.project}")
        if self.first_lines:
            out.append("starts with: " + " / ".join(self.first_lines))
        out.append("files: " + (", ".join(self.files) if self.files else "SKILL.md only"))
        return "\n".join(out) + "\n\n"


def _frontmatter(text: str) -> tuple[dict[str, str], str]:
    if not text.startswith("---"):
        return {}, text
    end = text.find("\n---", 3)
    if end < 0:
        return {}, text
    fields: dict[str, str] = {}
    for ln in text[3:end].splitlines():
        k, sep, v = ln.partition(":")
        if sep and k.strip() and not k.startswith((" ", "\t")):
            fields[k.strip()] = v.strip().strip("\"'")
    return fields, text[end + 4 :].partition("\n")[2]


def skills_inventory(skills_dir: os.PathLike) -> list[SkillInfo]:
    """Name, description, first lines and files of every skill folder (no symlinks followed)."""

    out: list[SkillInfo] = []
    if not os.path.isdir(skills_dir) or os.path.islink(skills_dir):
        return out
    for entry in sorted(os.scandir(skills_dir), key=lambda e: e.name):
        if not SKILL_NAME_RE.fullmatch(entry.name) or not entry.is_dir(follow_symlinks=False):
            continue
        skill_md = os.path.join(entry.path, "SKILL.md")
        text = "" if os.path.islink(skill_md) else (read_optional(skill_md) or "")
        fields, body = _frontmatter(text[:SKILL_MD_HEAD_CHARS])
        first = [one_line(ln, 120) for ln in body.splitlines() if ln.strip()][:3]
        files: list[str] = []
        for dirpath, dirnames, filenames in os.walk(entry.path):  # os.walk does not follow symlinks
            deep = dirpath.count(os.sep) - entry.path.count(os.sep) >= MAX_SKILL_DEPTH  # (it recurses per level)
            dirnames[:] = [] if deep else sorted(d for d in dirnames if not d.startswith("."))
            for fn in sorted(filenames):
                rel = os.path.relpath(os.path.join(dirpath, fn), entry.path).replace(os.sep, "/")
                if rel != "SKILL.md" and not fn.startswith("."):
                    files.append(rel)
            if len(files) >= SKILL_FILES_LISTED:
                break
        out.append(
            SkillInfo(
                name=entry.name,
                description=one_line(fields.get("description"), 300),
                first_lines=first,
                files=files[:SKILL_FILES_LISTED],
                project=one_line(fields.get("project"), 300),
            )
        )
    return out

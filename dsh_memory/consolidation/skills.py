"""Validate the skills a consolidation model writes: a name that is a plain folder name, files
only under scripts/, templates/ or examples/ made of plain segments, sizes within bounds, and a
SKILL.md whose frontmatter names its folder. Pure: nothing here touches the filesystem
(`apply.py` writes what passes)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from dsh_memory.consolidation.output import stored
from dsh_memory.consolidation.skill_inventory import SKILL_NAME_RE
from dsh_memory.transcript.redact import contains_secret, redact

SKILL_SUBDIRS = ("scripts", "templates", "examples")
_SEGMENT_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,99}$")
MAX_SKILL_PATH_CHARS = 200
MAX_SKILL_DEPTH = 4
MAX_FILES_PER_SKILL = 20
MAX_SKILL_MD_CHARS = 40_000
MAX_SKILL_FILE_CHARS = 60_000


class SkillError(ValueError):
    """A skill (or one of its files) failed validation; the message says why."""


def validate_skill_name(name: Any) -> str:
    if not isinstance(name, str):
        raise SkillError(f"skill name must be a string, got {type(name).__name__}")
    if not SKILL_NAME_RE.fullmatch(name):
        raise SkillError(f"invalid skill name {redact(name)[:100]!r} (expected {SKILL_NAME_RE.pattern})")
    if contains_secret(name):  # a folder name is not redacted on write
        raise SkillError("skill name looks like a secret")
    return name


def validate_skill_file_path(path: Any) -> str:
    """A relative path under scripts/, templates/ or examples/, made of plain segments."""
    if not isinstance(path, str):
        raise SkillError(f"file path must be a string, got {type(path).__name__}")
    if contains_secret(path):  # a file name is not redacted on write
        raise SkillError("file path looks like a secret")
    shown = path[:100]
    if not path or len(path) > MAX_SKILL_PATH_CHARS:
        raise SkillError(f"file path empty or too long: {shown!r}")
    if "\x00" in path or "\\" in path or any(ord(c) < 32 for c in path):
        raise SkillError(f"file path contains NUL, backslash or control characters: {shown!r}")
    if path.startswith("/") or os.path.isabs(path) or re.match(r"^[A-Za-z]:", path):
        raise SkillError(f"absolute file path: {shown!r}")
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise SkillError(f"file path with empty, '.' or '..' segments: {shown!r}")
    if parts[0] not in SKILL_SUBDIRS or len(parts) < 2:
        raise SkillError(f"file path must be under {', '.join(SKILL_SUBDIRS)}: {shown!r}")
    if len(parts) > MAX_SKILL_DEPTH:
        raise SkillError(f"file path nested too deep: {shown!r}")
    bad = next((p for p in parts if not _SEGMENT_RE.fullmatch(p)), None)
    if bad is not None:
        raise SkillError(f"invalid path segment {bad[:60]!r} in {shown!r}")
    return path


@dataclass
class ValidSkill:
    name: str
    skill_md: str
    files: list[tuple[str, str]]


def ensure_frontmatter(name: str, skill_md: str) -> str:
    """SKILL.md starts with YAML frontmatter whose `name` is the folder name."""
    text = skill_md.lstrip("\ufeff")
    if text.startswith("---\n"):
        end = text.find("\n---", 3)
        if end > 0:
            head, rest = text[4:end], text[end:]
            lines = head.split("\n")
            idx = next((i for i, ln in enumerate(lines) if ln.startswith("name:")), None)
            if idx is None:
                lines.insert(0, f"name: {name}")
            else:
                lines[idx] = f"name: {name}"
            if not any(ln.startswith("description:") for ln in lines):
                lines.insert(1, f"description: {name}")
            return "---\n" + "\n".join(lines) + rest
    first = next((ln.strip().lstrip("#").strip() for ln in text.splitlines() if ln.strip()), name)
    desc = re.sub(r"[\r\n\"]", " ", first)[:200]
    return f'---\nname: {name}\ndescription: "{desc}"\n---\n\n{text}'


def validate_skill(item: Any) -> ValidSkill:
    """Pure validation of one `skills[]` item. Raises SkillError."""
    if not isinstance(item, dict):
        raise SkillError("skill entry is not an object")
    name = validate_skill_name(item.get("name"))
    skill_md = item.get("skill_md")
    if not isinstance(skill_md, str) or not skill_md.strip():
        raise SkillError(f"skill {name}: skill_md is empty")
    if len(skill_md) > MAX_SKILL_MD_CHARS:
        raise SkillError(f"skill {name}: SKILL.md longer than {MAX_SKILL_MD_CHARS} characters")
    files_in = item.get("files") or []
    if not isinstance(files_in, list):
        raise SkillError(f"skill {name}: files is not a list")
    if len(files_in) > MAX_FILES_PER_SKILL:
        raise SkillError(f"skill {name}: more than {MAX_FILES_PER_SKILL} files")
    files: list[tuple[str, str]] = []
    for f in files_in:
        if not isinstance(f, dict):
            raise SkillError(f"skill {name}: file entry is not an object")
        path = validate_skill_file_path(f.get("path"))
        content = f.get("content")
        if not isinstance(content, str):
            raise SkillError(f"skill {name}: {path} has no text content")
        if len(content) > MAX_SKILL_FILE_CHARS:
            raise SkillError(f"skill {name}: {path} longer than {MAX_SKILL_FILE_CHARS} characters")
        a = path.casefold() + "/"
        if any(a.startswith(b) or b.startswith(a) for b in (p.casefold() + "/" for p, _ in files)):
            raise SkillError(f"skill {name}: {path} listed twice, or as a file and a folder")
        files.append((path, stored(content)))
    return ValidSkill(name=name, skill_md=ensure_frontmatter(name, stored(skill_md)), files=files)

"""A rendered transcript read back into its tagged blocks (`[user]`, `[tool]`, `[result …]`, …),
so that the clean-up of a model's answer (`postprocess`) and the scope rule (`scoping`) can tell who
said what: tags start at column 0 and the renderer escapes tags inside non-human text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from dsh_memory.phase1.commands import argv_line

_TAG = re.compile(r"^\[(user|assistant|tool|result|hidden|compaction|status|delta|note)\b([^\]]*)\](.*)$")
_OMITTED = re.compile(r"^\[… .*omitted.*…\]$")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"'(\[])|\n+")
_CALL = re.compile(r"^[^()\s]+\((.*)\)$", re.S)  # a tool block: `name(argument summary)`
_COMMAND_ARG = re.compile(r'^(?:command|cmd)=(\[.*?\]|"(?:[^"\\]|\\.)*")', re.S)


@dataclass
class Block:
    tag: str  # user | assistant | tool | result | hidden | …
    text: str


def blocks(text: str) -> list[Block]:
    """The tagged blocks of a rendered transcript (the header lines before the first tag and the
    renderer's own omission markers dropped)."""
    out: list[Block] = []
    for line in (text or "").split("\n"):
        m = _TAG.match(line)
        if m:
            out.append(Block(m.group(1), m.group(3).lstrip()))
        elif _OMITTED.match(line.strip()):
            out.append(Block("note", line.strip()))  # never part of the block before it
        elif out:
            out[-1].text += "\n" + line
    for b in out:
        b.text = b.text.strip()
    return out


def sentences(text: str) -> list[str]:
    parts = [s.strip() for s in _SENTENCE.split(text or "")]
    return [s for s in parts if len(s) >= 3]


def command_of(b: Block) -> str | None:
    """The shell command line of a tool block, if it ran one."""
    call = _CALL.match(b.text)
    m = _COMMAND_ARG.match(call.group(1).strip()) if call else None
    if not m:
        return None
    try:
        value = json.loads(m.group(1))
    except ValueError:
        return None
    return argv_line(value)

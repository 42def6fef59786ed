"""Safe HTML out of memory files (untrusted: model output and session text) and the page
templates; the rules are docs/security.md's (The vault). Links inside the memory are rewritten
to the vault's reader.
"""

from __future__ import annotations

import posixpath
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markdown_it import MarkdownIt
from markupsafe import Markup

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"
SAFE_SCHEMES = ("http", "https", "mailto")
READER = "/vault/file"


def _safe_link(url: str) -> bool:
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return False
    return parts.scheme.lower() in SAFE_SCHEMES if parts.scheme else not url.strip().startswith("//")


def reader_url(path: str, line: int | None = None) -> str:
    """The vault's address of one memory file (and one of its lines)."""
    url = f"{READER}?path={quote(path, safe='/')}"
    return f"{url}&view=lines&line={line}#L{line}" if line else url


def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.disable("image")
    md.validateLink = _safe_link

    def link_open(renderer, tokens, idx, options, env):
        token = tokens[idx]
        href = token.attrGet("href") or ""
        if urlsplit(href).scheme:
            token.attrSet("rel", "noopener noreferrer nofollow")
        elif not href.startswith("#"):  # a path: relative to the file being shown, inside the memory
            target, _, fragment = href.partition("#")
            target = unquote(target)  # markdown-it percent-encoded it; reader_url encodes it once
            base = posixpath.dirname(env.get("path", ""))
            rel = posixpath.normpath(posixpath.join(base, target.lstrip("/")))
            token.attrSet("href", reader_url(rel) + (f"#{fragment}" if fragment else ""))
        return renderer.renderToken(tokens, idx, options, env)

    md.add_render_rule("link_open", link_open)
    return md


MARKDOWN = _markdown()


def markdown(text: str, path: str = "") -> Markup:
    """Rendered markdown, safe to put in a page (`path`: the file's, for its relative links)."""
    return Markup(MARKDOWN.render(text or "", {"path": path}))


def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(TEMPLATES)),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["markdown"] = markdown
    env.globals["reader_url"] = reader_url
    env.filters["when"] = _when
    return env


def _when(value: Any) -> str:
    """A date-time for people: `2026-11-30 14:02 UTC`; '-' for none."""
    if not value:  # None, '' or a field the status does not have yet (uninitialized memory)
        return "-"
    if hasattr(value, "strftime"):
        return value.strftime("%Y-%m-%d %H:%M UTC")
    return str(value)[:16].replace("T", " ")

"""Pydantic models in and out of the read path. Adapters validate with the *Request models
(unknown fields refused) and serialize the result models; nothing else crosses the boundary."""

from __future__ import annotations

import os
import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

SearchMode = Literal["any", "all_on_same_line", "all_within_lines", "ranked"]

DEFAULT_LIST_RESULTS = 200
MAX_LIST_RESULTS = 2000
DEFAULT_READ_LINES = 400
MAX_READ_LINES = 5000
MAX_READ_CHARS = 64_000  # ≈ 16–20k tokens: one read never floods a context window
MAX_QUERIES = 16  # queries in one search
MAX_QUERY_CHARS = 1_000  # a question or a line of an error, not a pasted log (queries are echoed per page)
DEFAULT_SEARCH_RESULTS = 20
MAX_SEARCH_RESULTS = 500
# One search page is sized for an agent's context: by default at most ≈ 8,000 characters of
# JSON (≈ 2,000 tokens at ≈ 4 characters a token); the rest comes page by page (next_cursor).
DEFAULT_SEARCH_CHARS = 8_000
MAX_SEARCH_CHARS = 64_000
CHARS_PER_TOKEN = 4
MAX_NOTE_CHARS = 20_000
SUMMARY_BEGIN = "===== MEMORY SUMMARY (dsh-memory) BEGINS ====="
SUMMARY_END = "===== MEMORY SUMMARY ENDS ====="


MAX_CWD_CHARS = 4096


def is_utf8(text: str) -> bool:
    """No lone surrogate: a file name os.scandir decoded from bytes that are no UTF-8, or a JSON
    string's `\\udce9`. Such text cannot be written out as JSON (a result, an error) or indexed."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shown_name(name: str) -> str:
    """A file name as `list` shows it: one that is no UTF-8 (another system's bytes) with each
    such byte escaped, `caf\\xe9.md` (as it is, it cannot be written out, linked or indexed)."""
    return name if is_utf8(name) else os.fsencode(name).decode("utf-8", "backslashreplace")


def cwd_problem(cwd: str | None) -> str | None:
    """Why `cwd` names no project ('' when it does, None when there is no cwd): a NUL byte, a blank
    or a relative path is refused, never read as "no cwd" (every project's memory). The CLI makes
    a relative `--cwd` absolute first; a server has no business resolving one against its own."""
    if cwd is None:
        return None
    if "\x00" in cwd:
        return "cwd contains a NUL byte"
    if not cwd.strip():
        return "cwd is blank (leave it out, or null, for every project's memory)"
    if not os.path.isabs(os.path.expanduser(cwd)):
        return f"cwd must be an absolute path, not {cwd[:80]!r}"
    return ""


def _check_cwd(cwd: str | None) -> str | None:
    if problem := cwd_problem(cwd):
        raise ValueError(problem)
    return cwd


# The project parameters, declared once and used by summary, list and search.
Cwd = Annotated[
    str | None,
    Field(
        max_length=MAX_CWD_CHARS,
        description="The asking session's working directory (an absolute path); its repository root is the project: "
        "that project's memory and global memory only (null: every project's memory)",
    ),
    AfterValidator(_check_cwd),
]
OtherProjects = Annotated[
    bool, Field(description="With cwd: also return other projects' memories, after this project's and global ones")
]


class _Request(BaseModel):
    """The parameters of one read-path operation, declared once: the core validates with it, the
    RPC passes its params through it, and the CLI options and MCP tool schemas are generated from
    its fields (`readpath.params`). Descriptions are the help text everywhere."""

    model_config = ConfigDict(extra="forbid")


class SummaryRequest(_Request):
    """summary: the global part plus the project's part of the summary, within the
    max_summary_chars setting."""

    cwd: Cwd = None


def utf8_path(v: str | None) -> str | None:
    """`v` unless it holds a lone surrogate (list, read and search refuse such a path alike)."""
    if v is not None and not is_utf8(v):  # a JSON "\udce9": the name `list` shows escaped, or no name at all
        raise ValueError("path is not UTF-8 text (list shows such a file's name escaped: rename the file)")
    return v


UTF8_PATH = AfterValidator(utf8_path)


class ListRequest(_Request):
    path: Annotated[str, UTF8_PATH] = Field(
        "", description="Directory (or file) relative to the memory root; '' is the root"
    )
    cursor: str | None = Field(None, description="next_cursor from the previous page, unchanged")
    max_results: int = Field(DEFAULT_LIST_RESULTS, ge=1, le=MAX_LIST_RESULTS, description="Entries per page")
    cwd: Cwd = None
    other_projects: OtherProjects = False


class ReadRequest(_Request):
    path: Annotated[str, UTF8_PATH] = Field(description="File relative to the memory root, e.g. MEMORY.md")
    start_line: int = Field(
        1, ge=1, description="First line to return (1-based), e.g. a search hit's start_line or next_start_line"
    )
    max_lines: int = Field(
        DEFAULT_READ_LINES,
        ge=1,
        le=MAX_READ_LINES,
        description=f"At most this many lines (and at most {MAX_READ_CHARS:,} characters)",
    )


class SearchRequest(_Request):
    queries: list[str] = Field(
        min_length=1,
        max_length=MAX_QUERIES,
        description="One or more queries: substrings (line modes), or a question or keywords (ranked); "
        f"each at most {MAX_QUERY_CHARS:,} characters",
    )
    mode: SearchMode = Field(
        "any",
        description="any: lines with any query; all_on_same_line: all queries on one line; all_within_lines: "
        "all queries within within_lines lines; ranked: questions or keywords, the lines that answer first "
        "(BM25 words, stemmed, stopwords dropped; fused with a small embedding model's likeness when the "
        "semantic extra is installed, unless the semantic_search setting is off)",
    )
    within_lines: int = Field(5, ge=1, le=200, description="Window size in lines for all_within_lines")
    case_sensitive: bool = Field(False, description="Match case exactly (line modes)")
    normalized: bool = Field(False, description="Ignore punctuation and spacing: foo-bar ≈ foo_bar ≈ foo bar")
    context_lines: int = Field(0, ge=0, le=20, description="Lines of context before and after each match")
    # a name in another system's bytes: no hit could be cited
    path: Annotated[str | None, UTF8_PATH] = Field(None, description="Only search under this file or directory")
    cursor: str | None = Field(None, description="next_cursor from the previous page, unchanged")
    max_results: int = Field(DEFAULT_SEARCH_RESULTS, ge=1, le=MAX_SEARCH_RESULTS, description="Matches per page")
    max_chars: int = Field(
        DEFAULT_SEARCH_CHARS,
        ge=1000,
        le=MAX_SEARCH_CHARS,
        description=f"At most this many characters of JSON per page (≈ {CHARS_PER_TOKEN} a token); "
        "the matches past it come with next_cursor",
    )
    cwd: Cwd = None
    other_projects: OtherProjects = False

    @field_validator("queries")
    @classmethod
    def _non_empty(cls, v: list[str]) -> list[str]:
        if any(not q.strip() for q in v):
            raise ValueError("every query must contain a non-blank character")
        if any("\x00" in q for q in v):
            raise ValueError("queries must not contain NUL")
        if any(len(q) > MAX_QUERY_CHARS for q in v):
            raise ValueError(f"a query may have at most {MAX_QUERY_CHARS:,} characters")
        if not all(is_utf8(q) for q in v):
            raise ValueError("a query is not UTF-8 text (it holds a lone surrogate)")
        return v


NOTE_CWD_CHARS = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]")  # a line break would end the project's name


class AddRequest(_Request):
    note: str = Field(
        min_length=1, max_length=MAX_NOTE_CHARS, description="What to remember, forget or correct, in plain words"
    )
    title: str | None = Field(None, max_length=120, description="Short title (used in the file name)")
    cwd: Annotated[
        Cwd,
        Field(
            description="The working directory the note is about (an absolute path; the CLI's default: where it "
            "runs, the stdio MCP server's: where it was started): the note is for its project (repository root) only"
        ),
    ] = None
    scope: Literal["project", "global"] = Field(
        "project",
        description="project: injected into cwd's project only; global: into every project's sessions (only for "
        "what the user says holds everywhere)",
    )

    @field_validator("note")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("note must not be blank")
        return v

    @field_validator("cwd")
    @classmethod
    def _one_name(cls, v: str | None) -> str | None:
        if v is not None and NOTE_CWD_CHARS.search(v):
            raise ValueError("cwd must be one path on one line (no control characters)")
        return v


class DeleteRequest(_Request):
    path: Annotated[str, UTF8_PATH] = Field(
        description="File relative to the memory root (never a pipeline file or a directory)"
    )


class Summary(BaseModel):
    path: str = "memory_summary.md"
    content: str = Field(description="memory_summary.md, capped at max_chars ('' when memory is empty)")
    truncated: bool = False
    chars: int = Field(0, description="Length of the full file content before capping")
    empty: bool = True
    instructions: str = Field(description="How an agent should use memory (when, citations, staleness)")
    memory_root: str = ""
    project: str | None = Field(None, description="The project of cwd (None: no cwd given, every part shown)")
    projects_shown: list[str] = Field(default_factory=list, description="Project parts included")
    other_projects: list[str] = Field(default_factory=list, description="Projects with memories not shown")
    stale: int = Field(0, description="Lines of the project's part flagged 'may be stale' (they cite what is gone)")
    aged: int = Field(0, description="Lines of the project's part learned more than stale_after_days ago")
    left_out: int = Field(0, description="Lines named as not shown (over the budget), each part's count added up")

    def injection(self) -> str:
        """The whole block a session-start hook injects: instructions + the summary between
        markers; '' when there is no memory yet (inject nothing)."""
        if self.empty:
            return ""
        return f"{self.instructions}\n\n{SUMMARY_BEGIN}\n{self.content}\n{SUMMARY_END}\n"


SCOPE_DESCRIPTION = "Where it applies: global, project <repository root>, or mixed (a file with parts of several)"


class Entry(BaseModel):
    path: str
    type: Literal["file", "directory"]
    size: int | None = None
    scope: str | None = Field(None, description=SCOPE_DESCRIPTION)


class ListResult(BaseModel):
    path: str
    entries: list[Entry]
    next_cursor: str | None = None
    truncated: bool = False


class ReadResult(BaseModel):
    path: str
    start_line: int = Field(description="1-based number of the first returned line")
    end_line: int = Field(description="1-based number of the last returned line (start_line-1 if none)")
    total_lines: int
    content: str
    truncated: bool = Field(description="More lines follow, or the size cap cut the slice")
    next_start_line: int | None = Field(None, description="start_line to pass to continue reading")


class SearchMatch(BaseModel):
    path: str
    start_line: int = Field(description="First line of content (1-based); cite as path:start_line-end_line")
    end_line: int
    match_line: int = Field(description="Line where the match (or window) starts; ranked: the line that answers best")
    match_end_line: int = Field(description="Line where the match (or window) ends")
    content: str
    matched_queries: list[str] = Field(default_factory=list)
    score: float | None = Field(None, description="ranked mode: relevance of the cited line (higher is better)")
    scope: str | None = Field(None, description=SCOPE_DESCRIPTION)


class SearchResult(BaseModel):
    queries: list[str]
    mode: SearchMode
    path: str | None = Field(None, description="The file or directory searched (None: the whole memory)")
    matches: list[SearchMatch]
    next_cursor: str | None = Field(None, description="Pass back as cursor (same other arguments) for more")
    truncated: bool = Field(False, description="More matches follow (next_cursor)")
    skipped: str | None = Field(
        None,
        description="The files not searched (over 4 MiB, not UTF-8 or not readable; read them with read), in one line: "
        "'skipped 1 file: MEMORY.md (over 4 MiB)'; with next_cursor, those met so far",
    )


class AddResult(BaseModel):
    path: str = Field(description="Path of the new note relative to the memory root")
    scope: str = Field("global", description="Where it will be injected: global, or project <repository root>")


class DeleteResult(BaseModel):
    path: str
    deleted: bool

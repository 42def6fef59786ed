"""Ranked search's semantic half (embedder.py, vectors.py, fusion.py) on a real index over real
files: vectors follow new, replaced, renamed and deleted files; a paraphrase that lexical search
misses is found; nothing is downloaded; the `semantic_search` setting (auto / on / off) reaches the
search core from the memory context; without the model, 'auto' is lexical only and 'on' fails
with one clear line."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dsh_memory import readpath as rp
from dsh_memory.readpath import embedder, index, vectors
from dsh_memory.storage.store import MemoryStore
from tests.fs_helpers import age
from tests.semantic_helpers import BLOCK_WORDLLAMA

pytestmark = pytest.mark.skipif(
    embedder.get() is None, reason="the semantic extra is not installed (.ci/run installs it)"
)
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture()
def store(tmp_path) -> MemoryStore:
    s = MemoryStore(tmp_path / "mem")
    s.ensure_layout()
    (s.root / "MEMORY.md").write_text("# Handbook\n- run the linter before pushing\n- deploys go through staging\n")
    (s.rollout_dir / "a.md").write_text(
        "# Ledger\n- the settlement test failed on Mondays\n- we froze the clock with freezegun\n"
    )
    (s.rollout_dir / "car.md").write_text(
        "# Morning\n- user: my automobile would not start this morning\n"
        "- assistant: the battery was flat, so we jump-started it from a neighbour's\n"
    )
    return s


def _slots(store) -> dict[str, list[int | None]]:
    conn = index._connect(store)
    out: dict[str, list[int | None]] = {}
    for path, slot in conn.execute("SELECT path, slot FROM sections ORDER BY id"):
        out.setdefault(path, []).append(slot)
    return out


def _nearest_paths(store, text: str) -> list[str]:
    emb = embedder.get()
    conn = index._connect(store)
    got = vectors.nearest(conn, index._vectors_path(store), emb.embed([text])[0], ("", []), 10)
    return [p for _, p, *_ in got]


def test_vectors_follow_new_replaced_renamed_and_deleted_files(store):
    age(store.root)  # written long ago: an update re-reads only what changed (not what is recent)
    index.refresh(store, force=True)
    first = _slots(store)
    assert set(first) == {"MEMORY.md", "rollout_summaries/a.md", "rollout_summaries/car.md"}
    assert all(s is not None for slots in first.values() for s in slots)
    taken = sorted(s for slots in first.values() for s in slots)
    assert taken == list(range(len(taken)))  # one row each, no gaps
    vfile = index._vectors_path(store)
    assert vfile.stat().st_size == len(taken) * vectors.DIM * 4

    (store.rollout_dir / "a.md").unlink()
    index.refresh(store, force=True)
    assert "rollout_summaries/a.md" not in _slots(store)
    assert "rollout_summaries/a.md" not in _nearest_paths(store, "settlement test Mondays freezegun")

    # the freed row is reused by a later update, not appended
    (store.rollout_dir / "b.md").write_text("# Cache\n- redis evictions made the cache cold\n")
    age(store.rollout_dir / "b.md")
    index.refresh(store, force=True)
    assert _slots(store)["rollout_summaries/b.md"] == first["rollout_summaries/a.md"]
    assert vfile.stat().st_size == len(taken) * vectors.DIM * 4
    assert _nearest_paths(store, "redis cache evictions")[0] == "rollout_summaries/b.md"

    os.replace(store.rollout_dir / "b.md", store.rollout_dir / "c.md")  # renamed
    index.refresh(store, force=True)
    slots = _slots(store)
    assert "rollout_summaries/b.md" not in slots and slots["rollout_summaries/c.md"][0] is not None
    assert _nearest_paths(store, "redis cache evictions")[0] == "rollout_summaries/c.md"


def test_a_rebuilt_index_reuses_the_vector_file(store):
    index.refresh(store, force=True)
    vfile = index._vectors_path(store)
    size = vfile.stat().st_size
    index._connect(store).execute("PRAGMA user_version=0")  # an index from another version
    index._local.conns.clear()  # a fresh process
    index._embedded.clear()
    index.refresh(store, force=True)
    assert vfile.stat().st_size == size  # every row rewritten in place, none appended
    assert all(s is not None for slots in _slots(store).values() for s in slots)
    assert _nearest_paths(store, "automobile would not start, battery flat")[0] == "rollout_summaries/car.md"


def test_vectors_are_built_for_an_index_made_before_the_embedder_was_on(store, monkeypatch):
    index.refresh(store, force=True, semantic_search="off")  # lexical only: no vectors
    assert all(s is None for slots in _slots(store).values() for s in slots)
    assert not index._vectors_path(store).exists()
    monkeypatch.setattr(index, "_embedded", set())  # a fresh process
    rp.search(store, ["battery"], mode="ranked")  # 'auto' (the default), the model installed
    assert all(s is not None for slots in _slots(store).values() for s in slots)


def test_a_file_indexed_with_semantic_search_off_gets_its_vector_when_it_is_on_again(store):
    index.refresh(store, force=True)
    (store.rollout_dir / "d.md").write_text("# Kettle\n- the kettle tripped the fuse in the kitchen\n")
    rp.search(store, ["kettle"], mode="ranked", semantic_search="off")  # indexed without a vector
    assert _slots(store)["rollout_summaries/d.md"] == [None]
    rp.search(store, ["kettle"], mode="ranked", semantic_search="on")  # same process
    assert _slots(store)["rollout_summaries/d.md"][0] is not None


QUESTION = ["why wouldn't the vehicle's engine turn over?"]  # says what car.md says in other words


def test_semantic_search_finds_a_paraphrase_that_lexical_search_misses(store):
    lexical = rp.search(store, QUESTION, mode="ranked", semantic_search="off")
    assert all(m.path != "rollout_summaries/car.md" for m in lexical.matches)
    fused = rp.search(store, QUESTION, mode="ranked")  # 'auto', the default: fused, the model is installed
    first = fused.matches[:2]
    assert [m.path for m in first] == ["rollout_summaries/car.md"] * 2
    lines = (store.rollout_dir / "car.md").read_text().splitlines()
    cited = [lines[m.match_line - 1] for m in first]  # line-precise: the cited line is the content's
    assert [m.content.splitlines()[m.match_line - m.start_line] for m in first] == cited
    assert "automobile would not start" in cited[0]  # the same thing in other words first
    assert "battery was flat" in cited[1]  # then the answer after it


def test_a_damaged_model_file_is_not_loaded(tmp_path):
    folder = embedder._folder()
    copy = tmp_path / "wordllama"
    for name in embedder.SHA256:
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(folder / name, copy / name)
    embedder.Embedder(copy)  # the pinned files load
    with open(copy / embedder.WEIGHTS, "r+b") as f:
        f.seek(4096)
        f.write(b"\0\1\2\3")
    with pytest.raises(ValueError, match="not the pinned file"):
        embedder.Embedder(copy)


def _run(parts: list[str], store_root: Path, env_extra: dict[str, str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "DSH_MEMORY_IGNORE_BLOCKS": "1", **env_extra}
    env.pop("DSH_MEMORY_SEMANTIC_SEARCH", None)
    code = "\n".join(textwrap.dedent(p) for p in parts)
    return subprocess.run(
        [sys.executable, "-c", code, str(store_root)],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
    )


_SEARCH = """
    import sys
    from dsh_memory import readpath as rp
    from dsh_memory.readpath import embedder, index
    from dsh_memory.storage.store import MemoryStore
    store = MemoryStore(sys.argv[1])
    res = rp.search(store, ["settlement Mondays"], mode="ranked")  # 'auto', the default
    print(embedder.get() is not None, index._vectors_path(store).exists(), res.matches[0].path)
"""


def test_without_the_model_search_is_lexical_only(store):
    res = _run([BLOCK_WORDLLAMA, _SEARCH], store.root, {})
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["False", "False", "rollout_summaries/a.md"]
    res = _run([_SEARCH], store.root, {})  # the same, with the model: vectors are written
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["True", "True", "rollout_summaries/a.md"]


def test_the_model_loads_with_the_network_cut(store):
    no_network = """
        import socket
        def refuse(*a, **k):
            raise OSError("network is cut in this test")
        socket.socket.connect = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
    """
    res = _run([no_network, _SEARCH], store.root, {"HF_HUB_OFFLINE": "1", "HOME": str(store.root.parent)})
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["True", "True", "rollout_summaries/a.md"]
    assert not (store.root.parent / ".cache").exists()  # no model cache either


def test_a_cjk_question_is_ranked_lexically(store):
    """The model's tokenizer does not know CJK words: an unrelated CJK question is as like a CJK
    line as a related one (fusion.applies). A question nothing answers finds nothing, and a CJK
    word finds only the lines that hold it, as without the embedder."""
    (store.rollout_dir / "backup.md").write_text(
        "# 夜间备份失败\nuser: 昨晚的数据库备份又失败了，帮我看一下\n"
        "agent: 备份任务 pg_dump 报错：S3 凭证已过期，上传被拒绝。\n数据库迁移之前必须先备份。\n"
    )
    emb = embedder.get()
    q, line = emb.embed(["午饭吃什么", "user: 昨晚的数据库备份又失败了，帮我看一下"])
    assert float(q @ line) > 0.4  # "what's for lunch" is this like a line on a failed backup
    assert rp.search(store, ["午饭吃什么"], mode="ranked", semantic_search="on").matches == []
    assert rp.search(store, ["迁徙"], mode="ranked", semantic_search="on").matches == []
    found = rp.search(store, ["迁移"], mode="ranked", semantic_search="on").matches
    assert (found[0].path, found[0].match_line) == ("rollout_summaries/backup.md", 4)


MEMORY_PEAK = """
import resource, sys
from pathlib import Path
from dsh_memory.readpath import embedder, index
from dsh_memory.storage.store import MemoryStore

store = MemoryStore(Path(sys.argv[1]))
embedder.get()
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
index.refresh(store, force=True)
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) * 1024)  # Linux: KiB
"""


@pytest.mark.skipif(sys.platform != "linux", reason="ru_maxrss is in KiB on Linux only")
def test_building_the_index_takes_memory_in_proportion_to_the_text_not_30_times_it(tmp_path):
    """An index built anew (the first search, a damaged one) embeds every section: tokenized all at
    once, each encoding holding every token of its text, that took ~33 times the memory's text
    (181 MiB for 5.4 MB; 3 GB for 100 MB). Tokenized in batches it takes a few times the text."""
    store = MemoryStore(tmp_path / "mem")
    store.ensure_layout()
    words = "alpha beta gamma delta quokka wombat dingo numbat emu kiwi lorem ipsum dolor sit amet".split()
    for i in range(2000):
        lines = (" ".join(words[(i * j + k) % 15] for k in range(12)) for j in range(40))
        (store.rollout_dir / f"r{i:05}.md").write_text(f"# R{i}\n" + "\n".join(lines) + "\n")
    text = sum(p.stat().st_size for p in store.rollout_dir.glob("*.md"))
    out = subprocess.run(
        [sys.executable, "-c", MEMORY_PEAK, str(store.root)], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) < 15 * text, f"{int(out.stdout) >> 20} MiB for {text >> 20} MiB of text"


@pytest.mark.parametrize("thing", ["folder", "link", "fifo"])
def test_what_is_no_file_where_the_vectors_go_is_set_aside_and_they_are_built_again(store, tmp_path, thing):
    """A folder (or a link, a FIFO) where `search_vectors.f32` goes: every ranked search was an
    IsADirectoryError traceback (a 500 over RPC), and a link was written through, out of the
    memory root. It is moved aside untouched, and the vectors are built again."""
    vfile = index._vectors_path(store)
    vfile.parent.mkdir(parents=True, exist_ok=True)
    outside = tmp_path / "outside.txt"
    outside.write_text("not the vectors\n")
    if thing == "folder":
        vfile.mkdir()
        (vfile / "mine.txt").write_text("a user's file\n")
    elif thing == "link":
        os.symlink(outside, vfile)
    else:
        os.mkfifo(vfile)
    fused = rp.search(store, QUESTION, mode="ranked")
    assert [m.path for m in fused.matches[:2]] == ["rollout_summaries/car.md"] * 2  # by meaning: vectors built
    assert vfile.is_file() and not vfile.is_symlink()
    (aside,) = vfile.parent.glob(f"{vectors.VECTORS_NAME}.set-aside-*")
    if thing == "folder":
        assert (aside / "mine.txt").read_text() == "a user's file\n"
    assert outside.read_text() == "not the vectors\n"
    assert [m.path for m in rp.search(store, QUESTION, mode="ranked").matches[:2]] == ["rollout_summaries/car.md"] * 2

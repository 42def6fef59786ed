"""The agent's facts said in Chinese (`phase1.chinese.is_chinese_fact`, read by `facts.fact_score`).

DSH is DeepSeek's harness, and the agent often answers its users in Chinese. Two unseen sets (an
embedded firmware team's Claude Code sessions in Traditional Chinese, an Android tools team's in
Simplified Chinese) kept 0–3 of the agent's Chinese sentences per session, and those by accident:
the English cues fired on an English word inside ("fail", "only"). Lasting facts were lost ("X
only lints workspace members, so …"); the narration, a status and a plan's step that happened to
hold such a word were kept. The sentences below are this test's own.
"""

from __future__ import annotations

from dsh_memory.phase1.facts import best_facts, fact_score
from dsh_memory.phase1.near import restates

KEPT = [
    # why, what must be, what a setting defaults to, what a tool cannot do (Traditional, Simplified)
    "`pnpm build` 必須先在 `packages/core` 跑，因為 `web` 依賴它的 `dist/` 輸出。",
    "`config.yaml` 的 `timeout` 默认是 30 秒，超过就会被 `worker.py` 杀掉。",
    "`docker compose` 不會讀 `.env.local`，只能讀 `.env`，否則變數都是空的。",
    "`flash.sh` 只能在 `root` 下执行，因为它要写 `/dev/mtd0`。",
]
GONE = [
    "接下來我會讀取 `src/app.ts`，確認路由需要的 `auth` 參數。",  # the agent's next step
    "所以我用 `make defconfig` 重新產生了 `.config`，因為舊的已經壞掉。",  # what it did
    "`npm test` 目前全部通过，因为 `fixtures/` 已经补齐。",  # the state of that day
    "這個設定只會影響 `api/` 底下的路由，因為 `router.ts` 只掃那裡。",  # needs the sentence before it
    "`build.sh` 可能需要 `bash 5`，因為它用了 `mapfile`。",  # a guess
    "關鍵發現：`cache.db` 不能放在 NFS 上，否則 `sqlite` 的鎖會失效。",  # a report's heading
    "`src/db.ts` — 新增 `retry` 參數，因為 `pg` 連線會被 proxy 斷掉。",  # what was done to a file
    "實作 `cache.ts` 的 `get()`，因為 `api.ts` 需要它回傳 `null`。",  # a plan's step
    "`api.ts` 的 `retry` 是不是因為 `fetch` 在 Node 18 不支援 `timeout` 才需要？",  # a question
    "」所以 `sync.py` 必須在 `cron` 之前跑，否則 `cache/` 會是舊的。",  # a piece of a quote
    "`src/gc/heap.h` —— 看 `Heap` 類的註解，確認 `kRegionSize` 的默認值需要多大。",  # a step of the look
    "Chrome 的 DevTools MCP 連線問題 - 需要重新啟動 `mcp-server` 才會恢復",  # a report's heading
    # a count of that day, "already", a worktree named in English (a Go set in Simplified Chinese)
    "有 3 个 handler 测试需要改，因为它们没有 mock `SendMail` 调用。",
    "`pkg/` 有 12 個 `.mk` 匯出 `scan_result`，但只有 5 個會真的產出 json。",
    "`deploy/` 的 chart 已经包含 `values.yaml`，所以不需要再 `helm dep update`。",
    "Worktree 共享同一个 `.git`，所以 `feat/x` 分支在主仓库里可以直接合并。",
    "根本原因是 `a.md` 的摘要经过手工整理，而 `b.md` 的只有自动提取，所以评分不同。",  # one problem's cause
    # the way out picked that day, and the bug as it stood ("…, 这会导致 …": "this causes …"), a Python set
    "最简单的解决方案是跳过这些超时测试，因为它们测试的场景在线上由 NestJS 的异常过滤器处理。",
    "`render()` 里取模板时用的是 `self.theme` 而非 `layout`，这会导致 `footer` 显示不出来。",
]


def test_a_lasting_fact_said_in_chinese_is_kept_and_narration_status_and_steps_are_not():
    assert [s for s in KEPT + GONE if fact_score(s)] == KEPT


def test_why_a_command_failed_said_in_chinese_is_its_cause():
    """A shield's cause is read with the cause cue: a sentence naming what was missing is one."""
    from dsh_memory.phase1.sentence_kinds import CAUSE

    assert fact_score("`pytest` 找不到 `conftest.py`，因为 `rootdir` 设在了 `src/` 下面。", CAUSE)
    assert not fact_score("`pytest` 找不到 `conftest.py` 吗？我再看一下 `rootdir` 的设定。", CAUSE)


def test_a_chinese_fact_said_twice_in_other_words_is_kept_once():
    """The agent says a finding again in its summary; Chinese has no spaces between words, so two
    characters in a row stand for a word when sentences are compared."""
    a = "`make` 必須在專案外面的資料夾執行否則產生的暫存檔案會混進原始碼的目錄裡。"
    b = "`make` 必須在專案外面的目錄執行否則產生的暫存檔案就會混進原始碼的目錄裡。"
    other = "`flash.sh` 只能在 `root` 下執行，因為它要寫 `/dev/mtd0`。"
    assert restates(b, a) and not restates(other, a)
    assert sorted(best_facts([(1, a, False), (2, b, True), (3, other, True)])) == sorted([b, other])


def test_japanese_is_not_read_as_chinese():
    """Japanese writes Han characters too: read with the Chinese cues, "保証不能" (cannot be
    guaranteed) is "不能" (cannot). A sentence with kana is not Chinese."""
    from dsh_memory.phase1.chinese import is_chinese

    assert is_chinese("`teb_local_planner` 需要先安裝，因為 `catkin_make` 依賴它的標頭檔。")
    assert not is_chinese("保証不能の理由は、`packages.ros.org` への取得がこの環境で不能だったためです。")
    # … nor read with the English cues, which fire on a name inside it (a Codex set's change list kept as a fact)
    assert not fact_score(
        "`bin/init.sh` で `.tool-versions` 必須化、`.npmrc` ignore 追加、`nvm use` の自動実行を削除。"
    )


def test_a_request_asked_as_a_question_in_chinese_is_no_rule():
    """ "能否" (could it …) asks; a rule says."""
    from dsh_memory.phase1.chinese import is_chinese_rule

    assert not is_chinese_rule("这两个项目能否合并到一个 solution 下，每次都一起编译？", 300)
    assert not is_chinese_rule("这两个项目能否合并到一个 solution 下，每次都一起编译", 300)
    assert is_chinese_rule("以后每次都用 pnpm，不要用 npm", 300)


def test_a_chinese_prompt_typed_with_ascii_stops_is_split_before_its_rules_are_read():
    """An unseen firmware set's user typed one prompt of three requests, separated by "; " and ". "
    (not "；" and "。"): read as one sentence, its "每個" (each) in the last request counted as the
    reach of the "不要" (do not) in the first, and the whole one-off prompt became a standing rule."""
    from dsh_memory.phase1.evidence import gather
    from tests.session_helpers import make_session

    prompt = "不要動 release 分支, 我要保留目前的狀態 2) lint 暫時不跑; 不然太慢. 請詳細說明第三步的每個步驟"
    s = make_session(("user", prompt), ("assistant", "好的。"), cwd="/home/dev/src/fw")
    assert gather(s).rules == []


def test_a_recaps_conclusions_in_chinese_leave_the_days_state_and_the_agents_narration_out():
    """The recap's conclusions (the turns' last words that name things) of the Chinese sets held
    the checkout's state ("…，工作區乾淨"), a check confirmed and the agent speaking of itself."""
    from dsh_memory.phase1.facts import conclusions

    state = "`vendor/libfoo` 停在 `a1b2c3d4`，detached at `origin/main`，工作區乾淨。"
    checked = "`test -d`、shell glob、`ls -la` 三種方法一致確認 `build/` 不存在。"
    narration = "之後要我確認 `dist/` 存不存在時，我會用絕對路徑跑 `test -d`。"
    kept = "`Config.in` 的 URL 預設值指向 `git@old-host:lib.git`，所以 `fetch.sh` 抓不到這四個套件。"
    said = [(n, s, True) for n, s in enumerate([state, checked, narration, kept])]
    assert conclusions(said, set()) == [kept]


def test_the_agents_next_step_in_chinese_is_no_restatement_of_a_rule():
    """A rule typed in Chinese kept the agent's next step as its restatement ("先確認風險面在哪 ——
    …": first, check where the risk is), for a branch name both said."""
    from dsh_memory.phase1.evidence import gather
    from tests.session_helpers import make_session

    s = make_session(
        ("user", "提醒一件事情, 這邊任何的改動請不要修改到 release-v2 分支"),
        ("assistant", "先確認風險面在哪 —— 哪些 repo 真的停在 `release-v2` 分支上。"),
        cwd="/home/dev/src/fw",
    )
    rules = gather(s).rules
    assert [r.text for r in rules] == ["提醒一件事情, 這邊任何的改動請不要修改到 release-v2 分支"], rules
    assert rules[0].agent == "", rules[0].agent


def test_an_answer_to_the_agents_numbered_question_in_chinese_is_no_rule():
    """A Chinese set's user answered the agent's numbered questions ("3.不要日志了。": 3. no logs
    then): a choice for the work at hand, kept as a standing rule. Said with its reach, it is one."""
    from dsh_memory.phase1.chinese import is_chinese_rule

    assert not is_chinese_rule("3.不要日志了。", 300)
    assert not is_chinese_rule("2、不要弹窗，直接写文件", 300)
    assert is_chinese_rule("1. 以后都不要用 npm，用 pnpm", 300)
    assert is_chinese_rule("不要用 npm，用 pnpm", 300)


def test_an_item_of_a_pasted_spec_in_chinese_is_no_rule():
    """A Chinese set's user pasted a spec's requirements ("FR-001: 程序必须 …", "P3 … 每次 …"): the
    product's requirements, kept as the user's standing rules for every session."""
    from dsh_memory.phase1.chinese import is_chinese_rule

    assert not is_chinese_rule("FR-002: 程序必须在每次启动时读取配置文件。", 300)
    assert not is_chinese_rule("P2 导出功能必须每次都写日志。", 300)


def test_why_this_change_is_made_in_chinese_is_no_rule():
    """A Go set's user said why the change was asked ("此需求的变更为了解决每个 … 都需 … 的问题": this
    change is to solve the problem that every … needs …): kept as a rule for its 每个 … 都."""
    from dsh_memory.phase1.chinese import is_chinese_rule

    assert not is_chinese_rule("此需求的变更为了解决每个服务部署时都要单独建一个卷的问题。", 300)
    assert not is_chinese_rule("本功能的改动是因为每个用户登录时都要重新拉取配置。", 300)
    assert is_chinese_rule("以后每个服务部署时都要共用同一个卷。", 300)


def test_what_the_user_will_do_later_in_chinese_is_no_rule():
    """A Chinese set's user answered "2.…，我在以后，会在 … 删除某些客户" (I will later delete some
    customers in …): their own future action, kept as a rule for its 以后 (from now on)."""
    from dsh_memory.phase1.chinese import is_chinese_rule

    assert not is_chinese_rule("2.合并代替覆盖，我在以后会在列表里删除某些订单。", 300)
    assert not is_chinese_rule("我们以后会把旧的接口下线。", 300)
    assert is_chinese_rule("以后都不要直接覆盖 `orders.json`。", 300)


def test_a_task_or_a_question_in_chinese_with_a_must_in_it_is_no_rule():
    """An Android set's user asked for a task ("创建一个 … workflow …，结果必须进行验证": create …, the
    result must be verified) and asked a question mid-prompt ("… 吗, 必须 …"): kept as standing
    rules for their 必须 (must). A task said with its reach (以后每次 …) is one."""
    from dsh_memory.phase1.chinese import is_chinese_rule

    assert not is_chinese_rule("创建一个部署脚本，安装 nginx，结果必须进行验证", 300)
    assert not is_chinese_rule("现在有官方的带 root 的镜像吗,必须找可靠的来源", 300)
    assert is_chinese_rule("请帮我以后每次提交前都跑 lint", 300)

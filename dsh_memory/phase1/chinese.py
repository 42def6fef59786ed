"""Standing wishes and lasting facts said in Chinese. DSH is DeepSeek's harness: its users often
type their rules in Chinese, and the agent answers in it, where the English cues of `user_words`
and `facts` never fire ("以後都用 pnpm，不要用 npm").

A rule here has a cue (不要, 禁止, 一律, 務必, 每次, 以後, 記得, 不希望, 優先 …), asks nothing, and is
not said of the thing at hand (這個, 這次, 現在, 先 …) unless it says its reach (一律, 每次, 以後, 所有 …).
A fact (`is_chinese_fact`) says why, what must or cannot be, what a thing defaults to or depends on
(因為, 必須, 無法, 預設, 依賴 …), and is none of: the agent's narration or a step it is taking or
proposes (接下來, 我, 建議, 實作 …), a sentence that needs the one before it (這個, 它 …), the state of
that day (今天, 目前, 尚未, 驗證通過 …), a guess (可能, 應該, 似乎 …) or a question.
Traditional and simplified forms are both read.
"""

from __future__ import annotations

import re

HAN_RANGE = "\u4e00-\u9fff"  # the CJK Unified Ideographs: Chinese (and Japanese kanji)
HAN = re.compile(f"[{HAN_RANGE}]")
_LATER = r"(?<!我)(?<!我在)(?<!我們)(?<!我们)以[後后]"  # (not "我在以后会 …": what the user will do later)
CUE = re.compile(
    rf"不要|別再|别再|不准|禁止|請勿|请勿|一律|務必|务必|必須|必须|一定要|總是|总是|永遠|永远|每次|{_LATER}"
    r"|從現在起|从现在起|(?<!我)記得|(?<!我)记得|不希望|偏好|優先|优先|習慣|习惯"  # (我记得: "I recall")
    r"|(?:每個|每个|所有|任何)[^，,。；]{0,12}都"  # "每个项目都先跑 lint": every … (does)
)
REACH = re.compile(_LATER + r"|一律|總是|总是|永遠|永远|每次|從現在起|从现在起|所有|任何|一直|每個|每个")
AT_HAND = re.compile(
    r"這個|这个|這裡|这里|那個|那个|這些|这些|那些|這次|这次|此次|現在|现在|剛剛|刚刚|剛才|刚才|暫時|暂时|今天|先"
)
# … nor what this change is for: "此需求的变更为了解决每个 … 都 … 的问题" (this request's change is to solve …)
THIS_CHANGE = re.compile(r"^(?:此|本)(?:需求|功能|改動|改动|變更|变更|問題|问题|PR|MR|任務|任务)")
# … nor a question (是否: "whether"), nor the user unsure of what they see (不知道: "I don't know what it is")
QUESTION = re.compile(
    r"[？?]|[嗎吗呢](?:\W|$)|是不是|是否|為什麼|为什么|怎麼|怎么|如何|能不能|可不可以|要不要|有沒有|有没有"
    r"|不知道|不清楚|不確定|不确定|能否|可否"
)
# … nor a task asked for: "创建 …", "帮我 …", "请帮我 …", "安装 …"
TASK = re.compile(
    r"(?:请|請)?(?:帮我|幫我|帮忙|幫忙)|(?:创建|建立|新建|实现|實現|實作|写一个|寫一個|做一个|做一個|探索|安装|安裝|修复|修復"
    r"|部署|生成|设计|設計|分析|看一下|看看|检查|檢查|查看)"
)
MIN_CHARS = 6  # "不要用 npm" says a rule in 8


KANA = re.compile(r"[\u3040-\u30ff]")  # Japanese writes Han characters too, with kana between


def is_chinese(s: str) -> bool:
    """Is `s` said in Chinese: more Han characters than Latin words (a command or a name may sit in
    it), and no kana (Japanese)?"""
    han = len(HAN.findall(s))
    return han >= 2 and han > len(re.findall(r"[A-Za-z]+", s)) and not KANA.search(s)


def is_chinese_rule(s: str, max_chars: int) -> bool:
    """A standing wish said in Chinese (see the module docstring), at most `max_chars` long."""
    if not (MIN_CHARS <= len(s) <= max_chars) or not CUE.search(s) or QUESTION.search(s):
        return False
    if re.match(r"[A-Za-z]{1,5}-?\d+", s):
        return False  # an item of a pasted spec by its id ("FR-001: 程序必须 …", "P3 测试程序每次 …")
    if THIS_CHANGE.match(s):
        return False
    if TASK.match(s) and not REACH.search(s):
        return False  # a task asked for, with what it must do ("创建一个 workflow …，结果必须进行验证")
    # said of the thing at hand, or an answer to the agent's numbered question ("3.不要日志了。")
    return not (AT_HAND.search(s) or re.match(r"\d+\s*[.、)）]", s)) or bool(REACH.search(s))


# Facts (`is_chinese_fact`): a cue of why, of a limit or a requirement, of where a thing comes from …
FACT_CUE = re.compile(
    r"因為|因为|所以|導致|导致|造成|必須|必须|必需|只能|只有|只會|只会|不能|無法|无法|不會|不会|需要|預設|默認|默认"
    r"|依賴|依赖|繼承|继承|位於|位于|定義在|定义在|存放在|來自|来自|取決於|取决于|否則|否则|才會|才会|就會|就会"
    r"|不支援|不支持|一律|會被|会被|比 .{1,40}(?:安全|快|慢)"
)
_LEAD = (  # … not the agent's narration, its next step or proposal, a plan's step, nor one that needs the one before
    r"接下來|接下来|然後|然后|首先|其次|最後|最后|接著|接着|同時|同时|另外|此外|總結|总结|結論|结论|建議|建议|可以"
    r"|請|请|讓|让|要|先|再|已|剛|刚|繼續|继续|下一步|實作|實現|实现|編寫|编写|撰寫|撰写|新增|添加|加入|加上"
    r"|修改|修正|修|更新|刪除|删除|移除|建立|创建|搭建|讀取|读取|同步|填充|補|补|改|把|將|将|用|執行|执行|跑"
    r"|檢查|检查|看|查|找|所以|因此|於是|于是|但|不過|不过|而|也|還有|还有|或者|這|这|那|此|它|該|该"
    r"|好的|好[，,]|了解|明白|收到|沒問題|没问题|是的|沒錯|没错|對[，,]|对[，,]"  # an answer's acknowledgement
)
_THAT_DAY = (  # … nor the work's state that day, what was done, a guess, the agent or the user in person
    r"今天|昨天|這次|这次|本次|此次|這輪|这轮|上一輪|上一轮|這週|这周|當初|当初|剛才|刚才|剛剛|刚刚|目前|仍未|尚未|還沒"
    r"|^(?:根本)?原因(?:是|在於|在于)|^問題(?:是|在於)|^问题(?:是|在于)"  # the cause of one problem, found that day
    r"|还没|仍在|還在|还在|實測|实测|已完成|完成了|通過了|通过了|驗證通過|验证通过|全綠|全绿|全部切|沒動|没动|沒碰"
    r"|没碰|確認|确认|證實|证实|[Ww]orktree|工作樹|工作树|工作區|工作区|之前|先前|原本|原來|原来|改成|改為|改为"
    r"|已(?:在|把|將|将|於|于|修|改|加|記|记|寫|写|標|标|確認|确认|設|设|切|移|刪|删|建|合|推|提交|落"
    r"|添加|新增|完成|更新|實作|实现|移除|合併|合并|创)|已(?:經|经)|不再(?!支援|支持|提供|相容|兼容)|第\s*\d+\s*行"
    r"|有\s*\d+\s*(?:個|个|處|处|項|项|條|条)"  # … "有 4 个测试需要更新": a count of that day
    # … the way out picked that day ("最简单的解决方案是 …"), the bug as it stood ("…，这会导致 …")
    r"|(?:最简单|最簡單|最好|最佳|最直接)的(?:解决|解決)?(?:方案|办法|辦法|方法|做法)|[這这](?:會|会|就會|就会)?導致|[這这](?:會|会|就會|就会)?导致"
    r"|可能|也許|也许|大概|應該|应该|似乎|看起來|看起来|好像|猜|我|你|您|[？?]|[嗎吗呢]\W*$"
)
NOT_A_FACT = re.compile(
    rf"^(?:{_LEAD})|{_THAT_DAY}"
    r"|^[\[（()）」』，,、；;→⚠①-⑩]|[:：]$|\s\|$"  # a fragment, a marked item, a line that introduces more, a cell
    r"|^[^，,。：:`]{1,30}(?:[：:]|\s[—-]\s)"  # a report's heading: "現況：…", "關鍵發現：…", "MR 發佈 — …"
    rf"|^`[^`]+`\s*(?:—+|–|-|:|：)\s*(?:{_LEAD}|\d+\s*(?:個|个))"  # "`x.sh` — 修 …": what was done to it
)
QUOTES = (("「", "」"), ("『", "』"), ("“", "”"))
CAUSE = re.compile(rf"{FACT_CUE.pattern}|沒有|没有|缺少|少了|找不到|不存在")  # why a command failed


def is_chinese_fact(s: str, cause: bool = False) -> bool:
    """A lasting fact said in Chinese (see the module docstring), or with `cause` a sentence that
    says why something failed; what it names is `facts`' to count."""
    if cause:
        return bool(CAUSE.search(s)) and not QUESTION.search(s)
    return bool(FACT_CUE.search(s)) and said_of_the_thing(s)


def said_of_the_thing(s: str) -> bool:
    """A Chinese sentence that is none of the kinds of non-fact (`NOT_A_FACT`) nor a piece of a
    quote cut in two: what a recap's conclusions may hold, with or without a fact's cue."""
    return not NOT_A_FACT.search(s) and all(s.count(a) == s.count(b) for a, b in QUOTES)

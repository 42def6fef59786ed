"""Standing wishes said in Chinese. DSH is DeepSeek's harness, and its users often type their rules
in Chinese, which the English cues of `user_words` never see ("以後都用 pnpm，不要用 npm"). A rule
here has a cue (不要, 禁止, 一律, 務必, 每次, 以後, 記得, 不希望, 優先 …), asks nothing, and is not
said of the thing at hand (這個, 這次, 現在, 先 …) unless it says its reach (一律, 每次, 以後, 所有 …).
Traditional and simplified forms are both read.
"""

from __future__ import annotations

import re

HAN = re.compile(r"[\u4e00-\u9fff]")
CUE = re.compile(
    r"不要|別再|别再|不准|禁止|請勿|请勿|一律|務必|务必|必須|必须|一定要|總是|总是|永遠|永远|每次|以後|以后"
    r"|從現在起|从现在起|(?<!我)記得|(?<!我)记得|不希望|偏好|優先|优先|習慣|习惯"  # (我记得: "I recall")
    r"|(?:每個|每个|所有|任何)[^，,。；]{0,12}都"  # "每个项目都先跑 lint": every … (does)
)
REACH = re.compile(r"一律|總是|总是|永遠|永远|每次|以後|以后|從現在起|从现在起|所有|任何|一直|每個|每个")
AT_HAND = re.compile(
    r"這個|这个|這裡|这里|那個|那个|這些|这些|那些|這次|这次|此次|現在|现在|剛剛|刚刚|剛才|刚才|暫時|暂时|今天|先"
)
# … nor a question (是否: "whether"), nor the user unsure of what they see (不知道: "I don't know what it is")
QUESTION = re.compile(
    r"[？?]|[嗎吗呢]\W*$|是不是|是否|為什麼|为什么|怎麼|怎么|如何|能不能|可不可以|要不要|有沒有|有没有"
    r"|不知道|不清楚|不確定|不确定"
)
MIN_CHARS = 6  # "不要用 npm" says a rule in 8


def is_chinese(s: str) -> bool:
    """Is `s` said in Chinese: more Han characters than Latin words (a command or a name may sit in it)?"""
    han = len(HAN.findall(s))
    return han >= 2 and han > len(re.findall(r"[A-Za-z]+", s))


def is_chinese_rule(s: str, max_chars: int) -> bool:
    """A standing wish said in Chinese (see the module docstring), at most `max_chars` long."""
    if not (MIN_CHARS <= len(s) <= max_chars) or not CUE.search(s) or QUESTION.search(s):
        return False
    return not AT_HAND.search(s) or bool(REACH.search(s))

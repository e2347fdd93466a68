"""Hostile text, as a log may hold it: model replies, a recorded model's name, file names.

Nothing of it may reach a reader raw (issues 27 and 44): no HTML element in report.html or in
report.md rendered with HTML on, no table row broken, no escape sequence on a terminal, no
formula and no split row in a spreadsheet, nothing that stops pdflatex. :data:`REPLIES` are
replayed through the real tasks (``replay/`` provider, a JSONL recording built by
:func:`recording`); each must be scored INVALID and logged verbatim.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path

#: the 1 MB reply: an element at its start, then 1,000,000 characters of text
BIG_REPLY = "<script>alert(7)</script>" + "lorem ipsum " * 83_334

#: model replies, by what they try
REPLIES: dict[str, str] = {
    "script": "<script>alert(1)</script>",
    "img": "<img src=x onerror=alert(2)>",
    "table": "| a | b |\n|---|---|\n| <b>c</b> | d |",
    "heading": "# H1\n\n## H2\n\n- item\n\n1. first",
    "ansi": "\x1b[31mred\x1b]0;title\x07\x1b[0m\x9b2J",
    "nul": "NUL\x00bytes\x00",
    # the override shows "POSITIVE" in a bidi-aware viewer: the parser must not be fooled
    "rtl": "\u202eEVITISOP\u202c",
    # a bare CR: a spreadsheet's row ends there, and the next starts with a formula
    "cr": "POSITIVE\r=cmd|' /C calc'!A0",
    # scripts pdflatex cannot print in a plain article, and a right-to-left mark
    "scripts": "Ответ: 阳性 \u200fΕλληνικά «ja» þ 👩\u200d⚕️",
    "big": BIG_REPLY,
}

#: a recorded model's name (the replay file's ``model``), shown in every run label
MODEL = ("\x1b[31mevil\x1b]0;pwned\x07 <script>alert(3)</script>|$x^{$ *m* _[l](javascript:x)_ "
         "модель 模型")
#: a ``-T trials_file=`` name: 7 live alert dialogs in report.md rendered with HTML on before
TRIALS_NAME = "<svg onload=alert(4)>|x.csv"
#: a replay file's name (without ``.jsonl``), shown as the run's model in the provenance table
RECORDING_NAME = "<img src=x onerror=alert(5)>|`r`"

#: strings for the escape functions' tests: each of the above (the big reply cut short) and more
NASTY: list[str] = [
    *(r for r in REPLIES.values() if r is not BIG_REPLY),
    BIG_REPLY[:2000],
    MODEL,
    TRIALS_NAME,
    RECORDING_NAME,
    "",
    " ",
    "plain text",
    "title_abstract",
    "a_b_c",
    "_lead",
    "trail_",
    "__dunder__",
    "*bold* **bolder** ***both***",
    "`code` ``two``",
    "~~strike~~",
    "[link](http://example.com) ![img](x.png) [ref][1]\n\n[1]: http://example.com",
    "<http://example.com> <mailto:a@b.c>",
    "&amp; &lt;script&gt; &#60;b&#62; &#x3c;",
    "\\*not bold\\* \\",
    "trailing backslash\\",
    "    indented code",
    "\tindented with a tab",
    "line  \nhard break",
    "> quote\n>> nested",
    "- item\n+ item\n* item",
    "1. one\n2) two",
    "Heading\n===",
    "Heading\n---",
    "***\n---\n___",
    "```\nfence\n```",
    "~~~\nfence\n~~~",
    "<!-- comment -->",
    "<?php echo 1; ?>",
    "<![CDATA[x]]>",
    "<div>\n\n*md in html*\n\n</div>",
    '<a href="javascript:alert(8)">x</a>',
    "<iframe srcdoc='<script>alert(9)</script>'>",
    "<svg><script>alert(10)</script></svg>",
    "| a | b |\n| - | - |",
    "a | b\n--- | ---\nc | d",
    "# heading #",
    "#hashtag",
    "=cmd|' /C calc'!A0",
    "POSITIVE\r=cmd|' /C calc'!A0",
    "+1+1",
    "-2+3",
    "@SUM(A1)",
    "\t=1",
    "\r=1",
    "-0.5",
    "carriage\rreturn",
    "windows\r\nline",
    "unicode lines\u2028and\u2029paragraphs",
    "C1 \x85 NEL \x9b CSI",
    "DEL \x7f",
    "bidi \u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069",
    "lone surrogate \ud800",
    "émoji 👩‍⚕️ ünïcode — Ελληνικά 日本語",
    "1.5e3",
    "$math$ \\(x\\)",
    "a\\|b",
    "a\\\\|b",
]


def random_strings(n: int = 300, seed: int = 0) -> list[str]:
    """Random strings over the characters that matter: Markdown and HTML syntax, controls,
    newlines, letters, digits and spaces."""
    rng = random.Random(seed)
    alphabet = list("<>&\"'`*_~[]()!#|\\-+=.:;/ \t\n\r") + list("aZ09é") + [
        "\x00", "\x1b", "\x07", "\x7f", "\x85", "\x9b", "\u202e", "\u2066", "\u2028", "&lt;",
        "<script>", "<img src=x onerror=alert(0)>", "|---|", "\n# ", "\n- ", "\n1. ", "    ",
    ]
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))) for _ in range(n)]


def recording(path: Path, task: str, sample_ids: Sequence[str], model: str = MODEL) -> list[str]:
    """Write a JSONL recording giving the samples of ``task`` the :data:`REPLIES` in turn (each
    at least once when there are enough samples); return the reply of each sample, in order."""
    replies = list(REPLIES.values())
    given = [replies[i % len(replies)] for i in range(len(sample_ids))]
    with path.open("w", encoding="utf-8") as f:
        for sid, reply in zip(sample_ids, given, strict=True):
            f.write(json.dumps({"task": task, "id": sid, "epoch": 1, "reply": reply,
                                "model": model}) + "\n")
    return given

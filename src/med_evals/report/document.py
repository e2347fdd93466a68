"""A small document model rendered twice: Markdown and one self-contained HTML file."""

from __future__ import annotations

import base64
import html
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CSS = """
body { font-family: system-ui, -apple-system, Segoe UI, Roboto, sans-serif; margin: 2rem auto;
       max-width: 1200px; color: #1f2328; line-height: 1.45; padding: 0 1rem; }
h1 { border-bottom: 2px solid #d0d7de; padding-bottom: .3rem; }
h2 { margin-top: 2.2rem; border-bottom: 1px solid #d0d7de; padding-bottom: .2rem; }
table { border-collapse: collapse; margin: .8rem 0 1.2rem; font-size: .88rem; }
th, td { border: 1px solid #d0d7de; padding: .25rem .55rem; text-align: left; vertical-align: top; }
th { background: #f6f8fa; }
tr:nth-child(even) td { background: #fbfbfc; }
figure { margin: 1rem 0 1.6rem; }
figure img { max-width: 100%; border: 1px solid #eaeef2; }
figcaption { font-size: .85rem; color: #57606a; }
.note { color: #57606a; font-size: .9rem; }
.warn { background: #fff8c5; border: 1px solid #d4a72c; padding: .5rem .8rem; }
"""


def fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return "n/a" if math.isnan(value) else f"{value:.{digits}f}"
    return str(value)


@dataclass
class Document:
    title: str
    blocks: list[tuple] = field(default_factory=list)

    def h2(self, text: str) -> None:
        self.blocks.append(("h2", text))

    def h3(self, text: str) -> None:
        self.blocks.append(("h3", text))

    def p(self, text: str, kind: str = "p") -> None:
        self.blocks.append((kind, text))

    def table(self, rows: list[dict[str, Any]], caption: str = "") -> None:
        if rows:
            self.blocks.append(("table", rows, caption))

    def figure(self, path: Path, caption: str) -> None:
        self.blocks.append(("img", path, caption))

    # --- rendering ------------------------------------------------------------------------

    def markdown(self, base: Path) -> str:
        out = [f"# {self.title}", ""]
        for block in self.blocks:
            kind = block[0]
            if kind in ("h2", "h3"):
                out += [("## " if kind == "h2" else "### ") + block[1], ""]
            elif kind in ("p", "note", "warn"):
                out += [("> " if kind == "warn" else "") + block[1], ""]
            elif kind == "table":
                rows, caption = block[1], block[2]
                cols = list(rows[0])
                if caption:
                    out += [f"*{caption}*", ""]
                out.append("| " + " | ".join(cols) + " |")
                out.append("|" + "---|" * len(cols))
                for r in rows:
                    cells = [fmt(r.get(c)).replace("|", "\\|") for c in cols]
                    out.append("| " + " | ".join(cells) + " |")
                out.append("")
            elif kind == "img":
                out += [f"![{block[2]}]({block[1].relative_to(base).as_posix()})", ""]
        return "\n".join(out)

    def html(self) -> str:
        parts = [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f"<title>{html.escape(self.title)}</title><style>{CSS}</style></head><body>",
            f"<h1>{html.escape(self.title)}</h1>",
        ]
        for block in self.blocks:
            kind = block[0]
            if kind in ("h2", "h3"):
                parts.append(f"<{kind}>{html.escape(block[1])}</{kind}>")
            elif kind in ("p", "note", "warn"):
                parts.append(f'<p class="{kind}">{html.escape(block[1])}</p>')
            elif kind == "table":
                rows, caption = block[1], block[2]
                cols = list(rows[0])
                cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
                head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
                body = "".join(
                    "<tr>"
                    + "".join(f"<td>{html.escape(fmt(r.get(c)))}</td>" for c in cols)
                    + "</tr>"
                    for r in rows
                )
                parts.append(
                    f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
                )
            elif kind == "img":
                data = base64.b64encode(block[1].read_bytes()).decode("ascii")
                alt = html.escape(block[2])
                parts.append(
                    f'<figure><img alt="{alt}" src="data:image/png;base64,{data}">'
                    f"<figcaption>{alt}</figcaption></figure>"
                )
        parts.append("</body></html>")
        return "\n".join(parts)

"""Reading the report's exports back as their readers do.

CSV: :func:`read_csv_typed`, every field with whether it was quoted (a spreadsheet reads an
unquoted field as a number where it can).

LaTeX: every ``.tex`` wrapped in a plain
``\\documentclass{article}\\usepackage{booktabs}`` document and run through pdflatex, as a paper
would include it. A problem is an error, an overfull box (a table wider than the text block, or
a float taller than the page) or a float too large for the page; each is named with its file.

All files go into one document (one engine run: seconds, not a minute), each after a marker line
and followed by ``\\clearpage``, which places its floats before the next file starts, so every
warning in the log lies between its file's marker and the next."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

#: what .ci/run installs (Debian: pdflatex, and booktabs.sty in texlive-latex-recommended)
INSTALL = ("apt-get install --no-install-recommends texlive-latex-base "
           "texlive-latex-recommended")
MARK = "@@med-evals-export "
#: a problem in pdflatex's log: an error, a box past the text block or the page, a float too
#: large for the page, a character the fonts lack
PROBLEM = re.compile(r"^(! .*|Overfull \\[hv]box .*|.*Float too large.*|Missing character.*)$",
                     re.M)


def pdflatex() -> str:
    """pdflatex's path, or skip the test (CI has it)."""
    engine = shutil.which("pdflatex")
    if engine is None:
        pytest.skip(f"pdflatex not installed ({INSTALL}; .ci/run installs it)")
    found = subprocess.run(["kpsewhich", "booktabs.sty"], capture_output=True, text=True)
    if not found.stdout.strip():
        pytest.skip(f"booktabs.sty not found ({INSTALL})")
    return engine


def wrapper(files: Sequence[Path]) -> str:
    """A plain article including each file, as a paper includes a table."""
    body = "".join(f"\\typeout{{{MARK}{f.name}}}\n\\input{{{f.as_posix()}}}\n\\clearpage\n"
                   for f in files)
    return ("\\documentclass{article}\n\\usepackage{booktabs}\n\\begin{document}\n"
            + body + "\\end{document}\n")


def compile_tex(files: Sequence[Path], work: Path) -> dict[str, list[str]]:
    """Each file's problems (file name -> the log's lines; none: compiled cleanly), from one
    pdflatex run over :func:`wrapper`. A run that stops (``-halt-on-error``) names the file it
    stopped in."""
    engine = pdflatex()
    work.mkdir(parents=True, exist_ok=True)
    (work / "all.tex").write_text(wrapper(files), encoding="utf-8")
    run = subprocess.run(
        [engine, "-interaction=nonstopmode", "-halt-on-error", "-no-shell-escape", "all.tex"],
        cwd=work, capture_output=True, timeout=600,
        env={**os.environ, "max_print_line": "100000"},  # one log line per message, unfolded
    )
    log = (work / "all.log").read_text(encoding="latin-1")
    problems: dict[str, list[str]] = {f.name: ["not reached: pdflatex stopped before it"]
                                      for f in files}
    parts = re.split(rf"^{re.escape(MARK)}(.+)$", log, flags=re.M)
    for name, text in zip(parts[1::2], parts[2::2], strict=True):
        problems[name.strip()] = PROBLEM.findall(text)
    if run.returncode != 0:
        last = parts[-2].strip() if len(parts) > 1 else "(before the first file)"
        problems.setdefault(last, []).append(f"pdflatex exited {run.returncode}")
    return problems


def failures(problems: dict[str, list[str]]) -> dict[str, list[str]]:
    return {name: found for name, found in problems.items() if found}


# --- CSV ----------------------------------------------------------------------------------


def read_csv_typed(text: str) -> list[list[tuple[str, bool]]]:
    """RFC 4180 records of ``text``, each field (its value, whether it was quoted). Only a
    line feed ends a record (our exports' line end); a line feed inside quotes is the field's."""
    records: list[list[tuple[str, bool]]] = []
    row: list[tuple[str, bool]] = []
    i, n = 0, len(text)
    while i < n:
        if text[i] == '"':
            j, value = i + 1, []
            while True:
                k = text.index('"', j)
                value.append(text[j:k])
                if text.startswith('""', k):
                    value.append('"')
                    j = k + 2
                else:
                    j = k + 1
                    break
            field, quoted, i = "".join(value), True, j
        else:
            m = re.compile(r"[^,\n]*").match(text, i)
            assert m is not None
            field, quoted, i = m.group(), False, m.end()
        row.append((field, quoted))
        if i >= n or text[i] == "\n":
            records.append(row)
            row = []
            i += 1
        else:
            assert text[i] == ",", f"a field ends with {text[i]!r} at {i}, not a comma"
            i += 1
    return records


# --- LaTeX, read back ---------------------------------------------------------------------

#: a row's end: ``\\`` (a table at its natural width) or ``\tabularnewline`` (wrapping columns)
_ROW_END = re.compile(r" (?:\\\\|\\tabularnewline)$")


def untex(cell: str) -> str:
    """A cell as it prints: our alignment and break points left out, every escape of
    :data:`~med_evals.outputs.text.LATEX_ESCAPES` read back (segment by segment: a break point
    keeps two hyphens apart)."""
    cell = re.sub(r"^\\ragged(right|left) ", "", cell.strip())
    return "".join(untex_text(part) for part in cell.split(r"\allowbreak{}"))


def untex_text(text: str) -> str:
    """``text`` with every escape of :data:`~med_evals.outputs.text.LATEX_ESCAPES` (and the
    ligature breaks) read back, the longest escape first."""
    from med_evals.outputs.text import LATEX_ESCAPES, LATEX_LIGATURE

    pairs = sorted(((t, c) for c, t in {**LATEX_ESCAPES, **LATEX_LIGATURE}.items()),
                   key=lambda p: -len(p[0]))
    out, i = [], 0
    while i < len(text):
        for tex, char in pairs:
            if text.startswith(tex, i):
                out.append(char)
                i += len(tex)
                break
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def tex_floats(tex: str) -> list[tuple[int, list[str], list[list[str]]]]:
    """Each float of an exported ``.tex``: (its tabular's column count from the spec, its
    header's cells, its rows' cells), the cells as :func:`untex` reads them; a row whose
    unescaped ``&`` do not match the spec fails here."""
    out = []
    for body in re.findall(r"\\begin\{tabular\}\{(.*?)\}\n(.*?)\n\\end\{tabular\}", tex, re.S):
        spec, lines = body
        cols = len(re.findall(r"p\{[^}]*\}|[lr]", spec.replace("@{}", "")))
        rows = [line for line in lines.splitlines() if _ROW_END.search(line)]
        cells = [[untex(c) for c in re.split(r"(?<!\\)&", _ROW_END.sub("", line))]
                 for line in rows]
        assert all(len(r) == cols for r in cells), (spec, rows)
        out.append((cols, cells[0], cells[1:]))
    return out

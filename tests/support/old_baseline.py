"""How ``tests/fixtures/medreqal-baseline-before-input-move.json`` was written: a MedREQAL run
on the fixture (chat prompt, no BERTScore) with deterministic replies, and its baseline, by the
code before a sample's input became the question alone (commit a700710)::

    PYTHONPATH=<a checkout of a700710>/src python -m tests.support.old_baseline OUT_DIR

then the data file's folder in the JSON replaced by ``{FIXTURES}`` (the test puts it back).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from inspect_ai.model import ModelOutput, ModelUsage

LABELS = ("SUPPORTED", "REFUTED", "NOT ENOUGH INFORMATION")


def replies(input: Any, tools: Any, tool_choice: Any, config: Any) -> ModelOutput:  # noqa: A002
    """A label chosen by the length of the messages sent (the same prompt, the same reply)."""
    text = "\n".join(m.text for m in input)
    label = LABELS[len(text) % 3]
    out = ModelOutput.from_content(model="mockllm/model", content=f"LABEL: {label} .")
    out.usage = ModelUsage(input_tokens=10, output_tokens=1, total_tokens=11)
    return out


def main(out: Path) -> None:
    from inspect_ai.model import get_model

    from med_evals.commands.cli import main as cli_main
    from med_evals.tasks.medreqal import medreqal
    from tests.conftest import FIXTURES

    from .evals import inspect_eval

    model = get_model("mockllm/reader", custom_outputs=replies)
    task = medreqal(data_file=str(FIXTURES / "medreqal_fixture.csv"), bertscore=False)
    inspect_eval(task, model=model, display="none", log_dir=str(out / "logs"))
    assert cli_main(["baseline", str(out / "logs"), "-o", str(out / "baseline.json")]) == 0


if __name__ == "__main__":
    main(Path(sys.argv[1]))

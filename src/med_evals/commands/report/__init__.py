"""Reports over our tasks' logs: ``med-evals report``."""

from med_evals.commands.report.build import N_BOOT, ReportResult, build_report
from med_evals.commands.report.command import report_command
from med_evals.logs.labels import ReportError

__all__ = ["N_BOOT", "ReportError", "ReportResult", "build_report", "report_command"]

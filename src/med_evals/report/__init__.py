"""Reports over our tasks' logs: ``med-evals report``."""

from med_evals.report.build import ReportError, ReportResult, build_report

__all__ = ["ReportError", "ReportResult", "build_report"]

"""``python -m rlcore.report``."""

from rlcore.report.cli import main

main()

"""The report: report.json's document built from a verdict (`document`), and its rendering as JSON, HTML and
the terminal summary (`render`, templates/). Imports neither the probe nor the wire."""

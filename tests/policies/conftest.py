"""The pack's own tests: run in the pack's virtualenv (`policies/venv/bin/python -m pytest tests/policies`),
with `policies/` on sys.path as the Pulumi CLI's `runpy.run_path(<pack dir>)` puts it."""

from __future__ import annotations

import sys
from pathlib import Path

POLICIES = Path(__file__).resolve().parents[2] / "policies"
if str(POLICIES) not in sys.path:
    sys.path.insert(0, str(POLICIES))

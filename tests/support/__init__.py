"""What the tests share: builders of histories, programs, estates and installed tools, and the servers they
run against. Test modules import from here, never from each other (tests/cli/test_layout.py)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the checkout

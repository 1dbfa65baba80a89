"""The pack's catalog, imported as the pack's own interpreter imports it (from its folder: `pubsub_rules`)."""

import sys

from support import ROOT

if str(ROOT / "policies") not in sys.path:
    sys.path.insert(0, str(ROOT / "policies"))
from pubsub_rules.catalog import BY_NAME, PACK_NAME, RULES  # noqa: E402

__all__ = ["BY_NAME", "PACK_NAME", "RULES"]

"""`python -m pubsubguard.validation.conformance`: the scenarios on a target, or `--update-doc` (`runner.main`)."""

import sys

from .runner import main

sys.exit(main())

import sys

from pubsubguard.cli import main

sys.exit(main())

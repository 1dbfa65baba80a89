import sys

from pubsubguard.core.errors import INTERRUPTED_EXIT

try:
    from pubsubguard.cli import main
except KeyboardInterrupt:  # Ctrl-C while Python loads the CLI
    print("pubsubguard: interrupted", file=sys.stderr)
    sys.exit(INTERRUPTED_EXIT)

if __name__ == "__main__":  # not when a worker process (the check's judge) imports this as its main module
    sys.exit(main())

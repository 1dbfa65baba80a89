import sys

try:
    from pubsubguard.cli import main
except KeyboardInterrupt:  # Ctrl-C while Python loads the CLI
    print("pubsubguard: interrupted", file=sys.stderr)
    sys.exit(130)

sys.exit(main())

#!/usr/bin/env bash
# The main job (README): set up, then the whole flow on the embedded default (emulator + local Spark)
# for a stack (default dev). Arguments go to `pubsubguard run` (e.g. --stack dev --faults nack=0.2).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
exec .venv/bin/pubsubguard run "$@"

#!/usr/bin/env bash
# Idempotent setup for a fresh machine: the project's virtualenv (.venv) and the policy pack's own
# virtualenv (policies/venv, Pulumi's convention: pulumi-policy pins protobuf 5 while
# google-cloud-pubsub needs protobuf 6, so the two never share an interpreter), plus a check that
# Java and the Pub/Sub emulator are present. Re-running it is cheap: each venv is rebuilt only when
# its requirements changed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
py="${PYTHON:-python3}"

need_py() {
  "$py" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' || {
    echo "setup: Python >= 3.10 is required (found $("$py" --version 2>&1)); set PYTHON=/path/to/python3" >&2
    exit 2
  }
}

# make_venv DIR STAMP_SOURCE... -- PIP_ARGS... (rebuilt when a source or an argument changed)
make_venv() {
  local dir="$1"; shift
  local sources=()
  while [ "$1" != "--" ]; do sources+=("$1"); shift; done
  shift
  local stamp
  stamp="$({ cat "${sources[@]}"; printf '%s\n' "$@"; } | sha256sum | cut -c1-16)"
  if [ -x "$dir/bin/python" ] && [ "$(cat "$dir/.stamp" 2>/dev/null)" = "$stamp" ]; then
    return 0
  fi
  echo "setup: building $dir" >&2
  rm -rf "$dir"
  "$py" -m venv "$dir"
  "$dir/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
  "$dir/bin/python" -m pip install -q --disable-pip-version-check "$@"
  echo "$stamp" > "$dir/.stamp"
}

need_py
venvs_only=false
[ "${1:-}" = "--venvs-only" ] && venvs_only=true  # e.g. PR review: no Spark or emulator needed
# pytest-xdist: scripts/test.sh runs the tests in several processes (pytest -n); a test tool, beside [test]'s.
make_venv .venv pyproject.toml -- -e ".[test]" "pytest-xdist>=3.6,<4"
make_venv policies/venv policies/requirements.txt policies/requirements-dev.txt -- \
  -r policies/requirements.txt -r policies/requirements-dev.txt
# bubblewrap confines the Pulumi programs that `check` and `plan` run (no network, read-only file
# system, own PID namespace: docs/security.md); without it they run unconfined and say so.
if ! command -v bwrap >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing bubblewrap (Debian bubblewrap), which confines the programs check runs" >&2
    { apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null; } || \
      echo "setup: could not install bubblewrap; programs will run unconfined (docs/security.md)" >&2
  else
    echo "setup: bubblewrap is not installed; programs will run unconfined (apt-get install bubblewrap)" >&2
  fi
fi
# packet faults (`--nemesis` netem entries, validation/wire/netem.py) need root, iproute2 (ip, tc) and, where the
# kernel has no netem, iptables (loss alone); without them runs use the proxy's faults only and say so.
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  missing=""
  command -v ip >/dev/null 2>&1 && command -v tc >/dev/null 2>&1 || missing="iproute2"
  command -v iptables >/dev/null 2>&1 || missing="$missing iptables"
  if [ -n "$missing" ]; then
    echo "setup: installing${missing:+ }${missing# } for packet faults (--nemesis netem)" >&2
    { apt-get update -qq && apt-get install -y -qq $missing >/dev/null; } || \
      echo "setup: could not install $missing; packet faults will be unavailable (proxy faults only)" >&2
  fi
fi
ready() {
  echo "setup: ready. Judge a program: .venv/bin/pubsubguard check -C PROJECT_DIR -s STACK" >&2
  echo "setup:        the whole flow on the emulator: .venv/bin/pubsubguard run -s dev" >&2
  echo "setup:        (or: source .venv/bin/activate, then the commands as in --help: pubsubguard run -s dev)" >&2
}
if $venvs_only; then ready; exit 0; fi

# The Node.js packages the tests give TypeScript programs (tests/nodejs: @pulumi/pulumi, @pulumi/gcp,
# typescript, ts-node), installed once from the lockfile into the user's cache (npm ci --ignore-scripts).
"$py" tests/support/nodejs_projects.py || exit 2

if ! command -v java >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing Java 17 (Debian openjdk-17-jre-headless)" >&2
    apt-get update -qq && apt-get install -y -qq openjdk-17-jre-headless >/dev/null
  else
    echo "setup: Java 17 is required for Spark and the emulator: apt-get install openjdk-17-jre-headless" >&2
    exit 2
  fi
fi
if ! command -v chromium >/dev/null 2>&1; then  # the report's layout is tested in a real browser
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing Chromium (Debian chromium), for the report's browser test" >&2
    { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; } || \
      echo "setup: could not install chromium; the report's browser test will say it did not run" >&2
  fi
fi
# promtool and a Prometheus server test watch's alerting rules (tests/prove/watch/test_watch_alerts.py: promtool check and test
# rules, a real server scraping the metrics). The tests run the server binary themselves, on loopback only; the
# package's own service (every interface, :9090) is kept from starting while it installs (policy-rc.d).
if ! command -v promtool >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing Prometheus (Debian prometheus), whose promtool and server test watch's alerts" >&2
    made_policy=false
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && made_policy=true
    fi
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends prometheus >/dev/null; } || \
      echo "setup: could not install prometheus; tests/prove/watch/test_watch_alerts.py will fail (apt-get install prometheus)" >&2
    if $made_policy; then rm -f /usr/sbin/policy-rc.d; fi
  else
    echo "setup: promtool is not installed; tests/prove/watch/test_watch_alerts.py needs it (apt-get install prometheus)" >&2
  fi
fi
if ! .venv/bin/python -m pubsubguard.core.emulator --locate >/dev/null; then
  .venv/bin/python -m pubsubguard.core.emulator --locate || true
  exit 2
fi
# Spark's class archive (validation/class_archive.py): Spark's driver JVM starts from it, each session a second or
# two sooner. Built once for this java and these jars (~50 s on 2 cores, ~190 MB in the user's cache); when it is
# there the check is a stat of the jars, no JVM. A failure is one warning: Spark starts as it would without it.
if archive_line="$(.venv/bin/python -m pubsubguard.validation.class_archive_build 2>&1)"; then
  if [ -n "$archive_line" ]; then echo "setup: $archive_line" >&2; fi
else
  echo "setup: warning: ${archive_line##*$'\n'}; Spark starts without it" >&2
fi
ready

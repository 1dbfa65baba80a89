#!/usr/bin/env bash
# What a user of another team pays to adopt pubsubguard, measured (the figures in README.md, "Use it in
# your repository"): the wheel's size; `pip install` time and installed size into a fresh virtualenv
# without and with the `verify` extra; the first `check` on a team's repository (it makes the pack's
# virtualenv in a fresh cache) and the second (it reuses it). pip's own cache is as the machine has it
# (set PIP_NO_CACHE_DIR=1 to measure downloads too).
#
#   bash scripts/measure_install.sh            # prints a Markdown table
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="${PYTHON:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

now() { date +%s.%N; }
since() { echo "$(now) - $1" | bc | xargs printf '%.1f'; }
size() { du -sm "$1" | cut -f1; }

# the wheel, from a copy of the sources (nothing written into the checkout)
mkdir "$work/src"
(cd "$root" && tar cf - --exclude=venv --exclude=.venv --exclude=__pycache__ --exclude='*.egg-info' \
  pyproject.toml README.md pubsubguard infra validation policies) | tar xf - -C "$work/src"
"$py" -m venv "$work/build-venv"
"$work/build-venv/bin/python" -m pip install -q --disable-pip-version-check build
"$work/build-venv/bin/python" -m build -q --outdir "$work/dist" "$work/src" >/dev/null 2>&1
wheel="$(ls "$work"/dist/*.whl)"
sdist="$(ls "$work"/dist/*.tar.gz)"
wheel_kib=$(( $(stat -c %s "$wheel") / 1024 ))
sdist_kib=$(( $(stat -c %s "$sdist") / 1024 ))

install() {  # install VENV SPEC -> seconds, installed MiB (site-packages)
  "$py" -m venv "$1"
  local base; base=$(size "$1")
  local started; started=$(now)
  "$1/bin/python" -m pip install -q --disable-pip-version-check "$2"
  echo "$(since "$started") $(( $(size "$1") - base ))"
}
read -r plain_s plain_mib < <(install "$work/plain" "$wheel")
read -r verify_s verify_mib < <(install "$work/verify" "$wheel[verify]")

# a team's repository with its program's virtualenv (as `pulumi install` makes it)
cp -r "$root/examples/team-orders" "$work/repo"
rm -rf "$work/repo/venv"
"$py" -m venv "$work/repo/venv"
"$work/repo/venv/bin/python" -m pip install -q --disable-pip-version-check -r "$work/repo/requirements.txt"

export PUBSUBGUARD_CACHE_DIR="$work/cache"
unset PYTHONPATH VIRTUAL_ENV
cd "$work/repo"
started=$(now); "$work/plain/bin/pubsubguard" check -s dev >"$work/first.out" 2>"$work/first.err"; first_s=$(since "$started")
started=$(now); "$work/plain/bin/pubsubguard" check -s dev >"$work/second.out" 2>"$work/second.err"; second_s=$(since "$started")
for run in first second; do  # a timing counts only for a whole check: its verdict line, the same both times
  grep -q "^PASSED: 0 mandatory" "$work/$run.out" || { echo "measure_install: the $run check gave no verdict:" >&2; cat "$work/$run.out" "$work/$run.err" >&2; exit 1; }
done
cmp -s "$work/first.out" "$work/second.out" || { echo "measure_install: the two checks disagree" >&2; exit 1; }
pack_venv_mib=$(size "$(ls -d "$work"/cache/pack-venv-*/ | head -1)")

cat <<EOF
| measure (\`bash scripts/measure_install.sh\`, $(nproc) cores, $(date -u +%Y-%m-%d)) | value |
| --- | --- |
| wheel / sdist | ${wheel_kib} KiB / ${sdist_kib} KiB |
| \`pip install pubsubguard\` into a fresh venv | ${plain_s} s, ${plain_mib} MiB installed |
| \`pip install 'pubsubguard[verify]'\` into a fresh venv | ${verify_s} s, ${verify_mib} MiB installed |
| first \`pubsubguard check -s dev\` on examples/team-orders (makes the pack's venv, ${pack_venv_mib} MiB) | ${first_s} s |
| second \`pubsubguard check -s dev\` (reuses it) | ${second_s} s |
EOF
echo "first check's stderr: $(cat "$work/first.err")" >&2

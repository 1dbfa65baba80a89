#!/usr/bin/env bash
# Release pubsubguard: build the wheel and the sdist from a clean checkout, test the wheel the way teams
# get it (installed alone into a fresh virtualenv, a program in a virtualenv of its own), then tag
# v<version> so that the README's `uses: OWNER/pubsubguard@v<version>` (the GitHub Action) and
# `rev: v<version>` (pre-commit) name a real ref.
#
#   bash scripts/release.sh              # build, test, tag (the tag stays local until you push it)
#   bash scripts/release.sh --no-tag     # build and test only (dist/ holds the files)
#
# Then: `git push origin v<version>`, attach dist/* to the GitHub release, and (once the project is on
# PyPI) upload them there. Exit 0 released, 1 the wheel failed its test, 2 usage or a checkout not ready.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
py="${PYTHON:-python3}"
tag=true
case "${1:-}" in
  "") ;;
  --no-tag) tag=false ;;
  *) echo "release: unknown option ${1} (expected --no-tag)" >&2; exit 2 ;;
esac

version="$(sed -n 's/^__version__ = "\([^"]*\)".*$/\1/p' pubsubguard/core/__init__.py)"
[ -n "$version" ] || { echo "release: no __version__ in pubsubguard/core/__init__.py" >&2; exit 2; }
if $tag; then
  [ -z "$(git status --porcelain)" ] || { echo "release: the checkout has uncommitted changes (commit them, or --no-tag)" >&2; exit 2; }
  if git rev-parse -q --verify "refs/tags/v$version" >/dev/null; then
    echo "release: tag v$version exists already (raise __version__ in pubsubguard/core/__init__.py)" >&2; exit 2
  fi
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# the build reads a copy of the sources (nothing written into the checkout but dist/)
(tar cf - --exclude=venv --exclude=.venv --exclude=__pycache__ --exclude='*.egg-info' \
  pyproject.toml README.md pubsubguard infra validation policies) | (mkdir "$work/src" && tar xf - -C "$work/src")
"$py" -m venv "$work/build"
"$work/build/bin/python" -m pip install -q --disable-pip-version-check build
rm -rf dist && mkdir dist
"$work/build/bin/python" -m build -q --outdir dist "$work/src" >/dev/null
wheel="$(ls dist/*.whl)"
echo "release: built $(basename "$wheel") and $(basename dist/*.tar.gz)" >&2

# the wheel alone, in a fresh virtualenv, outside the checkout
"$py" -m venv "$work/tool"
"$work/tool/bin/python" -m pip install -q --disable-pip-version-check "$wheel"
installed="$(cd "$work" && env -u PYTHONPATH -u VIRTUAL_ENV "$work/tool/bin/pubsubguard" --version)"
[ "$installed" = "pubsubguard $version" ] || { echo "release: the wheel says '$installed', expected pubsubguard $version" >&2; exit 1; }
# a team's program, with its own virtualenv (pulumi and pulumi-gcp), judged by the installed tool
"$py" -m venv "$work/program-venv"
"$work/program-venv/bin/python" -m pip install -q --disable-pip-version-check pulumi pulumi-gcp
judge() {  # judge EXAMPLE EXPECTED_EXIT
  local project="$work/projects/$1"
  mkdir -p "$(dirname "$project")" && cp -r "examples/$1" "$project"
  rm -rf "$project/venv" && ln -s "$work/program-venv" "$project/venv"
  "$work/program-venv/bin/python" - "$project/Pulumi.yaml" <<'PY'
import sys, yaml
path = sys.argv[1]
project = yaml.safe_load(open(path))
runtime = project.get("runtime")
runtime = dict(runtime) if isinstance(runtime, dict) else {"name": runtime}
runtime["options"] = {**(runtime.get("options") or {}), "virtualenv": "venv"}
project["runtime"] = runtime
yaml.safe_dump(project, open(path, "w"), sort_keys=False)
PY
  local stack code=0
  stack="$(cd "$project" && ls Pulumi.*.yaml | head -1 | sed 's/^Pulumi\.\(.*\)\.yaml$/\1/')"
  (cd "$project" && env -u PYTHONPATH -u VIRTUAL_ENV PUBSUBGUARD_CACHE_DIR="$work/cache" \
    "$work/tool/bin/pubsubguard" check -s "$stack" >"$work/check.out" 2>"$work/check.err") || code=$?
  if [ "$code" != "$2" ]; then
    echo "release: the installed wheel judged examples/$1 with exit $code, expected $2:" >&2
    cat "$work/check.out" "$work/check.err" >&2
    exit 1
  fi
  echo "release: examples/$1: exit $code as expected" >&2
}
judge team-orders 0
judge invalid/no-exactly-once-on-push 1
judge invalid/dead-letter-service-agent-iam 1

if $tag; then
  git tag -a "v$version" -m "pubsubguard $version"
  echo "release: tagged v$version; push it with: git push origin v$version" >&2
fi
echo "release: done: $(ls dist/* | tr '\n' ' ')" >&2

#!/usr/bin/env bash
# The whole test suite, as `make test` and CI run it: services, lint, types, then pytest
# on PostgreSQL and on SQLite. Any failure fails the run; nothing is skipped.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python

bash scripts/ensure-services.sh || exit 1
bash scripts/ensure-chromium.sh || exit 1
bash scripts/ensure-docker.sh || exit 1

failed=()
step() {
  local name=$1; shift
  echo "== $name"
  "$@" || failed+=("$name")
}

step "ruff check" $PY -m ruff check .
step "ruff format" $PY -m ruff format --check .
step "mypy" $PY -m mypy .
for db in postgres sqlite; do
  step "pytest ($db)" env FLAREBOT_TEST_DB=$db $PY -m pytest -p no:cacheprovider
done

if [ ${#failed[@]} -ne 0 ]; then
  echo "FAILED: ${failed[*]}"
  exit 1
fi

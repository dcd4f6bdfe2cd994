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
# The whole suite on SQLite (what `make run` uses). On PostgreSQL again all but the tests
# whose subject the database does not touch: the pages in Chromium (their server side is
# tested through the API on both), the first start on a bare machine and `runstack` (each
# makes a SQLite database of its own), and the sandbox container's own hardening and image.
ONCE=(tests/e2e tests/core/test_first_run.py tests/core/test_runstack.py
      tests/tools/shell/test_hardening.py tests/tools/shell/test_image.py)
step "pytest (sqlite)" env FLAREBOT_TEST_DB=sqlite $PY -m pytest -p no:cacheprovider
step "pytest (postgres)" env FLAREBOT_TEST_DB=postgres $PY -m pytest -p no:cacheprovider "${ONCE[@]/#/--ignore=}"

if [ ${#failed[@]} -ne 0 ]; then
  echo "FAILED: ${failed[*]}"
  exit 1
fi

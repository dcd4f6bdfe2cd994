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
# tested through the API on both), the first start on a bare machine, `runstack` and the
# requirements-only venv (each makes a SQLite database of its own), the sandbox container's
# own hardening and image,
# its endless output, a Docker engine that stops answering, a zone's minute boundaries
# (beat's other live tests hold its database schedule on both), the doorbell's quiet spell,
# and schemathesis over the OpenAPI document (its subject is the description; the views'
# own tests run on both).
ONCE=(tests/e2e tests/core/test_first_run.py tests/core/test_runstack.py tests/core/test_requirements.py
      tests/tools/shell/test_hardening.py tests/tools/shell/test_image.py tests/core/test_schema_conformance.py)
ONCE_TESTS=(
  tests/tools/shell/test_tool.py::test_it_stops_endless_output_at_the_cap
  tests/tools/shell/test_leases.py::test_a_removal_the_engine_does_not_confirm_is_pending_keeps_its_place_and_is_retried
  tests/test_live_tasks.py::test_a_minutely_schedule_in_a_non_utc_zone_runs_twice_with_nobody_connected
  tests/conversations/test_doorbell.py::test_it_keeps_listening_through_a_quiet_spell_longer_than_one_wait
)
# Two lanes at once, each its own pytest session (its own database, Redis database, data dir
# and live stack; shell containers are scoped by database, and no test pauses what both
# share): the pages in Chromium, the first start's process tests, the shell and the live
# stack on SQLite; beside them the rest on SQLite, then on PostgreSQL.
# Most of a test's time is spent waiting on processes, sockets and Chromium, so two lanes on
# two cores take about the longer lane's time. The pages' lane writes to a log printed after.
# The shell's and the live stack's tests join the pages, so that the lanes take about as long.
PAGES=(tests/e2e tests/core/test_first_run.py tests/core/test_runstack.py tests/core/test_requirements.py
       tests/tools/shell tests/test_live_turns.py tests/test_live_stack.py tests/test_live_tasks.py
       tests/test_live_long_turns.py tests/test_live_browser_tasks.py)
pages_log=$(mktemp -t flarebot-pages-lane-XXXXXX.log)
echo "== pytest (sqlite, pages, shell, live stack): in the background, its output after the other lane"
env FLAREBOT_TEST_DB=sqlite $PY -m pytest -p no:cacheprovider "${PAGES[@]}" >"$pages_log" 2>&1 &
pages_pid=$!
trap 'kill "$pages_pid" 2>/dev/null' EXIT  # an interrupted run leaves no lane behind
step "pytest (sqlite)" env FLAREBOT_TEST_DB=sqlite $PY -m pytest -p no:cacheprovider "${PAGES[@]/#/--ignore=}"
# FLAREBOT_TEST_DATABASE_ONLY: only tests that can reach the database (tests/conftest.py).
step "pytest (postgres)" env FLAREBOT_TEST_DB=postgres FLAREBOT_TEST_DATABASE_ONLY=1 $PY -m pytest -p no:cacheprovider \
  "${ONCE[@]/#/--ignore=}" "${ONCE_TESTS[@]/#/--deselect=}"
wait "$pages_pid"
pages_status=$?
echo "== pytest (sqlite, pages, shell, live stack)"
cat "$pages_log"
rm -f "$pages_log"
[ "$pages_status" -eq 0 ] || failed+=("pytest (sqlite, pages, shell, live stack)")

if [ ${#failed[@]} -ne 0 ]; then
  echo "FAILED: ${failed[*]}"
  exit 1
fi

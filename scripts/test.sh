#!/usr/bin/env bash
# The whole test suite, as `make test` and CI run it: services, lint, types, then pytest
# on SQLite, and the tests whose subject is the database again on PostgreSQL. Any failure
# fails the run; nothing is skipped. Each lane prints its slowest tests and its time, and
# the run ends with every step's time.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
PYTEST=("$PY" -m pytest -p no:cacheprovider --durations=30)

bash scripts/ensure-services.sh || exit 1
bash scripts/ensure-chromium.sh || exit 1
bash scripts/ensure-docker.sh || exit 1

failed=()
times=()
minutes() { printf '%d min %02d s' $(($1 / 60)) $(($1 % 60)); }
step() {
  local name=$1 began=$SECONDS
  shift
  echo "== $name"
  "$@" || failed+=("$name")
  times+=("$name: $(minutes $((SECONDS - began)))")
}

# Two lanes at once, each its own pytest session (its own database, Redis database, data
# dir and live stack; shell containers are scoped by database, and no test pauses what both
# share). Most of a test's time is spent waiting on processes, sockets and Chromium, so two
# lanes on two cores take about the longer lane's time.
# - The live lane: every test that needs the live stack (daphne, a Celery worker and beat
#   as processes): the pages in Chromium and the live tests, on SQLite. It starts first
#   and writes to a log printed after the other lane.
# - The other lane: lint and types, every other test on SQLite, then the tests whose
#   subject is the database (`-m database`: rows, locks, SQL, full-text search,
#   migrations) on PostgreSQL, a few live ones among them.
LIVE=(tests/e2e tests/test_live_turns.py tests/test_live_stack.py tests/test_live_tasks.py
      tests/test_live_long_turns.py tests/test_live_browser_tasks.py)
# Tests of the database's subject that stay on SQLite alone: the doorbell's quiet spell
# (Redis's, not the database's) and a removal the engine does not confirm (Docker's).
ONCE_TESTS=(
  tests/conversations/test_doorbell.py::test_it_keeps_listening_through_a_quiet_spell_longer_than_one_wait
  tests/tools/shell/test_leases.py::test_a_removal_the_engine_does_not_confirm_is_pending_keeps_its_place_and_is_retried
)
live_log=$(mktemp -t flarebot-live-lane-XXXXXX.log)
echo "== pytest (sqlite, live stack and pages): in the background, its output after the other lane"
(
  began=$SECONDS
  env FLAREBOT_TEST_DB=sqlite "${PYTEST[@]}" "${LIVE[@]}"
  status=$?
  echo "lane time: $(minutes $((SECONDS - began)))"
  exit $status
) >"$live_log" 2>&1 &
live_pid=$!
live_began=$SECONDS
trap 'kill "$live_pid" 2>/dev/null' EXIT  # an interrupted run leaves no lane behind

step "ruff check" $PY -m ruff check .
step "ruff format" $PY -m ruff format --check .
step "mypy" $PY -m mypy .
step "pytest (sqlite)" env FLAREBOT_TEST_DB=sqlite "${PYTEST[@]}" "${LIVE[@]/#/--ignore=}"
# FLAREBOT_TEST_DATABASE_ONLY: of those, only tests that can reach the database (tests/conftest.py).
step "pytest (postgres, -m database)" env FLAREBOT_TEST_DB=postgres FLAREBOT_TEST_DATABASE_ONLY=1 \
  "${PYTEST[@]}" -m database tests "${ONCE_TESTS[@]/#/--deselect=}"
wait "$live_pid"
live_status=$?
times+=("pytest (sqlite, live stack and pages): $(minutes $((SECONDS - live_began)))")
echo "== pytest (sqlite, live stack and pages)"
cat "$live_log"
rm -f "$live_log"
[ "$live_status" -eq 0 ] || failed+=("pytest (sqlite, live stack and pages)")

echo "== times"
printf '%s\n' "${times[@]}" "all: $(minutes "$SECONDS")"
if [ ${#failed[@]} -ne 0 ]; then
  echo "FAILED: ${failed[*]}"
  exit 1
fi

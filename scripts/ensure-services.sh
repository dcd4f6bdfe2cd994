#!/usr/bin/env bash
# Make sure the services the test suite talks to are up: PostgreSQL and Redis on loopback.
# Starts them when they are installed but stopped; installs them (as root) when missing.
# Fails loudly when it cannot: nothing in the suite is skipped for a missing service.
set -euo pipefail

say() { echo "ensure-services: $*" >&2; }

as_root_install() {
  if [ "$(id -u)" != 0 ]; then say "cannot install $* without root"; exit 1; fi
  say "installing $*"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

postgres_up() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }
redis_up() { [ "$(redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null)" = PONG ]; }

if ! postgres_up; then
  command -v pg_ctlcluster >/dev/null || as_root_install postgresql
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  say "starting PostgreSQL $version"
  pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  for _ in $(seq 1 50); do postgres_up && break; sleep 0.2; done
  postgres_up || { say "PostgreSQL does not answer on 127.0.0.1:5432"; exit 1; }
fi
if ! psql -h 127.0.0.1 -U postgres -d postgres -tAc 'select 1' >/dev/null 2>&1; then
  say "cannot connect to PostgreSQL as postgres on 127.0.0.1 (the suite uses trust auth there;"
  say "set FLAREBOT_TEST_DATABASE_URL to a server URL whose user may create databases)"
  [ -n "${FLAREBOT_TEST_DATABASE_URL:-}" ] || exit 1
fi

if ! redis_up; then
  command -v redis-server >/dev/null || as_root_install redis-server
  say "starting Redis"
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no >/dev/null
  for _ in $(seq 1 50); do redis_up && break; sleep 0.2; done
  redis_up || { say "Redis does not answer on 127.0.0.1:6379"; exit 1; }
fi
say "PostgreSQL and Redis are up"

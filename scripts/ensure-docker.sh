#!/usr/bin/env bash
# Make sure the shell tool's tests have a Docker engine and the sandbox image: installs
# docker.io and debootstrap (as root) when missing, starts dockerd when no engine answers,
# and builds the image when it is missing. Fails loudly when it cannot: nothing in the
# suite is skipped for a missing engine.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "ensure-docker: $*" >&2; }
PY=${PY:-.venv/bin/python}
DOCKERD_LOG=${DOCKERD_LOG:-/tmp/dockerd.log}

engine_up() { docker info >/dev/null 2>&1; }

if ! command -v dockerd >/dev/null || ! command -v docker >/dev/null || ! command -v debootstrap >/dev/null; then
  if [ "$(id -u)" != 0 ]; then say "docker.io and debootstrap are missing and installing them needs root"; exit 1; fi
  say "installing docker.io and debootstrap"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io debootstrap >/dev/null
fi

if ! engine_up; then
  if [ -n "${DOCKER_HOST:-}" ]; then say "no Docker engine answers at DOCKER_HOST=$DOCKER_HOST"; exit 1; fi
  if [ "$(id -u)" != 0 ]; then say "no Docker engine runs and starting dockerd needs root"; exit 1; fi
  say "starting dockerd (log: $DOCKERD_LOG)"
  # No bridge in a private address range: sandboxes run with network none anyway.
  setsid nohup dockerd --bridge=none --iptables=false --ip6tables=false >"$DOCKERD_LOG" 2>&1 < /dev/null &
  for _ in $(seq 1 60); do engine_up && break; sleep 0.5; done
  engine_up || { say "dockerd did not come up; see $DOCKERD_LOG"; tail -n 5 "$DOCKERD_LOG" >&2 || true; exit 1; }
fi

image=$($PY -c 'from tools.shell.engine import SANDBOX_IMAGE; print(SANDBOX_IMAGE)')
if ! docker image inspect "$image" >/dev/null 2>&1; then
  say "building $image"
  $PY manage.py build_sandbox_image || { say "could not build $image"; exit 1; }
fi
say "Docker $(docker version --format '{{.Server.Version}}') with $image"

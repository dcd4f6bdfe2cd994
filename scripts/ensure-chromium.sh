#!/usr/bin/env bash
# Make sure Debian's Chromium is installed for the browser tests (Playwright cannot download
# a browser here). Installs it as root when missing; fails loudly when it cannot.
set -euo pipefail

say() { echo "ensure-chromium: $*" >&2; }
CHROMIUM=${FLAREBOT_CHROMIUM:-/usr/bin/chromium}

if [ ! -x "$CHROMIUM" ]; then
  if [ "$(id -u)" != 0 ]; then say "$CHROMIUM is missing and installing it needs root"; exit 1; fi
  say "installing chromium"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
[ -x "$CHROMIUM" ] || { say "$CHROMIUM is still missing"; exit 1; }
say "$("$CHROMIUM" --version 2>/dev/null || echo "$CHROMIUM")"

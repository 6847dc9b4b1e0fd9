#!/usr/bin/env bash
# Installs the system programs Convites runs with: redis-server (queue and pub/sub), wrk (the
# load generator of `make bench` and its smoke test) and, for the browser tests, Debian's
# chromium. Only what is missing is installed.
set -euo pipefail

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v wrk >/dev/null 2>&1 || need+=(wrk)
if [ "${1:-}" = "--with-browser" ]; then
  command -v chromium >/dev/null 2>&1 || need+=(chromium)
fi
[ ${#need[@]} -eq 0 ] && exit 0

if command -v apt-get >/dev/null 2>&1; then
  echo "Installing ${need[*]} from Debian packages..."
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${need[@]}"
else
  echo "Missing: ${need[*]}. This machine has no apt-get: install Redis 6+ (redis-server on PATH)," >&2
  echo "wrk (for the benchmark)" >&2
  echo "and Chromium (at /usr/bin/chromium, or set CHROMIUM_PATH) with your package manager." >&2
  exit 1
fi

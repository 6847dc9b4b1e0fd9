#!/usr/bin/env bash
# Installs the system programs Convites runs with: redis-server (queue and pub/sub), wrk (the
# load generator of `make bench` and its smoke test) and, for the tests, Debian's chromium and
# postgresql (`--postgresql`: postgresql alone, for `make bench DB=postgresql`). Only what is
# missing is installed.
set -euo pipefail

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v wrk >/dev/null 2>&1 || need+=(wrk)
# Debian's python3 needs python3-venv for `python3 -m venv`.
python3 -c "import ensurepip, venv" >/dev/null 2>&1 || need+=(python3-venv)
if [ "${1:-}" = "--for-tests" ]; then
  # Browser tests drive Debian's Chromium; the PostgreSQL run starts a private cluster.
  command -v chromium >/dev/null 2>&1 || need+=(chromium)
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
elif [ "${1:-}" = "--postgresql" ]; then
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
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
  echo "wrk (for the benchmark), and for the tests Chromium (/usr/bin/chromium, or set" >&2
  echo "CHROMIUM_PATH) and PostgreSQL 13+ (initdb under /usr/lib/postgresql/*/bin) with your" >&2
  echo "package manager." >&2
  exit 1
fi

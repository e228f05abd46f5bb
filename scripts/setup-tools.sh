#!/usr/bin/env bash
# Installs the system tools listed in scripts/system-tools.txt that are missing; with arguments, only those
# binaries (scripts/run-tests.ts passes the tools the selected tests need). A binary not listed is an error.
# As root on Debian: apt-get install. Otherwise: fail, naming the exact command to run. Never a silent skip.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
missing_pkgs=()
missing_bins=()
wanted=" $* "
for w in "$@"; do
  if ! grep -qE "^$w( |$)" "$here/system-tools.txt"; then
    echo "setup-tools: $w is not listed in scripts/system-tools.txt (add a line: <binary> <Debian package>)" >&2
    exit 1
  fi
done
while read -r bin pkg extra; do
  case "$bin" in ''|'#'*) continue ;; esac
  if [ $# -gt 0 ] && [[ "$wanted" != *" $bin "* ]]; then continue; fi
  if ! command -v "$bin" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$bin" ] && [ ! -x "/sbin/$bin" ]; then
    missing_pkgs+=("$pkg")
    # Further words on the line are packages the tool needs beside its own (e.g. GStreamer plugins).
    # shellcheck disable=SC2206
    missing_pkgs+=(${extra%%#*})
    missing_bins+=("$bin")
  fi
done < "$here/system-tools.txt"

if [ ${#missing_pkgs[@]} -eq 0 ]; then
  exit 0
fi
pkgs=$(printf '%s\n' "${missing_pkgs[@]}" | sort -u | tr '\n' ' ')
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "setup-tools: missing system tools: ${missing_bins[*]}" >&2
  echo "setup-tools: install them with: sudo apt-get update && sudo apt-get install -y $pkgs" >&2
  exit 1
fi
echo "setup-tools: installing $pkgs" >&2
# Package install scripts must not start daemons (chrony would start disciplining the system clock and
# take port 123): a policy-rc.d that denies every start, removed again afterwards if we created it.
policy=/usr/sbin/policy-rc.d
created_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' > "$policy"
  chmod +x "$policy"
  created_policy=1
fi
cleanup() { if [ "$created_policy" = 1 ]; then rm -f "$policy"; fi; }
trap cleanup EXIT
export DEBIAN_FRONTEND=noninteractive
aptlog=$(mktemp)
# shellcheck disable=SC2086
if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends $pkgs; } >"$aptlog" 2>&1; then
  tail -n 40 "$aptlog" >&2
  echo "setup-tools: apt-get failed; run by hand: apt-get update && apt-get install -y $pkgs" >&2
  exit 1
fi
rm -f "$aptlog"
for bin in "${missing_bins[@]}"; do
  if ! command -v "$bin" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$bin" ]; then
    echo "setup-tools: $bin still missing after installing $pkgs" >&2
    exit 1
  fi
done

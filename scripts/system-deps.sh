#!/usr/bin/env bash
# Install the Debian packages listed in a file (default system-packages.txt) that are
# not installed yet: one package per line, '#' starts a comment. Uses sudo only when
# not root. Without apt-get, or without root and sudo, it says so and exits 0 (the
# tests that need a package then skip and say why); an apt-get failure is an error.
set -euo pipefail
list="${1:-system-packages.txt}"
missing=()
while IFS= read -r line || [[ -n "$line" ]]; do
  pkg="${line%%#*}"
  pkg="${pkg//[[:space:]]/}"
  [[ -z "$pkg" ]] && continue
  # present: installed as a Debian package, or a command of that name is on PATH
  if ! command -v "$pkg" >/dev/null 2>&1 &&
     ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed'; then
    missing+=("$pkg")
  fi
done < "$list"
if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "system-deps: apt-get not found; install by hand: ${missing[*]}" >&2
  exit 0
fi
sudo=()
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo=(sudo)
  else
    echo "system-deps: not root and no password-less sudo; install by hand: ${missing[*]}" >&2
    exit 0
  fi
fi
echo "system-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"

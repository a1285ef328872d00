#!/usr/bin/env bash
# Installs the system packages Tidemark's local stack needs, from Debian's packages:
# MariaDB (server and client tools, incl. mariadb-binlog), a Java 17+ JDK, Maven, and
# Chromium (headless, for the tests that load the status page in a real browser).
# Idempotent: installs only what is missing, and never starts a service (the project
# starts its own MariaDB on loopback with its own data folder; see scripts/services/mariadb.py).
set -euo pipefail

missing=()
have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/usr/bin/$1" ]; }

have mariadbd || missing+=(mariadb-server)
have mariadb || missing+=(mariadb-client)
have mariadb-binlog || missing+=(mariadb-client)
have java || missing+=(openjdk-17-jre-headless)
have javac || missing+=(openjdk-17-jdk-headless)  # compiles the parity test's recorder (jvm/recorder/)
have mvn || missing+=(maven)
have chromium || missing+=(chromium)
have chromedriver || missing+=(chromium-driver)
if ! have python3.11; then missing+=(python3.11 python3.11-venv); fi

if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi
# de-duplicate
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
echo "install_system: installing from Debian's packages: ${missing[*]}"

if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
    echo "install_system: need root to install ${missing[*]} (run: apt-get install ${missing[*]})" >&2
    exit 1
  fi
else
  SUDO=
fi

# Keep Debian's maintainer scripts from starting a system-wide mariadb service:
# the project runs its own instance. Only add the policy file if none exists, and
# remove it again afterwards.
policy=/usr/sbin/policy-rc.d
added_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
  $SUDO chmod +x "$policy"
  added_policy=1
fi
cleanup() { if [ "$added_policy" = 1 ]; then $SUDO rm -f "$policy"; fi; }
trap cleanup EXIT

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install_system: done"

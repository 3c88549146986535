#!/usr/bin/env bash
# Make the docker sandbox backend usable on this machine; safe to run again (each step is skipped when done).
#   1. install docker.io and debootstrap if missing (Debian/Ubuntu, as root);
#   2. start dockerd in the background if it is not answering, without a bridge or firewall rules
#      (the defaults would create a private-range bridge and iptables rules on a shared host);
#   3. wait until `docker info` works;
#   4. build the sandbox image (sandboxes/image/build.sh skips it when the recipe is unchanged).
# Environment: DOCKERD_LOG (default /var/log/dockerd.log), DOCKER_WAIT_S (default 60).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOG="${DOCKERD_LOG:-/var/log/dockerd.log}"
WAIT_S="${DOCKER_WAIT_S:-60}"
SUDO=""
[[ $(id -u) -ne 0 ]] && SUDO="sudo"

missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v debootstrap >/dev/null || missing+=(debootstrap)
if (( ${#missing[@]} )); then
    echo "docker-setup: installing ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
    if pgrep -x dockerd >/dev/null; then
        echo "docker-setup: dockerd is running but not answering yet; waiting"
    else
        echo "docker-setup: starting dockerd (log: $LOG)"
        # setsid + nohup: the daemon must outlive this script and the CI step that ran it.
        $SUDO setsid nohup dockerd --bridge=none --iptables=false --ip-masq=false >"$LOG" 2>&1 < /dev/null &
    fi
    for ((i = 0; i < WAIT_S * 2; i++)); do
        docker info >/dev/null 2>&1 && break
        sleep 0.5
    done
    if ! docker info >/dev/null 2>&1; then
        echo "docker-setup: dockerd did not answer within ${WAIT_S}s; last log lines:" >&2
        tail -n 20 "$LOG" >&2 || true
        exit 1
    fi
fi
echo "docker-setup: daemon ready ($(docker info --format '{{.ServerVersion}}'))"

"$ROOT/sandboxes/image/build.sh"

#!/usr/bin/env bash
# A container engine that `sam local invoke` can drive, and the address at which its containers
# reach the host's loopback (where `paymos-inbox dev` and the tests run the emulators). Writes
# target/sam-local/engine.env (DOCKER_HOST, HOST_GATEWAY, SAM_ARCH, SAM_SKIP_PULL) for
# scripts/sam-local.sh and the `sam local invoke` tests; idempotent, seconds when already set.
#
# - A Docker engine that answers (Docker Desktop, Docker on Linux): used as it is. Docker
#   Desktop's containers reach the host as host.docker.internal; on Linux, through docker0's
#   gateway, which needs the DNAT rule below (as root).
# - Otherwise, on Linux as root: podman from Debian's packages, serving Docker's API on a socket
#   of its own, with AWS's Lambda base image stood in for by a Debian root filesystem built with
#   debootstrap (no registry is reached: SAM is run with --skip-pull-image), and the containers'
#   gateway DNAT-ed to 127.0.0.1 (SAM never gives a container host networking, whatever
#   --docker-network says: aws/aws-sam-cli#4236).
# Where none of that can be had, it stops and says what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/sam-local
mkdir -p "$out"
case "$(uname -m)" in x86_64 | amd64) arch=x86_64 ;; aarch64 | arm64) arch=arm64 ;; *) arch="$(uname -m)" ;; esac
image="public.ecr.aws/lambda/provided:al2023-$arch"

write_env() { # DOCKER_HOST HOST_GATEWAY SKIP_PULL
  printf 'DOCKER_HOST=%s\nHOST_GATEWAY=%s\nSAM_ARCH=%s\nSAM_SKIP_PULL=%s\n' "$1" "$2" "$arch" "$3" > "$out/engine.env"
  cat "$out/engine.env"
}

dnat() { # bridge gateway: containers reach the host's 127.0.0.1 through their gateway
  local bridge=$1 gateway=$2
  iptables -t nat -C PREROUTING -i "$bridge" -d "$gateway/32" -p tcp -j DNAT --to-destination 127.0.0.1 2>/dev/null ||
    iptables -t nat -I PREROUTING 1 -i "$bridge" -d "$gateway/32" -p tcp -j DNAT --to-destination 127.0.0.1
  sysctl -qw "net.ipv4.conf.all.route_localnet=1"
}

# 1. A Docker engine that answers.
if [ -z "${SAM_LOCAL_PODMAN:-}" ] && command -v docker >/dev/null && docker info >/dev/null 2>&1; then
  host="${DOCKER_HOST:-unix:///var/run/docker.sock}"
  if [ "$(uname -s)" = Linux ]; then
    [ "$(id -u)" = 0 ] || { echo "sam-local: containers reach the host's emulators through docker0's gateway with a DNAT rule: run as root once, or see docs/deploy.md"; exit 1; }
    gateway="$(docker network inspect bridge -f '{{(index .IPAM.Config 0).Gateway}}')"
    dnat docker0 "$gateway"
    write_env "$host" "$gateway" false
  else
    write_env "$host" host.docker.internal false
  fi
  exit 0
fi

# 2. Podman, rootful, on Linux.
[ "$(uname -s)" = Linux ] || { echo "sam-local: needs a Docker engine (Docker Desktop) on $(uname -s)"; exit 1; }
[ "$(id -u)" = 0 ] || { echo "sam-local: no Docker engine answers, and podman's set-up needs root (packages, the DNAT rule)"; exit 1; }
missing=()
for c in podman runc debootstrap iptables; do command -v "$c" >/dev/null || missing+=("$c"); done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "sam-local: installing ${missing[*]} (Debian's packages)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends podman runc debootstrap iptables >/dev/null
fi
# runc (crun cannot run under hybrid cgroups), the cgroupfs manager (no systemd is needed) and
# Lambda's own open-file and process limits (podman's defaults need CAP_SYS_RESOURCE). Only
# when the machine has no configuration of its own.
conf=/etc/containers/containers.conf
if [ ! -s "$conf" ]; then
  mkdir -p /etc/containers
  cat > "$conf" <<'EOF'
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
EOF
fi
# The stand-in for AWS's base image: a Debian root filesystem (a Rust bootstrap needs only libc
# and libgcc_s; SAM's own Dockerfile step needs sh, mv and chmod), built once and cached.
if ! podman image exists "$image"; then
  cache=.tools/sam-local
  tarball="$cache/rootfs-bookworm-$arch.tar"
  if [ ! -s "$tarball" ]; then
    mkdir -p "$cache"
    rootfs="$(mktemp -d)"
    mirror="$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)"
    mirror="${mirror:-$(awk '/^deb /{print $2; exit}' /etc/apt/sources.list 2>/dev/null)}"
    echo "sam-local: building the stand-in base image from Debian bookworm (${mirror:-default mirror}), once"
    debootstrap --variant=minbase --include=ca-certificates bookworm "$rootfs" ${mirror:+"$mirror"} >"$cache/debootstrap.log" 2>&1 ||
      { tail -20 "$cache/debootstrap.log"; echo "sam-local: debootstrap failed"; exit 1; }
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/{doc,man,locale}/*
    mkdir -p "$rootfs/var/task" "$rootfs/opt"
    tar -C "$rootfs" -cf "$tarball.part" . && mv "$tarball.part" "$tarball"
    rm -rf "$rootfs"
  fi
  podman import --change 'WORKDIR /var/task' "$tarball" "$image" >/dev/null 2>&1
  # SAM builds its runtime image on the base once, and reuses it while it exists.
  podman rmi -f "${image/al2023-/al2023-rapid-}" >/dev/null 2>&1 || true
fi
# Docker's API, served by podman on a socket of the project's.
sock="$PWD/$out/podman.sock"
if ! curl -sf --unix-socket "$sock" http://d/_ping >/dev/null 2>&1; then
  rm -f "$sock"
  nohup podman system service --time=0 "unix://$sock" >"$out/podman.log" 2>&1 &
  for _ in $(seq 50); do curl -sf --unix-socket "$sock" http://d/_ping >/dev/null 2>&1 && break; sleep 0.2; done
  curl -sf --unix-socket "$sock" http://d/_ping >/dev/null || { cat "$out/podman.log"; echo "sam-local: podman's API did not start"; exit 1; }
fi
# Podman's default bridge (cni-podman0, 10.88.0.0/16).
dnat cni-podman0 10.88.0.1
write_env "unix://$sock" 10.88.0.1 true

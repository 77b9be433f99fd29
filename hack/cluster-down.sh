#!/usr/bin/env bash
# cluster-down.sh -- stops what hack/cluster-up.sh started (only the processes named by its PID
# files), then removes pod containers, mounts, pod network namespaces, the CNI bridge and the
# kubelet's cgroups. Safe to run when nothing is running.
# PURGE=1 also deletes the cluster's state (etcd data, kubelet root, containerd root) but keeps
# the PKI and the built pause image, so the next cluster-up.sh is an empty cluster with the same
# credentials and kubeconfigs.
# Env: CLUSTER_DIR (default /tmp/fencedlock-cluster), PURGE.
set -euo pipefail

CLUSTER_DIR=${CLUSTER_DIR:-/tmp/fencedlock-cluster}
# Must match hack/cluster-up.sh.
CTRD_STATE=/run/fencedlock-containerd
SOCK=$CTRD_STATE/containerd.sock
BRIDGE=flcni0

log() { echo "[cluster-down] $*" >&2; }

if [ ! -d "$CLUSTER_DIR" ]; then
  log "nothing to do: no $CLUSTER_DIR"
  exit 0
fi
CLUSTER_DIR=$(cd "$CLUSTER_DIR" && pwd)

# alive PID: exists and is not a zombie (where nothing reaps orphans, kill -0 succeeds on those).
alive() {
  local state
  kill -0 "$1" 2> /dev/null || return 1
  state=$(awk '{print $3}' 2> /dev/null < "/proc/$1/stat") || return 1
  [ "$state" != Z ]
}

# pid_of NAME: the PID in NAME.pid if that process is alive and still runs NAME (PID files can
# outlive a reboot and their PIDs be reused by something else).
pid_of() {
  local f=$CLUSTER_DIR/$1.pid pid argv0
  [ -f "$f" ] || return 1
  pid=$(<"$f")
  [ -n "$pid" ] && alive "$pid" || return 1
  argv0=$(tr '\0' '\n' 2> /dev/null < "/proc/$pid/cmdline" | head -n1)
  [ "${argv0##*/}" = "$1" ] || return 1
  echo "$pid"
}

# stop NAME: SIGTERM, up to 10 s to exit, then SIGKILL.
stop() {
  local pid
  if pid=$(pid_of "$1"); then
    kill "$pid" 2> /dev/null || true
    for _ in $(seq 1 40); do
      alive "$pid" || break
      sleep 0.25
    done
    if alive "$pid"; then kill -9 "$pid" 2> /dev/null || true; fi
    log "stopped $1 (pid $pid)"
  fi
  rm -f "$CLUSTER_DIR/$1.pid"
}

# This directory ran a node: cluster-up.sh --node wrote containerd.toml.
NODE=0
[ ! -f "$CLUSTER_DIR/containerd.toml" ] || NODE=1

# The kubelet first, so it does not restart the containers removed next.
stop kubelet

if [ $NODE = 1 ]; then
  if pid_of containerd > /dev/null && [ -S "$SOCK" ]; then
    # Through containerd while it runs: killing the tasks also ends their shims.
    ctr() { timeout 30 ctr -a "$SOCK" -n k8s.io "$@"; }
    for t in $(ctr tasks ls -q 2> /dev/null); do ctr tasks kill -s SIGKILL "$t" > /dev/null 2>&1 || true; done
    for t in $(ctr tasks ls -q 2> /dev/null); do ctr tasks delete -f "$t" > /dev/null 2>&1 || true; done
    for c in $(ctr containers ls -q 2> /dev/null); do ctr containers rm "$c" > /dev/null 2>&1 || true; done
  fi
  stop containerd
  # Leftovers when containerd had died: containers straight through runc, then their shims
  # (found by our socket in their command line, killed by PID).
  if [ -d "$CTRD_STATE/runc/k8s.io" ] && command -v runc > /dev/null; then
    for c in $(runc --root "$CTRD_STATE/runc/k8s.io" list -q 2> /dev/null); do
      if runc --root "$CTRD_STATE/runc/k8s.io" delete -f "$c" > /dev/null 2>&1; then log "removed leftover container $c"; fi
    done
  fi
  for p in /proc/[0-9]*; do
    cmd=$(tr '\0' ' ' 2> /dev/null < "$p/cmdline") || continue
    argv0=${cmd%% *}
    case ${argv0##*/}:$cmd in
      containerd-shim*:*" -address $SOCK"*)
        if kill -9 "${p#/proc/}" 2> /dev/null; then log "killed leftover shim ${p#/proc/}"; fi ;;
    esac
  done
fi

stop kube-scheduler
stop kube-controller-manager
stop kube-apiserver
stop etcd
rm -f "$CLUSTER_DIR/ports"

if [ $NODE = 1 ]; then
  # Mounts left by the kubelet (volumes), containerd (rootfs, sandbox shm) and pod netns (nsfs),
  # deepest first; a busy one is detached lazily.
  awk -v a="$CLUSTER_DIR/" -v b="$CTRD_STATE/" 'index($2, a) == 1 || index($2, b) == 1 {print $2}' /proc/mounts |
    sort -r | while read -r m; do
    umount "$m" 2> /dev/null || umount -l "$m" 2> /dev/null || log "could not unmount $m"
  done
  rm -f "$CTRD_STATE"/io.containerd.grpc.v1.cri/netns/* 2> /dev/null || true
  if ip link show "$BRIDGE" > /dev/null 2>&1; then ip link del "$BRIDGE" || true; fi
  # cluster-up.sh's route from pods to the API server.
  if command -v iptables > /dev/null; then
    while iptables -t nat -D PREROUTING -i "$BRIDGE" -j FENCEDLOCK-APISERVER 2> /dev/null; do :; done
    if iptables -t nat -F FENCEDLOCK-APISERVER 2> /dev/null; then iptables -t nat -X FENCEDLOCK-APISERVER 2> /dev/null || true; fi
  fi
  if [ -f "$CLUSTER_DIR/ip_forward.orig" ]; then
    cat "$CLUSTER_DIR/ip_forward.orig" > /proc/sys/net/ipv4/ip_forward 2> /dev/null ||
      log "could not restore net.ipv4.ip_forward=$(<"$CLUSTER_DIR/ip_forward.orig")"
    rm -f "$CLUSTER_DIR/ip_forward.orig"
  fi
  # IP allocations of pods that no longer exist.
  rm -rf "$CLUSTER_DIR/cni/ipam"
  # The kubelet links every container log into the fixed /var/log/containers.
  if [ -d /var/log/containers ]; then
    find /var/log/containers -maxdepth 1 -type l -lname "$CLUSTER_DIR/pod-logs/*" -delete 2> /dev/null || true
  fi
  # The kubelet's iptables canaries and its KUBE-FIREWALL (drops non-loopback traffic to 127/8).
  for ipt in iptables ip6tables; do
    command -v "$ipt" > /dev/null || continue
    for hook in INPUT OUTPUT; do
      while "$ipt" -t filter -D "$hook" -j KUBE-FIREWALL 2> /dev/null; do :; done
    done
    for t in mangle filter nat; do
      for c in KUBE-FIREWALL KUBE-KUBELET-CANARY KUBE-IPTABLES-HINT; do
        if "$ipt" -t "$t" -F "$c" 2> /dev/null; then "$ipt" -t "$t" -X "$c" 2> /dev/null || true; fi
      done
    done
  done
  # The kubelet's pod cgroups (cgroupfs driver; v1 per controller, or v2). rmdir only takes empty ones.
  for h in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
    if [ -d "$h" ]; then find "$h" -depth -type d -exec rmdir {} \; 2> /dev/null || true; fi
  done
fi

if [ "${PURGE:-0}" = 1 ]; then
  # --one-file-system: never follow a mount that survived the unmounting above.
  rm -rf --one-file-system "$CLUSTER_DIR/etcd-data" "$CLUSTER_DIR/kubelet-root" "$CLUSTER_DIR/containerd" \
    "$CLUSTER_DIR/pod-logs" "$CLUSTER_DIR/kubelet-plugins" "$CTRD_STATE"
  log "state purged (PKI kept in $CLUSTER_DIR/pki)"
fi
log "down"

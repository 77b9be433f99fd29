#!/usr/bin/env bash
# e2e.sh -- runs the end-to-end suite (test/e2e) on a real single-node cluster when this machine
# can host one: root (containerd, kubelet, mounts, network namespaces) and Debian's containerd,
# runc and CNI plugins. Otherwise it says why and skips, unless E2E_REQUIRED=1 (CI), which turns
# the skip into a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
why=()
[ "$(id -u)" = 0 ] || why+=("needs root (containerd, kubelet, mounts and network namespaces)")
for b in containerd runc ctr; do
  command -v $b >/dev/null || why+=("needs $b (apt-get install containerd runc containernetworking-plugins iptables)")
done
[ -x /usr/lib/cni/bridge ] || why+=("needs the CNI plugins in /usr/lib/cni (apt-get install containernetworking-plugins)")
command -v iptables >/dev/null || why+=("needs iptables")
if [ ${#why[@]} -gt 0 ]; then
  echo "SKIPPING the end-to-end suite (test/e2e, a real single-node cluster):" >&2
  printf '  - %s\n' "${why[@]}" >&2
  if [ "${E2E_REQUIRED:-0}" = 1 ]; then
    echo "E2E_REQUIRED=1: failing instead of skipping" >&2
    exit 1
  fi
  exit 0
fi
# The suite renders the install with the pinned kustomize, as `make build-installer` does.
[ -x bin/kustomize ] || make -s kustomize >&2
# ... and installs dist/chart with the pinned helm.
[ -x bin/helm ] || make -s helm >&2
echo "running the end-to-end suite on a real single-node cluster (test/e2e)" >&2
exec go test -tags e2e ./test/e2e/ -count=1 -timeout 60m -v -ginkgo.v ${E2E_ARGS:-}

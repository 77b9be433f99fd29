#!/usr/bin/env bash
# cluster-up.sh [--node] -- starts a local Kubernetes control plane (etcd, kube-apiserver) bound to
# 127.0.0.1 from the pinned binaries of hack/k8s-binaries.sh; with --node also a real single node
# (kube-controller-manager, kube-scheduler, containerd, kubelet). Components already running are
# left alone and the PKI is generated once, so re-running is cheap. Progress goes to stderr; stdout
# gets only `export KUBECONFIG=...`, so `eval "$(hack/cluster-up.sh)"` works. Stop with
# hack/cluster-down.sh.
#
# Env: CLUSTER_DIR (default /tmp/fencedlock-cluster), API_PORT (6443), ETCD_PORT (2379; peer and
# metrics ports are +1 and +2), NODE_NAME (default: the hostname if it resolves to 127.0.0.1, else
# localhost), POD_SUBNET (10.244.0.0/24).
# --node needs root and uses fixed ports 10248/10250 (kubelet), 10257 (controller-manager),
# 10259 (scheduler); its containerd keeps its socket and runtime state in /run/fencedlock-containerd.
#
# No kube-proxy and no cluster DNS. Pods reach the API server through the kubernetes Service
# (10.96.0.1:443, what in-cluster clients dial): --node DNATs it to 127.0.0.1 for the pod bridge
# only. The API server reaches webhook Services through their endpoints (--enable-aggregator-routing),
# so an operator can run in the cluster as installed (the e2e suite does); `make demo` runs it
# outside with its webhooks registered by URL. Pods on the host network reach 127.0.0.1 directly.
# Images come from hack/mkimage.sh via hack/cluster-load-image.sh with `imagePullPolicy: Never`;
# no registry is reachable.
set -euo pipefail

NODE=0
case ${1:-} in
  "") ;;
  --node) NODE=1 ;;
  *) echo "usage: $0 [--node]" >&2; exit 2 ;;
esac

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CLUSTER_DIR=${CLUSTER_DIR:-/tmp/fencedlock-cluster}
API_PORT=${API_PORT:-6443}
ETCD_PORT=${ETCD_PORT:-2379}
ETCD_PEER_PORT=$((ETCD_PORT + 1))
ETCD_METRICS_PORT=$((ETCD_PORT + 2))
POD_SUBNET=${POD_SUBNET:-10.244.0.0/24}
SERVICE_CIDR=10.96.0.0/16
APISERVER_SVC_IP=10.96.0.1 # the kubernetes Service: the first address of SERVICE_CIDR, in the apiserver cert
# The pod bridge; hack/cluster-down.sh deletes it.
BRIDGE=flcni0
# Outside CLUSTER_DIR because a unix socket path must stay under 108 bytes; hack/cluster-down.sh
# uses the same path.
CTRD_STATE=/run/fencedlock-containerd
SOCK=$CTRD_STATE/containerd.sock
# A "localhost/" name is never normalised to docker.io and never pulled.
PAUSE_IMAGE=localhost/fencedlock/pause:1.0

log() { echo "[cluster-up +${SECONDS}s] $*" >&2; }
die() { echo "[cluster-up +${SECONDS}s] ERROR: $*" >&2; exit 1; }

for tool in curl openssl; do
  command -v $tool > /dev/null || die "$tool is required"
done
if [ $NODE = 1 ] && [ "$(id -u)" != 0 ]; then
  die "--node needs root (containerd, kubelet, mounts, network namespaces)"
fi

mkdir -p "$CLUSTER_DIR"
CLUSTER_DIR=$(cd "$CLUSTER_DIR" && pwd)
PKI=$CLUSTER_DIR/pki
KUBECONFIG=$CLUSTER_DIR/admin.kubeconfig
mkdir -p "$CLUSTER_DIR/logs"

if [ -z "${NODE_NAME:-}" ]; then
  NODE_NAME=$(hostname | tr '[:upper:]' '[:lower:]')
  # The API server reaches the kubelet (logs, exec) by this name, and the kubelet listens on
  # 127.0.0.1 only (it refuses a loopback node IP, so the name is the one way to get there).
  if [ "$(getent ahostsv4 "$NODE_NAME" 2>/dev/null | awk 'NR == 1 {print $1}')" != 127.0.0.1 ]; then
    NODE_NAME=localhost
  fi
fi

components=(etcd kube-apiserver kubectl)
[ $NODE = 0 ] || components+=(kube-controller-manager kube-scheduler kubelet)
BIN=$("$ROOT/hack/k8s-binaries.sh" "${components[@]}")
kubectl() { "$BIN/kubectl" --kubeconfig="$KUBECONFIG" "$@"; }

# running NAME: the PID file names a live process whose executable is NAME (PID files in /tmp can
# outlive a reboot and their PIDs be reused).
running() {
  local f=$CLUSTER_DIR/$1.pid pid argv0
  [ -f "$f" ] || return 1
  pid=$(<"$f")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  argv0=$(tr '\0' '\n' 2> /dev/null < "/proc/$pid/cmdline" | head -n1)
  [ "${argv0##*/}" = "$1" ]
}

# start NAME CMD...: NAME is the binary's basename. setsid keeps the process out of the caller's
# process group, so a Ctrl-C or a CI step ending does not take the cluster down with it.
start() {
  local name=$1
  shift
  if running "$name"; then
    log "$name already running (pid $(<"$CLUSTER_DIR/$name.pid"))"
    return
  fi
  setsid "$@" > "$CLUSTER_DIR/logs/$name.log" 2>&1 < /dev/null &
  local pid=$!
  echo $pid > "$CLUSTER_DIR/$name.pid"
  # Until setsid has exec'd the binary, /proc shows "setsid": wait, or `running` would report
  # a process that is merely starting as dead.
  for _ in $(seq 1 100); do
    running "$name" || ! kill -0 $pid 2>/dev/null && break
    sleep 0.02
  done
  log "started $name (pid $pid, log $CLUSTER_DIR/logs/$name.log)"
}

# wait_for WHAT TIMEOUT NAME CMD...: polls CMD; gives up early if process NAME has died.
wait_for() {
  local what=$1 timeout=$2 name=$3
  shift 3
  local deadline=$((SECONDS + timeout))
  until "$@" > /dev/null 2>&1; do
    if ! running "$name"; then
      tail -n 20 "$CLUSTER_DIR/logs/$name.log" >&2 || true
      die "$name exited while waiting for $what; see $CLUSTER_DIR/logs/$name.log"
    fi
    if [ $SECONDS -ge $deadline ]; then
      tail -n 20 "$CLUSTER_DIR/logs/$name.log" >&2 || true
      die "timed out after ${timeout}s waiting for $what; see $CLUSTER_DIR/logs/$name.log"
    fi
    sleep 0.5
  done
}

# A running cluster keeps the ports it was started with; refuse to write kubeconfigs for others.
PORTS="API_PORT=$API_PORT ETCD_PORT=$ETCD_PORT"
if { running etcd || running kube-apiserver; } && [ -f "$CLUSTER_DIR/ports" ] &&
  [ "$(<"$CLUSTER_DIR/ports")" != "$PORTS" ]; then
  die "cluster in $CLUSTER_DIR is running with $(<"$CLUSTER_DIR/ports"); run hack/cluster-down.sh first"
fi
echo "$PORTS" > "$CLUSTER_DIR/ports"

# ---- PKI: made once. Client identities follow kubeadm's: system:masters for the admin.

# sign DIR NAME SUBJECT [SANS]: a key pair signed by the CA in $CA_DIR; with SANS a serving (and
# client) cert, else a client cert.
sign() {
  local dir=$1 name=$2 subj=$3 sans=${4:-}
  openssl genrsa -out "$dir/$name.key" 2048 2> /dev/null
  openssl req -new -key "$dir/$name.key" -subj "$subj" -out "$dir/$name.csr"
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    if [ -n "$sans" ]; then
      echo "extendedKeyUsage=serverAuth,clientAuth"
      echo "subjectAltName=$sans"
    else
      echo "extendedKeyUsage=clientAuth"
    fi
  } > "$dir/$name.ext"
  openssl x509 -req -in "$dir/$name.csr" -CA "$CA_DIR/ca.crt" -CAkey "$CA_DIR/ca.key" \
    -CAserial "$CA_DIR/ca.srl" -CAcreateserial -days 3650 -extfile "$dir/$name.ext" \
    -out "$dir/$name.crt" 2> /dev/null
  rm -f "$dir/$name.csr" "$dir/$name.ext"
}

if [ ! -f "$PKI/ca.crt" ]; then
  log "generating PKI in $PKI"
  # Built aside and renamed, so an interrupted run never leaves a half-made PKI behind.
  T=$(mktemp -d "$CLUSTER_DIR/.pki.XXXXXX")
  # An explicit config: the CA extensions must not depend on the distribution's openssl.cnf.
  cat > "$T/ca.cnf" <<'EOF'
[req]
distinguished_name = dn
prompt = no
[dn]
CN = fencedlock-local-ca
[v3_ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,digitalSignature,keyEncipherment,keyCertSign
subjectKeyIdentifier = hash
EOF
  openssl genrsa -out "$T/ca.key" 2048 2> /dev/null
  openssl req -x509 -new -key "$T/ca.key" -config "$T/ca.cnf" -extensions v3_ca -days 3650 -out "$T/ca.crt"
  rm -f "$T/ca.cnf"
  CA_DIR=$T
  sign "$T" apiserver "/CN=kube-apiserver" \
    "DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:10.96.0.1"
  sign "$T" admin "/O=system:masters/CN=kubernetes-admin"
  sign "$T" apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
  sign "$T" kube-controller-manager "/CN=system:kube-controller-manager"
  sign "$T" kube-scheduler "/CN=system:kube-scheduler"
  openssl genrsa -out "$T/sa.key" 2048 2> /dev/null
  openssl rsa -in "$T/sa.key" -pubout -out "$T/sa.pub" 2> /dev/null
  chmod 600 "$T"/*.key
  rm -rf "$PKI"
  mv "$T" "$PKI"
fi

# The kubelet's certs carry the node name, so they are made per name, once.
if [ $NODE = 1 ] && [ ! -f "$PKI/kubelet-$NODE_NAME-serving.crt" ]; then
  log "generating kubelet certificates for node $NODE_NAME"
  T=$(mktemp -d "$CLUSTER_DIR/.pki.XXXXXX")
  CA_DIR=$PKI
  sign "$T" "kubelet-$NODE_NAME" "/O=system:nodes/CN=system:node:$NODE_NAME"
  sign "$T" "kubelet-$NODE_NAME-serving" "/O=system:nodes/CN=system:node:$NODE_NAME" \
    "DNS:$NODE_NAME,DNS:localhost,IP:127.0.0.1"
  chmod 600 "$T"/*.key
  mv "$T"/* "$PKI/"
  rmdir "$T"
fi

# kubeconfig FILE CERT: embeds the certs; rewritten only when something changed (API_PORT).
kubeconfig() {
  local file=$1 cert=$2
  cat > "$file.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: fencedlock-local
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority-data: $(base64 -w0 < "$PKI/ca.crt")
users:
- name: $cert
  user:
    client-certificate-data: $(base64 -w0 < "$PKI/$cert.crt")
    client-key-data: $(base64 -w0 < "$PKI/$cert.key")
contexts:
- name: fencedlock-local
  context:
    cluster: fencedlock-local
    user: $cert
current-context: fencedlock-local
EOF
  chmod 600 "$file.tmp"
  if cmp -s "$file.tmp" "$file"; then rm -f "$file.tmp"; else mv "$file.tmp" "$file"; fi
}
kubeconfig "$KUBECONFIG" admin

# ---- control plane

start etcd "$BIN/etcd" --name fencedlock --data-dir "$CLUSTER_DIR/etcd-data" \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster "fencedlock=http://127.0.0.1:$ETCD_PEER_PORT" \
  --listen-metrics-urls "http://127.0.0.1:$ETCD_METRICS_PORT" \
  --quota-backend-bytes 2147483648
wait_for "etcd health" 60 etcd curl -sf "http://127.0.0.1:$ETCD_METRICS_PORT/health"

# The kubernetes Service gets no endpoints (nothing routes to them without kube-proxy; pods reach
# the API server by the DNAT below). --enable-aggregator-routing makes the API server call
# webhook (and aggregated API) Services at their endpoints' pod IPs, which the host reaches over
# the pod bridge; webhooks registered by URL to https://127.0.0.1:<port> work too.
start kube-apiserver "$BIN/kube-apiserver" \
  --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$API_PORT" \
  --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
  --client-ca-file="$PKI/ca.crt" --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
  --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
  --kubelet-certificate-authority="$PKI/ca.crt" --kubelet-preferred-address-types=Hostname,InternalIP \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
  --service-cluster-ip-range="$SERVICE_CIDR" \
  --authorization-mode=Node,RBAC \
  --enable-admission-plugins=NodeRestriction \
  --endpoint-reconciler-type=none \
  --enable-aggregator-routing=true \
  --allow-privileged=true
wait_for "kube-apiserver /readyz" 120 kube-apiserver kubectl get --raw /readyz
log "control plane ready on https://127.0.0.1:$API_PORT"

if [ $NODE = 0 ]; then
  echo "export KUBECONFIG=$KUBECONFIG"
  exit 0
fi

# ---- node: host packages (Debian's containerd 1.6, runc, CNI plugins; kubelet wants iptables)

CNI_BIN=
for d in /usr/lib/cni /opt/cni/bin; do
  if [ -x "$d/bridge" ]; then CNI_BIN=$d; break; fi
done
if ! command -v containerd > /dev/null || ! command -v runc > /dev/null || ! command -v iptables > /dev/null ||
  [ -z "$CNI_BIN" ]; then
  log "installing containerd runc containernetworking-plugins iptables (apt-get)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq containerd runc containernetworking-plugins iptables > /dev/null
  CNI_BIN=/usr/lib/cni
fi

# ---- pause image: no registry to pull registry.k8s.io/pause from, so build our own.

mkdir -p "$CLUSTER_DIR/images"
PAUSE_TAR=$CLUSTER_DIR/images/pause.tar
PAUSE_BUILT=0
if [ ! -f "$PAUSE_TAR" ] || [ "$ROOT/hack/images/pause/main.go" -nt "$PAUSE_TAR" ]; then
  log "building pause image"
  # -mod=readonly: this build must never touch go.mod/go.sum (the package is stdlib only).
  (cd "$ROOT" && CGO_ENABLED=0 GOFLAGS=-mod=readonly go build -trimpath -ldflags='-s -w' \
    -o "$CLUSTER_DIR/images/pause" ./hack/images/pause)
  "$ROOT/hack/mkimage.sh" "$CLUSTER_DIR/images/pause" "$PAUSE_IMAGE" "$PAUSE_TAR" 2> /dev/null
  PAUSE_BUILT=1
fi

# ---- containerd: a private instance (own socket, root and state), not the host's.

mkdir -p "$CLUSTER_DIR/containerd" "$CLUSTER_DIR/cni/net.d"
cat > "$CLUSTER_DIR/containerd.toml" <<EOF
version = 2
root = "$CLUSTER_DIR/containerd/root"
state = "$CTRD_STATE"
[grpc]
  address = "$SOCK"
[plugins."io.containerd.internal.v1.opt"]
  path = "$CLUSTER_DIR/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  # A test node: do not depend on the host's AppArmor setup.
  disable_apparmor = true
  # Root without CAP_SYS_RESOURCE (containers, gVisor) cannot give sandboxes the oom_score_adj
  # the kubelet asks for; unrestricted, every sandbox fails with "can't get final child's PID".
  restrict_oom_score_adj = true
  # Pod network namespaces under our state dir (.../io.containerd.grpc.v1.cri/netns), not /var/run/netns.
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$CNI_BIN"
    conf_dir = "$CLUSTER_DIR/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        # cgroupfs, like the kubelet: there may be no systemd.
        SystemdCgroup = false
        Root = "$CTRD_STATE/runc"
EOF

# Bridge CNI so the node reports NetworkReady, the kubelet and the API server reach pod IPs
# (probes, webhooks by Service), and pods reach the Service network through the bridge (only the
# kubernetes Service answers there; see the DNAT below). Nothing routes between pods and the
# outside. IPAM state stays in CLUSTER_DIR.
cat > "$CLUSTER_DIR/cni/net.d/10-fencedlock.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "fencedlock",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$CLUSTER_DIR/cni/ipam",
        "ranges": [[{"subnet": "$POD_SUBNET"}]],
        "routes": [{"dst": "$SERVICE_CIDR"}]
      }
    },
    {"type": "loopback"}
  ]
}
EOF

# The bridge plugin switches on net.ipv4.ip_forward (isGateway); keep the host's own value for
# cluster-down.sh to put back.
if [ ! -f "$CLUSTER_DIR/ip_forward.orig" ]; then
  cat /proc/sys/net/ipv4/ip_forward > "$CLUSTER_DIR/ip_forward.orig"
fi

# ---- the API server from pods. No kube-proxy: the kubernetes Service's ClusterIP, which in-cluster
# clients (KUBERNETES_SERVICE_HOST) dial, is DNATed to the API server on 127.0.0.1, for traffic
# arriving from the pod bridge only. route_localnet on that bridge (and nowhere else) lets the
# kernel route it to 127.0.0.1; the kubelet's KUBE-FIREWALL passes DNATed connections to 127/8.
# So the manager's Deployment runs as on any cluster, without hostNetwork. The bridge is made here
# (the CNI plugin adopts it) so the sysctl can be set before the first pod; cluster-down.sh
# removes the chain and the bridge.
if ! ip link show "$BRIDGE" > /dev/null 2>&1; then
  ip link add name "$BRIDGE" type bridge
fi
ip link set "$BRIDGE" up
echo 1 > "/proc/sys/net/ipv4/conf/$BRIDGE/route_localnet"
iptables -t nat -N FENCEDLOCK-APISERVER 2> /dev/null || true
iptables -t nat -F FENCEDLOCK-APISERVER
iptables -t nat -A FENCEDLOCK-APISERVER -d "$APISERVER_SVC_IP/32" -p tcp --dport 443 \
  -m comment --comment "fencedlock: kubernetes Service -> kube-apiserver on 127.0.0.1" \
  -j DNAT --to-destination "127.0.0.1:$API_PORT"
iptables -t nat -C PREROUTING -i "$BRIDGE" -j FENCEDLOCK-APISERVER 2> /dev/null ||
  iptables -t nat -A PREROUTING -i "$BRIDGE" -j FENCEDLOCK-APISERVER

ctr() { command ctr -a "$SOCK" -n k8s.io "$@"; }
start containerd containerd --config "$CLUSTER_DIR/containerd.toml"
wait_for "containerd" 30 containerd ctr version
# grep without -q reads all of ctr's output: an early exit would fail the pipe (pipefail).
if [ $PAUSE_BUILT = 1 ] || ! ctr images ls -q | grep -xF "$PAUSE_IMAGE" > /dev/null; then
  ctr images import "$PAUSE_TAR" > /dev/null
  log "imported $PAUSE_IMAGE"
fi

# ---- controller-manager and scheduler

kubeconfig "$CLUSTER_DIR/kube-controller-manager.kubeconfig" kube-controller-manager
kubeconfig "$CLUSTER_DIR/kube-scheduler.kubeconfig" kube-scheduler
kubeconfig "$CLUSTER_DIR/kubelet.kubeconfig" "kubelet-$NODE_NAME"

KCM_KC=$CLUSTER_DIR/kube-controller-manager.kubeconfig
start kube-controller-manager "$BIN/kube-controller-manager" \
  --kubeconfig="$KCM_KC" --authentication-kubeconfig="$KCM_KC" --authorization-kubeconfig="$KCM_KC" \
  --bind-address=127.0.0.1 --secure-port=10257 --leader-elect=false \
  --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
  --use-service-account-credentials=true \
  --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
  --service-cluster-ip-range="$SERVICE_CIDR"
SCHED_KC=$CLUSTER_DIR/kube-scheduler.kubeconfig
start kube-scheduler "$BIN/kube-scheduler" \
  --kubeconfig="$SCHED_KC" --authentication-kubeconfig="$SCHED_KC" --authorization-kubeconfig="$SCHED_KC" \
  --bind-address=127.0.0.1 --secure-port=10259 --leader-elect=false

# ---- kubelet

# cgroupfs and failCgroupV1=false: there may be no systemd and the host may be cgroup v1 (the
# kubelet refuses v1 by default since 1.35). Image GC is off: images cannot be pulled back.
# nodeStatusUpdateFrequency 2s: after a restart the kubelet skips its fast startup updates (the
# node object still says Ready) and would post Ready only on its next 10 s tick.
# crashLoopBackOff 1s: a crashed container (the manager, killed on purpose by the fault-injection
# tests) is restarted within a second instead of after up to 5 minutes of back-off.
cat > "$CLUSTER_DIR/kubelet-config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $PKI/kubelet-$NODE_NAME-serving.crt
tlsPrivateKeyFile: $PKI/kubelet-$NODE_NAME-serving.key
containerRuntimeEndpoint: unix://$SOCK
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
podLogsDir: $CLUSTER_DIR/pod-logs
volumePluginDir: $CLUSTER_DIR/kubelet-plugins
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
syncFrequency: 10s
nodeStatusUpdateFrequency: 2s
nodeStatusReportFrequency: 5m
crashLoopBackOff: {maxContainerRestartPeriod: 1s}
EOF
mkdir -p "$CLUSTER_DIR/kubelet-root" "$CLUSTER_DIR/pod-logs"
KUBELET_SINCE=
running kubelet || KUBELET_SINCE=$(date -u +%Y-%m-%dT%H:%M:%SZ)
start_kubelet() {
  start kubelet "$BIN/kubelet" --config="$CLUSTER_DIR/kubelet-config.yaml" \
    --kubeconfig="$CLUSTER_DIR/kubelet.kubeconfig" --root-dir="$CLUSTER_DIR/kubelet-root" \
    --hostname-override="$NODE_NAME" --v=1
}
start_kubelet
# containerd answers ctr before its CRI plugin has initialised; a kubelet started in between exits
# at once ("server is not initialized yet"). Start it again until the CRI is up (at most 30 s).
kubelet_deadline=$((SECONDS + 30))
until curl -sf http://127.0.0.1:10248/healthz > /dev/null 2>&1; do
  if ! running kubelet; then
    grep -q "server is not initialized yet" "$CLUSTER_DIR/logs/kubelet.log" && [ $SECONDS -lt $kubelet_deadline ] || break
    log "containerd's CRI is not initialised yet: starting the kubelet again"
    sleep 0.5
    start_kubelet
  fi
  [ $SECONDS -lt $kubelet_deadline ] || break # wait_for below reports a kubelet that never gets healthy
  sleep 0.2
done

# node_ready: Ready, posted by this kubelet (after a restart the node object still carries the
# old Ready=True for a moment), and without the not-ready/unreachable taints the controller-manager
# removes a few seconds later (until then new pods would stay Pending).
node_ready() {
  local s
  s=$(kubectl get node "$NODE_NAME" -o jsonpath='{range .status.conditions[?(@.type=="Ready")]}{.status} {.lastHeartbeatTime}{end} {.spec.taints[*].key}')
  [ "${s%% *}" = True ] || return 1
  s=${s#* }
  [[ ! ${s%% *} < $KUBELET_SINCE ]] || return 1
  case $s in *node.kubernetes.io/not-ready* | *node.kubernetes.io/unreachable*) return 1 ;; esac
}
wait_for "kubelet healthz" 90 kubelet curl -sf http://127.0.0.1:10248/healthz
wait_for "node $NODE_NAME Ready" 120 kubelet node_ready
wait_for "default ServiceAccount" 60 kube-controller-manager kubectl -n default get serviceaccount default
log "node $NODE_NAME Ready"
echo "export KUBECONFIG=$KUBECONFIG"

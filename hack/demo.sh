#!/usr/bin/env bash
# demo.sh -- `make demo`: builds what is missing, starts a local control plane (etcd +
# kube-apiserver on 127.0.0.1) with the fencedlock manager, and plays the paused-holder story with
# real processes. The control plane and manager keep running for exploration; `make demo-down`
# stops them. Re-running reuses everything that is already built or running.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
export CLUSTER_DIR=${CLUSTER_DIR:-/tmp/fencedlock-demo}
export API_PORT=${API_PORT:-16443} ETCD_PORT=${ETCD_PORT:-12379}
export MANAGER_DIR=$CLUSTER_DIR/manager
NS=fencedlock-demo
LEASE=3

ts() { date +%H:%M:%S.%3N; }
# A cold module cache prints hundreds of "go: downloading" lines; they say nothing to a newcomer.
quiet_go() { "$@" 2> >(grep --line-buffered -v '^go: downloading' >&2); }
say() { printf '\n\033[1m[%s] %s\033[0m\n' "$(ts)" "$*"; }
note() { printf '[%s] %s\n' "$(ts)" "$*"; }

say "fencedlock demo: a lock holder paused past its lease must not overwrite newer data"
note "building what is missing (the first run builds kube-apiserver and etcd from the Go module proxy: several minutes, once)"
# fencedlock's own binaries build beside Kubernetes': the long build leaves a core idle while it
# resolves modules and links.
quiet_go go build -o bin/ ./cmd/ledger-worker ./cmd/kubectl-fencedlock ./cmd/manager ./cmd/fenced-operator &
OWN=$!
BIN=$(quiet_go hack/k8s-binaries.sh etcd kube-apiserver kubectl)
wait $OWN
export PATH=$BIN:$ROOT/bin:$PATH

eval "$(hack/cluster-up.sh)"
note "control plane up: kube-apiserver on https://127.0.0.1:$API_PORT"
SKIP_BUILD=1 quiet_go hack/local-manager.sh start # bin/manager was built above
note "fencedlock manager running: controller + fence webhook (log: $MANAGER_DIR/manager.log)"

kubectl create namespace $NS --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl -n $NS apply -f - >/dev/null <<YAML
apiVersion: locks.fencedlock.io/v1alpha1
kind: FencedLock
metadata:
  name: ledger
spec:
  leaseDurationSeconds: $LEASE
YAML
kubectl -n $NS wait --for=condition=Ready flock/ledger --timeout=60s >/dev/null
say "FencedLock $NS/ledger (leaseDurationSeconds: $LEASE)"
kubectl -n $NS get flock ledger

worker() { # identity work-duration [extra args]; exec, so that `worker ... &` leaves $! = the worker
  local id=$1 work=$2; shift 2
  exec bin/ledger-worker --kubeconfig "$KUBECONFIG" --namespace $NS --lock ledger --configmap ledger \
    --identity "$id" --work "$work" --entry "balance=$RANDOM written by $id" "$@"
}

say "Act 1: two workers contend for the lock; each grant gets a higher token"
(worker worker-1 1s) &
P1=$!
sleep 0.3
(worker worker-2 0s) &
P2=$!
wait $P1 $P2

say "Act 2: worker A acquires the lock and starts a long piece of work"
(worker worker-a 6s > "$CLUSTER_DIR/worker-a.out" 2>&1) &
PA=$!
until grep -q "acquired lock" "$CLUSTER_DIR/worker-a.out" 2>/dev/null; do sleep 0.05; done
cat "$CLUSTER_DIR/worker-a.out"
kill -STOP $PA
note "worker A is frozen (SIGSTOP): a GC pause, a descheduled VM... its lease renewals stop with it"

say "The lease runs out; the controller revokes A's grant (judged on its own clock)"
until [ -z "$(kubectl -n $NS get lease ledger -o jsonpath='{.spec.holderIdentity}')" ]; do sleep 0.1; done
note "revoked: lease holder is empty, fencedlock.io/revoked-token=$(kubectl -n $NS get lease ledger -o jsonpath="{.metadata.annotations['fencedlock\.io/revoked-token']}")"
kubectl -n $NS get flock ledger

say "Worker B acquires the lock (a higher token) and writes the ledger"
(worker worker-b 0s)

say "Worker A wakes up (SIGCONT), still believing it holds the lock, and writes with its old token"
LINES=$(wc -l < "$CLUSTER_DIR/worker-a.out")
kill -CONT $PA
set +e
wait $PA
CODE=$?
set -e
tail -n +"$((LINES + 1))" "$CLUSTER_DIR/worker-a.out"
if [ $CODE = 3 ]; then
  note "worker A exited with status 3: the fence refused its write"
else
  note "UNEXPECTED: worker A exited with status $CODE; the fence should have refused its write" && exit 1
fi

say "The ledger keeps B's data:"
kubectl -n $NS get configmap ledger -o jsonpath='{"  recorded token: "}{.metadata.annotations.fencedlock\.io/recorded-token}{"\n  data: "}{.data}{"\n"}'

say "A writer that presents no token (kubectl patch, a read-modify-write) inherits nothing: refused"
set +e
kubectl -n $NS patch configmap ledger --type merge -p '{"data":{"balance":"777"}}' 2>&1 | sed 's/^/  /'
set -e

say "Act 3: a semaphore of two permits (config/samples/locks_v1alpha1_semaphore.yaml): three workers, two at a time"
kubectl -n $NS apply -f config/samples/locks_v1alpha1_semaphore.yaml >/dev/null
kubectl -n $NS wait --for=condition=Ready flock/reindex --timeout=60s >/dev/null
permit_worker() { # identity: holds a permit of "reindex" for 2s and writes the fenced ConfigMap "reindex"
  exec bin/ledger-worker --kubeconfig "$KUBECONFIG" --namespace $NS --lock reindex --configmap reindex \
    --identity "$1" --work 2s --entry "reindexed by $1"
}
(permit_worker reindexer-1 > "$CLUSTER_DIR/reindexer-1.out" 2>&1) &
R1=$!
(permit_worker reindexer-2 > "$CLUSTER_DIR/reindexer-2.out" 2>&1) &
R2=$!
until grep -q "acquired lock" "$CLUSTER_DIR/reindexer-1.out" 2>/dev/null &&
  grep -q "acquired lock" "$CLUSTER_DIR/reindexer-2.out" 2>/dev/null; do sleep 0.05; done
(permit_worker reindexer-3 > "$CLUSTER_DIR/reindexer-3.out" 2>&1) &
R3=$!
until grep -q "waiting" "$CLUSTER_DIR/reindexer-3.out" 2>/dev/null; do sleep 0.05; done
kubectl -n $NS get flock reindex
wait $R1 $R2 $R3
cat "$CLUSTER_DIR"/reindexer-*.out | sort | grep -E "acquired|waiting"
note "each permit's grant got its own token, above every token the semaphore issued before"

say "Act 4: fenced leadership (docs/leader.md): two replicas of a controller-runtime operator (cmd/fenced-operator)"
kubectl -n $NS apply -f - >/dev/null <<YAML
apiVersion: locks.fencedlock.io/v1alpha1
kind: FencedLock
metadata:
  name: fenced-operator
spec:
  leaseDurationSeconds: $LEASE
  fence:
    holderBinding: true
YAML
kubectl -n $NS wait --for=condition=Ready flock/fenced-operator --timeout=60s >/dev/null
replica() { # name: one replica; it reports each write as a JSON line
  exec bin/fenced-operator --kubeconfig "$KUBECONFIG" --namespace $NS --replica "$1" --interval 20ms
}
(replica a > "$CLUSTER_DIR/replica-a.out" 2>/dev/null) &
OA=$!
until grep -q '"event":"elected"' "$CLUSTER_DIR/replica-a.out" 2>/dev/null; do sleep 0.05; done
(replica b > "$CLUSTER_DIR/replica-b.out" 2>/dev/null) &
OB=$!
sleep 1
note "replica a leads and writes: a ConfigMap's update and patch, a Service's status, a create, a delete"
kill -STOP $OA
note "replica a is frozen (SIGSTOP) mid-work; replica b campaigns on the lock's queue"
until grep -q '"event":"elected"' "$CLUSTER_DIR/replica-b.out" 2>/dev/null; do sleep 0.1; done
note "replica b leads: $(kubectl -n $NS get flock fenced-operator -o jsonpath='holder {.status.holder}, token {.status.token}')"
LINES=$(wc -l < "$CLUSTER_DIR/replica-a.out")
kill -CONT $OA
note "replica a wakes up (SIGCONT), still leading in its own eyes, and writes with its old token:"
set +e
wait $OA
set -e
tail -n +"$((LINES + 1))" "$CLUSTER_DIR/replica-a.out" | grep '"op"' | head -5 | sed -E \
  -e 's/.*(stale fencing token [0-9]+ for lock [^:]*: the lock was re-acquired with token [0-9]+).*"op":"([a-z]*)".*/  \2: refused by the fence: \1/' \
  -e 's/.*"ok":true,"op":"([a-z]*)".*/  \1: ADMITTED/' \
  -e 's/.*"ok":false,"op":"([a-z]*)".*/  \1: refused in the process: it saw its term end/'
note "replica a's writes admitted after it woke: $(tail -n +"$((LINES + 1))" "$CLUSTER_DIR/replica-a.out" | grep -c '"ok":true' || true); it noticed the loss and stopped"
kill $OB 2>/dev/null || true
wait $OB 2>/dev/null || true

say "Events of the lock:"
kubectl -n $NS get events --field-selector involvedObject.kind=FencedLock --sort-by=.metadata.creationTimestamp \
  -o custom-columns=TYPE:.type,REASON:.reason,MESSAGE:.message

cat <<EOF

Done in ${SECONDS}s. The control plane and the manager keep running; explore with:
  export KUBECONFIG=$KUBECONFIG PATH=$BIN:$ROOT/bin:\$PATH
  kubectl -n $NS get flock                       # holder, token, renewed, waiting
  kubectl -n $NS describe flock ledger           # conditions and events
  kubectl -n $NS get flock reindex -o yaml       # a semaphore: status.holders, one token per permit
  kubectl -n $NS get lease ledger -o yaml        # the Lease behind the lock (token annotation)
  kubectl -n $NS get events
  kubectl fencedlock -n $NS get -o wide          # the kubectl plugin (bin/kubectl-fencedlock)
  kubectl fencedlock -n $NS run ledger -- sh -c 'echo my token is \$FENCING_TOKEN'
This plane has no scheduler and no kubelet: a pod or Job applied here (the README's quick start,
config/samples) is gated, queued and granted, but never runs. To run one, use the real single-node
cluster: hack/cluster-up.sh --node (root, containerd, runc, CNI plugins), as the end-to-end suite does.
Stop everything with: make demo-down
EOF

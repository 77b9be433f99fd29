#!/usr/bin/env bash
# local-manager.sh start|stop -- runs the fencedlock manager on this machine against the cluster of
# $KUBECONFIG, the way envtest does: CRDs applied, the webhook configurations registered by URL to
# 127.0.0.1 with a locally generated CA, the manager started in the background and waited for.
# Used by `make demo` and the end-to-end tests (hack/cluster-up.sh has no Service network).
#
# Env: KUBECONFIG (required), MANAGER_DIR (default /tmp/fencedlock-manager: certs, log, pid),
# WEBHOOK_PORT (9443), PROBE_PORT (8081), METRICS_PORT (8080), MANAGER_ARGS (extra flags),
# SKIP_BUILD=1 / SKIP_INSTALL=1 (restart only: reuse bin/manager and the installed manifests).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MANAGER_DIR=${MANAGER_DIR:-/tmp/fencedlock-manager}
WEBHOOK_PORT=${WEBHOOK_PORT:-9443}
PROBE_PORT=${PROBE_PORT:-8081}
METRICS_PORT=${METRICS_PORT:-8080}
: "${KUBECONFIG:?set KUBECONFIG to the admin kubeconfig of the cluster}"
BIN=$("$ROOT/hack/k8s-binaries.sh" kubectl)
kubectl() { "$BIN/kubectl" "$@"; }
log() { echo "[local-manager +${SECONDS}s] $*" >&2; }
PIDFILE=$MANAGER_DIR/manager.pid

stop() {
  [ -f "$PIDFILE" ] || return 0
  local pid; pid=$(cat "$PIDFILE")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    log "stopped manager ($pid)"
  fi
  rm -f "$PIDFILE"
}

certs() { # a CA and a serving certificate for 127.0.0.1, made once
  local d=$MANAGER_DIR/certs
  [ -f "$d/tls.crt" ] && return 0
  mkdir -p "$d"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$d/ca.key" -out "$d/ca.crt" -days 3650 \
    -subj "/CN=fencedlock-local-webhook-ca" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -keyout "$d/tls.key" -out "$d/tls.csr" -subj "/CN=127.0.0.1" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' > "$d/ext"
  openssl x509 -req -in "$d/tls.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -days 3650 \
    -extfile "$d/ext" -out "$d/tls.crt" 2>/dev/null
  rm -f "$d/tls.csr" "$d/ext"
}

start() {
  mkdir -p "$MANAGER_DIR"
  stop
  if [ "${SKIP_BUILD:-0}" != 1 ] || [ ! -x "$ROOT/bin/manager" ]; then
    log "building the manager"
    (cd "$ROOT" && go build -o bin/manager ./cmd/manager)
  fi
  certs
  if [ "${SKIP_INSTALL:-0}" != 1 ]; then
    log "installing CRDs, admission policies and webhook configurations"
    kubectl apply --server-side --force-conflicts -f "$ROOT/config/crd/bases" >/dev/null
    kubectl wait --for=condition=Established crd/fencedlocks.locks.fencedlock.io --timeout=60s >/dev/null
    kubectl apply --server-side --force-conflicts -k "$ROOT/config/local" >/dev/null
    (cd "$ROOT" && go run ./hack/tools/webhookconfig --url "https://127.0.0.1:$WEBHOOK_PORT" \
      --ca "$MANAGER_DIR/certs/ca.crt") | kubectl apply --server-side --force-conflicts -f - >/dev/null
  fi
  log "starting the manager (log: $MANAGER_DIR/manager.log)"
  # shellcheck disable=SC2086 # MANAGER_ARGS is a list of flags
  nohup "$ROOT/bin/manager" --kubeconfig "$KUBECONFIG" \
    --webhook-host 127.0.0.1 --webhook-port "$WEBHOOK_PORT" --webhook-cert-path "$MANAGER_DIR/certs" \
    --health-probe-bind-address "127.0.0.1:$PROBE_PORT" \
    --metrics-bind-address "127.0.0.1:$METRICS_PORT" --metrics-secure=false \
    ${MANAGER_ARGS:-} >> "$MANAGER_DIR/manager.log" 2>&1 &
  echo $! > "$PIDFILE"
  for _ in $(seq 1 300); do
    if curl -sf "http://127.0.0.1:$PROBE_PORT/readyz" >/dev/null; then
      log "manager ready (pid $(cat "$PIDFILE"))"
      return 0
    fi
    kill -0 "$(cat "$PIDFILE")" 2>/dev/null || { tail -20 "$MANAGER_DIR/manager.log" >&2; exit 1; }
    sleep 0.1
  done
  echo "manager did not become ready; see $MANAGER_DIR/manager.log" >&2
  exit 1
}

case ${1:-} in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac

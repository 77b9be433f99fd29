#!/usr/bin/env bash
# The client's whole part of the fencedlock protocol (docs/protocol.md) with kubectl and jq, as any
# user allowed get, list, watch, create and update on Leases (and writes on the fenced objects)
# in the namespace; no fencedlock permission. Run it to take lock $LOCK as $ME, write under it and
# release it; source it for its functions (test/integration runs both ways against a real API
# server: the example, its functions on contended locks, and every client case of
# pkg/lease/testdata/conformance.yaml).
#
#   NS: the namespace; LOCK: an existing, Ready FencedLock in it; ME: your holder identity.
#
# Exit statuses of the functions: 0 done; 1 an error (printed); 2 the grant is lost; 3 the lock is
# held or owed to the queue: join it; 4 ME holds a permit of the lock already; 5 the Lease was
# written by a newer protocol version than this script speaks.
set -euo pipefail
: "${NS:?namespace}" "${LOCK:?lock name}" "${ME:?holder identity}"

now() { date -u +%Y-%m-%dT%H:%M:%S.%6NZ; }   # MicroTime: exactly six fractional digits

PROTOCOL=2   # the protocol version this script speaks, written on every lock Lease write

# read_lease: the lock Lease as JSON, and the fields the protocol decides on (one jq: @sh quotes
# each value for eval). A ticket at or above the Lease's resourceVersion is forged: no handover
# wrote it, so it serves nobody (SERVED=0, FORGED=true) until the manager replaces it. Status 5:
# the Lease was written by a newer protocol version (annotation fencedlock.io/protocol; absent is
# 1), which this script could misread: it decides nothing from it.
read_lease() {
  LEASE=$(kubectl -n "$NS" get lease "$LOCK" -o json) || return 1
  eval "$(jq -r '(.metadata.annotations // {}) as $a
    | ($a["fencedlock.io/ticket"] // "0" | tonumber) as $s | (.metadata.resourceVersion | tonumber) as $rv | @sh "
    RV=\(.metadata.resourceVersion) HOLDER=\(.spec.holderIdentity // "")
    CURRENT=\($a["fencedlock.io/token"] // "") SERVED=\(if $s >= $rv then 0 else $s end)
    FORGED=\($s > 0 and $s >= $rv)
    RESERVED=\($a["fencedlock.io/reserved"] // "") WAITING=\($a["fencedlock.io/waiting"] // "")
    LIMIT=\($a["fencedlock.io/permits"] // "")
    HELD=\([$a | keys[] | select(startswith("fencedlock.io/permit-"))] | length)
    VERSION=\($a["fencedlock.io/protocol"] // "1")"' <<<"$LEASE")"
  [[ "$VERSION" =~ ^[1-9][0-9]{0,8}$ ]] ||
    { echo "lease $NS/$LOCK: annotation fencedlock.io/protocol: $VERSION is not a protocol version" >&2; return 1; }
  [ "$VERSION" -le "$PROTOCOL" ] || { echo "lease $NS/$LOCK was written by fencedlock protocol version $VERSION," \
    "newer than version $PROTOCOL that this script speaks: upgrade it before using the lock" >&2; return 5; }
}

# A semaphore's Lease (annotation fencedlock.io/permits: N, LIMIT above) has no holderIdentity:
# each held permit is annotation fencedlock.io/permit-<n>, "<token> <ticket> <acquireTime>
# <renewTime> <holder>". jq definitions, used below as "$P"'<filter>' on the lock Lease.
P='
def permits: (.metadata.annotations // {}) | to_entries
  | map(select(.key | startswith("fencedlock.io/permit-"))
        | (.value | capture("^(?<token>[^ ]+) (?<ticket>[^ ]+) (?<acquire>[^ ]+) (?<renew>[^ ]+) (?<holder>.+)$"; "s"))
          + {key: .key, n: (.key | ltrimstr("fencedlock.io/permit-") | tonumber)});
# free_number: the lowest permit number not held.
def free_number: [permits[].n] as $held | first(range(1; 1002) | select(. as $i | $held | any(. == $i) | not));
def permit($n; $tok; $ticket; $acquire; $renew; $holder):
  .metadata.annotations["fencedlock.io/permit-\($n)"] = "\($tok) \($ticket) \($acquire) \($renew) \($holder)";
'

# served_token: the token of our grant served from the queue with ticket TICKET ("" if none).
served_token() {
  if [ -z "$LIMIT" ]; then
    if [ "$HOLDER" = "$ME" ] && [ "$SERVED" = "$TICKET" ]; then echo "$CURRENT"; fi
  else
    jq -r --arg me "$ME" --arg t "$TICKET" "$P"'first(permits[] | select(.holder == $me and .ticket == $t) | .token) // ""' <<<"$LEASE"
  fi
}

# lock_uid: the uid of the lock Lease's controller owner, the FencedLock ("" if none: no queue).
lock_uid() {
  jq -r 'first(.metadata.ownerReferences[]? | select(.controller and .kind == "FencedLock") | .uid) // ""' <<<"$LEASE"
}

# waiter_name UID: our waiter Lease on the lock with that uid:
# fencedlock-wait-<uid>-<the first 16 hexadecimal digits of the SHA-256 of ME>.
waiter_name() { echo "fencedlock-wait-$1-$(printf %s "$ME" | sha256sum | cut -c1-16)"; }

# read_queue: the queue, read AFTER the lock Lease (the lock Lease write that follows is
# conditioned on the lock Lease read before it), in ONE list of the lock's Leases: its queue
# Lease (the manager's pods) and its waiter Leases (the clients) at one revision. Sets QUEUE, the
# waiters as a JSON array of {ticket, holder} in ticket order.
read_queue() {
  local uid all
  [ -n "${LEASE:-}" ] || read_lease || return
  QUEUE='[]'
  uid=$(lock_uid)
  [ -n "$uid" ] || return 0
  all=$(kubectl -n "$NS" get leases -l "fencedlock.io/lock-uid=$uid" -o json) || return 1
  QUEUE=$(jq -c "$Q"'queue(.items)' <<<"$all")
}

# The queue, read tolerantly: what does not follow the format is skipped. jq definitions, used
# below as "$Q"'<filter>'.
Q='
def ticket_ok: type == "number" and . >= 0 and . <= 9007199254740991 and . == floor;
def pod_ok: type == "object" and (.ticket | ticket_ok)
  and (.holder | type == "string" and startswith("pod/") and utf8bytelength <= 1024)
  and (.beat == null or (.beat | type == "number" and . >= 0 and . == floor))
  and (.since == null or (.since | type == "string" and (try fromdateiso8601 catch null) != null));
# pods($ql): the pods of the queue Lease; an entry of ticket 0 is at the resourceVersion of the Lease.
def pods($ql): ($ql.metadata.resourceVersion // "0" | tonumber) as $rv
  | ($ql.metadata.annotations["fencedlock.io/queue"] // "")
  | (if . == "" then {} else (try fromjson catch null) end) as $d
  | if ($d | type) == "object" and ($d.waiters | type) == "array" then
      reduce ($d.waiters[] | select(pod_ok) | {ticket: (if .ticket == 0 then $rv else .ticket end), holder})
        as $w ([]; if . == [] or $w.ticket > .[-1].ticket then . + [$w] else . end)
    else [] end;
# clients($wl): the waiter Leases that have a holder, each with its ticket: its
# fencedlock.io/ticket, else its resourceVersion.
def clients($wl): [$wl[]
  | {ticket: (.metadata.annotations["fencedlock.io/ticket"] // .metadata.resourceVersion), holder: (.spec.holderIdentity // "")}
  | select((.holder | length > 0 and utf8bytelength <= 1024 and (startswith("pod/") | not))
      and (.ticket | test("^[1-9][0-9]{0,15}$")))
  | .ticket |= tonumber | select(.ticket <= 9007199254740991)];
# queue($leases): the Leases of the lock as one list gives them: the pods of its queue Lease and
# the clients of its waiter Leases.
def role($r): map(select(.metadata.labels["fencedlock.io/role"] == $r
  and .metadata.labels["app.kubernetes.io/managed-by"] == "fencedlock"));
def queue($leases):
  pods(first(($leases | role("queue"))[]) // {}) + clients($leases | role("waiter")) | sort_by(.ticket);
# waiting($served): the waiters still waiting, in queue order; the first is the head.
def waiting($served): map(select(.ticket > $served));
'

# put: write the JSON object on stdin back. kubectl replace sends its resourceVersion, so the
# write is conditioned on it; managedFields [{}] drops the Lease's managed fields (section 3).
# Status 2: the object changed since it was read; read it again.
put() {
  local out
  out=$(jq '.metadata.managedFields = [{}]' | kubectl replace -f - 2>&1) && return 0
  grep -q 'the object has been modified' <<<"$out" && return 2
  echo "$out" >&2; return 1
}

# lock_put: put for the lock Lease, which every write stamps with the protocol version it speaks.
lock_put() { jq --arg v "$PROTOCOL" '.metadata.annotations["fencedlock.io/protocol"] = $v' | put; }

# grant: take the lock (a semaphore: its lowest free permit) if it is free and nobody is owed it;
# sets TOKEN. Status 3: the lock is held (every permit is) or owed to the queue: join the queue
# (join, then wait_turn) instead. Status 4: ME holds a permit already (one identity holds at most
# one): wait until it is released or revoked (acquire does), never queue for a second one.
grant() {
  local t
  while :; do
    read_lease || return
    [ -n "$CURRENT" ] || { echo "lock $LOCK is not ready yet (no token): retry in a moment" >&2; return 1; }
    [ -z "$HOLDER" ] || { echo "lock $LOCK is held by $HOLDER (token $CURRENT): join the queue" >&2; return 3; }
    [ -z "$LIMIT" ] || ! jq -e --arg me "$ME" "$P"'any(permits[]; .holder == $me)' <<<"$LEASE" >/dev/null ||
      { echo "$ME already holds a permit of $LOCK: one identity holds at most one; wait until it is released or revoked" >&2; return 4; }
    [ -z "$LIMIT" ] || [ "$HELD" -lt "$LIMIT" ] || { echo "all $LIMIT permits of lock $LOCK are held: join the queue" >&2; return 3; }
    [ -z "$RESERVED" ] || { echo "lock $LOCK is free but kept for the queued pod with ticket $RESERVED:" \
      "the manager grants it; join the queue" >&2; return 3; }
    [ "$WAITING" != true ] || { echo "lock $LOCK is free but waiters are queued: it goes to the head" \
      "of the queue; join the queue" >&2; return 3; }
    [ "$RV" -gt "$CURRENT" ] || { echo "refusing to issue token $RV <= $CURRENT" >&2; return 1; }
    t=$(now)
    jq --arg rv "$RV" --arg me "$ME" --arg t "$t" --arg limit "$LIMIT" "$P"'
        .metadata.annotations["fencedlock.io/token"] = $rv
        | if $limit == "" then .spec.holderIdentity = $me | .spec.acquireTime = $t | .spec.renewTime = $t
          else permit(free_number; $rv; 0; $t; $t; $me) end
        | .spec.leaseTransitions = ((.spec.leaseTransitions // 0) + 1)' <<<"$LEASE" | lock_put && { TOKEN=$RV; return 0; }
    [ $? = 2 ] || return 1
  done
}

# still_mine: are we still the holder (of a permit) with our token? Exit status 2 when the grant
# is lost.
still_mine() {
  if [ -z "$LIMIT" ]; then [ "$HOLDER" = "$ME" ] && [ "$CURRENT" = "$TOKEN" ] && return 0
  else jq -e --arg me "$ME" --arg tok "$TOKEN" "$P"'any(permits[]; .holder == $me and .token == $tok)' \
    <<<"$LEASE" >/dev/null && return 0; fi
  local revoked
  revoked=$(jq -r '.metadata.annotations["fencedlock.io/revoked-token"] // ""' <<<"$LEASE")
  echo "grant $TOKEN of $LOCK is lost (holder '$HOLDER', token $CURRENT, revoked-token '$revoked')" >&2
  return 2
}

# renew: a new renewTime (a permit's renewTime field), all else unchanged. Run at least every
# leaseDurationSeconds/3.
renew() {
  while :; do
    read_lease || return
    still_mine || return
    jq --arg t "$(now)" --arg me "$ME" --arg tok "$TOKEN" --arg limit "$LIMIT" "$P"'
        if $limit == "" then .spec.renewTime = $t
        else reduce (permits[] | select(.holder == $me and .token == $tok)) as $p (.;
          permit($p.n; $p.token; $p.ticket; $p.acquire; $t; $p.holder)) end' <<<"$LEASE" | lock_put && return 0
    [ $? = 2 ] || return 1
  done
}

# release: end our grant and serve the queue, in one write conditioned on the lock Lease read.
# Without fencedlock.io/waiting, just clear the holder (a semaphore: remove our permit; the token
# stays). With it, read the queue and, by its head (the first waiter above fencedlock.io/ticket): a
# client is granted the lock (the freed permit, as the lowest free number) in this very write
# (token = the resourceVersion read); a pod gets the free lock kept for it (fencedlock.io/reserved:
# only the manager grants pods), and so does our own identity queued again (a lock cannot change
# hands to the holder it has: the manager grants it); no head clears the waiting mark, and a
# handover keeps it (the next release reads the queue). A semaphore whose permits were lowered below the number still
# held serves nobody, nor does a release on a forged ticket (FORGED): the waiting mark stays, and
# the manager serves the head. Nor does a semaphore's release whose head already holds a permit
# (one identity holds at most one): the queue waits until that permit ends.
release() {
  local head
  while :; do
    read_lease || return
    still_mine || return
    head=null
    if [ "$WAITING" = true ]; then
      read_queue
      head=$(jq -c --argjson served "$SERVED" "$Q"'waiting($served)[0]' <<<"$QUEUE")
    fi
    jq --arg rv "$RV" --arg t "$(now)" --argjson head "$head" --arg forged "$FORGED" \
        --arg me "$ME" --arg tok "$TOKEN" --arg limit "$LIMIT" "$P"'
        if $limit == "" then .spec.holderIdentity = null
        else reduce (permits[] | select(.holder == $me and .token == $tok)) as $p (.;
          del(.metadata.annotations[$p.key])) end
        | del(.metadata.annotations["fencedlock.io/reserved"])
        | if $head == null then del(.metadata.annotations["fencedlock.io/waiting"])
          elif $forged == "true" or ($limit != "" and (permits | length) >= ($limit | tonumber))
              or ($limit != "" and any(permits[]; .holder == $head.holder)) then
            .metadata.annotations["fencedlock.io/waiting"] = "true"
          elif ($head.holder | startswith("pod/")) then
            .metadata.annotations["fencedlock.io/reserved"] = ($head.ticket | tostring)
            | .metadata.annotations["fencedlock.io/waiting"] = "true"
          elif $limit == "" and $head.holder == $me then
            .metadata.annotations["fencedlock.io/waiting"] = "true"
          elif ($rv | tonumber) <= (.metadata.annotations["fencedlock.io/token"] | tonumber) then
            error("refusing to issue token \($rv): not above the current token")
          else
            .metadata.annotations["fencedlock.io/token"] = $rv
            | if $limit == "" then .spec.holderIdentity = $head.holder | .spec.acquireTime = $t | .spec.renewTime = $t
              else permit(free_number; $rv; $head.ticket; $t; $t; $head.holder) end
            | .spec.leaseTransitions = ((.spec.leaseTransitions // 0) + 1)
            | .metadata.annotations["fencedlock.io/ticket"] = ($head.ticket | tostring)
            | .metadata.annotations["fencedlock.io/waiting"] = "true"
          end' <<<"$LEASE" | lock_put && return 0
    [ $? = 2 ] || return 1
  done
}

# mark_waiting: set fencedlock.io/waiting on the lock Lease, so that its holder's release reads
# the queue. Needs read_lease first.
mark_waiting() {
  while [ "$WAITING" != true ]; do
    jq '.metadata.annotations["fencedlock.io/waiting"] = "true"' <<<"$LEASE" | lock_put && return 0
    [ $? = 2 ] || return 1
    read_lease || return
  done
}

# join: queue for the lock (sets TICKET: the resourceVersion of our join write), then mark the
# lock waited for. Our waiter Lease is created, or, if it exists, updated with fencedlock.io/join
# changed, our holder, no fencedlock.io/ticket, and acquireTime (when we joined) and renewTime now.
join() {
  local uid name out
  read_lease || return
  uid=$(lock_uid)
  [ -n "$uid" ] || { echo "lock $LOCK has no FencedLock owner yet: retry in a moment" >&2; return 1; }
  name=$(waiter_name "$uid")
  while :; do
    if out=$(kubectl -n "$NS" get lease "$name" -o json 2>&1); then
      jq -e --arg uid "$uid" '.metadata.labels["app.kubernetes.io/managed-by"] == "fencedlock" and
          .metadata.labels["fencedlock.io/role"] == "waiter" and .metadata.labels["fencedlock.io/lock-uid"] == $uid' \
          <<<"$out" >/dev/null || { echo "lease $name is not labelled as our waiter Lease: delete it, then join again" >&2; return 1; }
      out=$(jq --arg me "$ME" --arg t "$(now)" '.metadata.managedFields = [{}]
          | .metadata.annotations["fencedlock.io/join"] =
              (((.metadata.annotations["fencedlock.io/join"] // "0") | tonumber? // 0) + 1 | tostring)
          | del(.metadata.annotations["fencedlock.io/ticket"])
          | .spec.holderIdentity = $me | .spec.acquireTime = $t | .spec.renewTime = $t' <<<"$out" |
          kubectl replace -o json -f - 2>&1) && break
      grep -q 'the object has been modified' <<<"$out" || { echo "$out" >&2; return 1; }
    elif grep -q NotFound <<<"$out"; then
      out=$(jq -n --arg name "$name" --arg uid "$uid" --arg me "$ME" --arg t "$(now)" --argjson lease "$LEASE" '
          {apiVersion: "coordination.k8s.io/v1", kind: "Lease",
           metadata: {name: $name, namespace: $lease.metadata.namespace, managedFields: [{}],
             labels: {"app.kubernetes.io/managed-by": "fencedlock", "fencedlock.io/lock-uid": $uid,
                      "fencedlock.io/role": "waiter"},
             annotations: {"fencedlock.io/join": "1"},
             ownerReferences: [$lease.metadata.ownerReferences[]
               | select(.controller and .kind == "FencedLock") | {apiVersion, kind, name, uid}]},
           spec: {holderIdentity: $me, acquireTime: $t, renewTime: $t,
                  leaseDurationSeconds: $lease.spec.leaseDurationSeconds}}' |
        kubectl create -o json -f - 2>&1) && break
      grep -q AlreadyExists <<<"$out" || { echo "$out" >&2; return 1; }
    else echo "$out" >&2; return 1; fi
  done
  TICKET=$(jq -r .metadata.resourceVersion <<<"$out")
  read_lease || return
  mark_waiting
}

# change_waiter FILTER: apply FILTER (with $now) to our waiter Lease, carrying our ticket, as
# every write that is not a join must. Status 3: it no longer shows us waiting with our ticket
# (the manager dropped us, or it was deleted): join again.
change_waiter() {
  local uid out
  [ -n "${LEASE:-}" ] || read_lease || return
  uid=$(lock_uid)
  while :; do
    out=$(kubectl -n "$NS" get lease "$(waiter_name "$uid")" -o json 2>&1) ||
      { grep -q NotFound <<<"$out" && return 3; echo "$out" >&2; return 1; }
    jq -e --arg me "$ME" --arg t "$TICKET" '(.spec.holderIdentity // "") == $me
        and (.metadata.annotations["fencedlock.io/ticket"] // .metadata.resourceVersion) == $t' <<<"$out" >/dev/null ||
      return 3
    jq --arg t "$TICKET" --arg now "$(now)" '.metadata.annotations["fencedlock.io/ticket"] = $t | '"$1" <<<"$out" | put &&
      return 0
    [ $? = 2 ] || return 1
  done
}

# beat: show the manager we are alive: a new renewTime on our waiter Lease. Run every
# leaseDurationSeconds/4.
beat() { change_waiter '.spec.renewTime = $now'; }

# wait_turn: after join, wait until a release (or the manager) grants us the lock; sets TOKEN.
# We are served when the Lease shows us as holder with our ticket; we never take the lock
# ourselves. If the lock served past our ticket without us, or our entry is gone, join again.
wait_turn() {
  local next_beat=0 ms dur
  while :; do
    read_lease || return
    TOKEN=$(served_token)
    if [ -n "$TOKEN" ]; then renew; return; fi   # served: renew at once (timed from our last beat)
    if [ "$SERVED" -ge "$TICKET" ]; then join; continue; fi
    mark_waiting
    ms=$(date +%s%3N)
    if [ "$ms" -ge "$next_beat" ]; then
      beat || { [ $? = 3 ] && join && continue; return 1; }
      dur=$(jq -r '.spec.leaseDurationSeconds // 1' <<<"$LEASE")
      next_beat=$((ms + dur * 250))
    fi
    sleep 0.2
  done
}

# leave: give up waiting. Clear our waiter Lease's holder, then write our ticket to
# fencedlock.io/left on the lock Lease (conditioned on the Lease read), so that a release computed
# from a queue read before we left fails its write instead of handing us the lock. If the lock was
# handed to us before we left, release it (which serves the next waiter).
leave() {
  change_waiter '.spec.holderIdentity = null' || [ $? = 3 ] || return 1
  while :; do
    read_lease || return
    TOKEN=$(served_token)
    if [ -n "$TOKEN" ]; then release; return; fi
    jq --arg t "$TICKET" '.metadata.annotations["fencedlock.io/left"] = $t' <<<"$LEASE" | lock_put && return 0
    [ $? = 2 ] || return 1
  done
}

# acquire: take the lock, waiting as long as it takes: grant it if it is free and nobody is owed it,
# else join the queue and wait to be served; while ME holds a permit already (status 4 of grant:
# another process under our identity, or a run that died), wait for it to end.
acquire() {
  local s
  while :; do
    grant && return 0
    s=$?
    case $s in
      3) join && wait_turn; return ;;
      4) sleep 1 ;;
      *) return $s ;;
    esac
  done
}

# ---- the example: take the lock (or queue for it), write under it, release it ----
example() {
acquire
echo "acquired $LOCK as $ME with token $TOKEN"
renew

# Fenced writes present the token on every write: create a fenced ConfigMap, then change it.
kubectl -n "$NS" create -f - <<EOF
apiVersion: v1
kind: ConfigMap
metadata:
  name: ledger
  labels: {fencedlock.io/fenced-by: "$LOCK"}
  annotations: {fencedlock.io/token: "$TOKEN"}
data: {balance: "100"}
EOF
kubectl -n "$NS" patch configmap ledger --type=merge \
  -p "{\"metadata\":{\"annotations\":{\"fencedlock.io/token\":\"$TOKEN\"}},\"data\":{\"balance\":\"42\"}}"

# A delete is judged by the stored object's recorded token: stamp it with ours first.
kubectl -n "$NS" create configmap scratch --from-literal=x=1 --dry-run=client -o json |
  jq --arg lock "$LOCK" --arg tok "$TOKEN" \
    '.metadata.labels["fencedlock.io/fenced-by"] = $lock | .metadata.annotations["fencedlock.io/token"] = $tok' |
  kubectl -n "$NS" create -f -
kubectl -n "$NS" annotate configmap scratch fencedlock.io/token="$TOKEN" --overwrite
kubectl -n "$NS" delete configmap scratch

release
echo "released $LOCK (token $TOKEN)"
}

# Run the example when executed; sourced, define the functions only.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then example; fi

/*
Copyright 2026 The fencedlock Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package webhook

import (
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
)

// carrying is user presenting tokens with the request (userInfo.extra fencedlock.io/token).
func carrying(user string, toks ...string) authenticationv1.UserInfo {
	return authenticationv1.UserInfo{Username: user,
		Extra: map[string]authenticationv1.ExtraValue{locksv1alpha1.TokenExtra: toks}}
}

func statusFenced(l Lock) Lock { l.Spec.StatusWrites = locksv1alpha1.StatusWritesFenced; return l }

// TestDecideRequestToken: a token carried by the request is judged by the same rules as one in
// the annotation, on the paths the annotation cannot reach: DELETE and subresources.
func TestDecideRequestToken(t *testing.T) {
	leader := "system:serviceaccount:ops:leader"
	cases := []decideCase{
		// object writes: the token-record policy recorded the request's token
		{name: "update with the current request token", op: update, old: obj("settlement", "33"),
			new: obj("settlement", "34"), lock: ready(34, "b"), user: carrying(leader, "34"), want: ReasonCurrent},
		{name: "update with a stale request token", op: update, old: obj("settlement", "33"),
			new: obj("settlement", "33"), lock: ready(34, "b"), user: carrying(leader, "33"), want: ReasonStaleToken},
		{name: "request token not recorded: an old policy", op: update, old: obj("settlement", "34"),
			new: obj("settlement", ""), lock: ready(34, "b"), user: carrying(leader, "34"), want: ReasonPolicyMissing,
			inMessage: "older than request tokens"},
		{name: "annotation and request present different tokens", op: update, old: obj("settlement", "34"),
			new: obj("settlement", "34"), lock: ready(34, "b"), user: carrying(leader, "33"), want: ReasonTokenMismatch},
		{name: "two request tokens", op: update, old: obj("settlement", "34"),
			new: obj("settlement", "34"), lock: ready(34, "b"), user: carrying(leader, "34", "34"), want: ReasonMalformedToken,
			inMessage: "present exactly one"},
		{name: "malformed request token", op: create, new: obj("settlement", "034"), lock: ready(34, "b"),
			user: carrying(leader, "034"), want: ReasonMalformedToken},
		// DELETE: judged by the request's token against the object's record, no stamp needed
		{name: "delete with the current request token, stale record", op: del, old: obj("settlement", "20"),
			lock: ready(34, "b"), user: carrying(leader, "34"), want: ReasonCurrent},
		{name: "delete with the current request token, no record", op: del, old: obj("settlement", ""),
			lock: ready(34, "b"), user: carrying(leader, "34"), want: ReasonCurrent},
		{name: "deposed leader deletes with its request token", op: del, old: obj("settlement", "34"),
			lock: ready(34, "b"), user: carrying(leader, "33"), nsTerm: new(false), want: ReasonStaleToken},
		{name: "deposed leader deletes what it wrote last", op: del, old: obj("settlement", "33"),
			lock: ready(34, "b"), user: carrying(leader, "33"), nsTerm: new(false), want: ReasonStaleToken},
		{name: "request token below the record", op: del, old: obj("settlement", "35"),
			lock: live(ready(34, "b")), user: carrying(leader, "34"), nsTerm: new(false), want: ReasonStaleObjectToken},
		// status: admitted without a token unless the lock opts in; judged whenever a token is presented
		{sub: "status", name: "status without a token, lock not opted in", op: update,
			old: obj("settlement", "34"), new: obj("settlement", "34"), lock: ready(34, "b"),
			user: authenticationv1.UserInfo{Username: "system:kube-controller-manager"}, want: ReasonStatusUnfenced},
		{sub: "status", name: "status without a token, lock missing", op: update,
			old: obj("settlement", "34"), new: obj("settlement", "34"), lock: Lock{Key: "default/settlement"},
			want: ReasonStatusUnfenced},
		{sub: "status", name: "status without a token, lock opted in", op: update,
			old: obj("settlement", "34"), new: obj("settlement", "34"), lock: statusFenced(ready(34, "b")),
			want: ReasonMissingToken, inMessage: "statusWrites: Fenced"},
		{sub: "status", name: "status with the current token", op: update,
			old: obj("settlement", "34"), new: obj("settlement", "34"), lock: statusFenced(ready(34, "b")),
			user: carrying(leader, "34"), want: ReasonCurrent},
		{sub: "status", name: "status with a stale token, lock not opted in", op: update,
			old: obj("settlement", "30"), new: obj("settlement", "30"), lock: ready(34, "b"),
			user: carrying(leader, "33"), want: ReasonStaleToken},
		{sub: "status", name: "status with a token, lock missing", op: update,
			old: obj("settlement", "30"), new: obj("settlement", "30"), lock: Lock{Key: "default/settlement"},
			user: carrying(leader, "33"), want: ReasonLockNotFound},
		// other subresources: a request token lets them through the fence
		{sub: "scale", name: "scale with the current token", op: update,
			old: obj("settlement", "30"), new: obj("settlement", "30"), lock: ready(34, "b"),
			user: carrying(leader, "34"), want: ReasonCurrent},
		{sub: "scale", name: "scale with a stale token", op: update,
			old: obj("settlement", "30"), new: obj("settlement", "30"), lock: ready(34, "b"),
			user: carrying(leader, "33"), want: ReasonStaleToken},
		// holder binding compares the username, which self-impersonation keeps
		{name: "bound: the holder's own request token", op: del, old: obj("settlement", "34"),
			lock: holderBound(ready(34, leader+"/pod-a")), user: carrying(leader, "34"), want: ReasonCurrent},
		{name: "bound: another principal presents the holder's token", op: del, old: obj("settlement", "34"),
			lock: holderBound(ready(34, leader+"/pod-a")), user: carrying("mallory", "34"), nsTerm: new(false), want: ReasonNotHolder},
	}
	for _, tc := range cases {
		t.Run(tc.name, tc.run)
	}
}

func holderBound(l Lock) Lock { l.Spec.HolderBinding = true; return l }

// TestTargetSubresourceWithoutRequestToken: a subresource write other than status that presents
// no token with the request is refused by its labels alone, as before request tokens.
func TestTargetSubresourceWithoutRequestToken(t *testing.T) {
	req := Request{Operation: update, Object: "deployments default/web", Subresource: "scale",
		Old: obj("settlement", "34"), New: obj("settlement", "34")}
	_, final := Target(req)
	if final == nil || final.Reason != ReasonSubresource {
		t.Fatalf("Target = %+v; want %s", final, ReasonSubresource)
	}
}

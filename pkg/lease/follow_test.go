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

package lease

import (
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
)

func TestFollowSelector(t *testing.T) {
	owned := func(kind string, labels map[string]string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l", Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{Kind: kind, Name: "l", UID: "u1", Controller: new(true)}}}}
	}
	label := map[string]string{locksv1alpha1.LockUIDLabel: "u1"}
	for name, tc := range map[string]struct {
		l    *coordinationv1.Lease
		want string
	}{
		"labelled with its controller's uid": {owned(locksv1alpha1.Kind, label), "fencedlock.io/lock-uid=u1"},
		"made before the label existed":      {owned(locksv1alpha1.Kind, nil), ""},
		"labelled with another uid":          {owned(locksv1alpha1.Kind, map[string]string{locksv1alpha1.LockUIDLabel: "u2"}), ""},
		"not a FencedLock's":                 {owned("Deployment", label), ""},
		"no controller":                      {&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Labels: label}}, ""},
	} {
		if got := FollowSelector(tc.l); got != tc.want {
			t.Errorf("%s: FollowSelector = %q, want %q", name, got, tc.want)
		}
	}
}

func TestCovers(t *testing.T) {
	for _, tc := range []struct {
		pos, rv string
		want    bool
	}{
		{"10", "9", true}, {"10", "10", true}, {"9", "10", false}, {"100", "99", true},
		{"", "1", false}, {"x", "1", false}, {"10", "", false},
	} {
		if got := Covers(tc.pos, tc.rv); got != tc.want {
			t.Errorf("Covers(%q, %q) = %v, want %v", tc.pos, tc.rv, got, tc.want)
		}
	}
}

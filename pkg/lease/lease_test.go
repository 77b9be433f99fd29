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
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/token"
)

var now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// mk builds a Lease at resourceVersion rv with the given holder and token annotation.
func mk(rv, holder, tok string) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lock", ResourceVersion: rv},
		Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To[int32](15)}}
	if holder != "" {
		l.Spec.HolderIdentity = new(holder)
	}
	if tok != "" {
		l.Annotations = map[string]string{locksv1alpha1.TokenAnnotation: tok}
	}
	return l
}

func TestInitialize(t *testing.T) {
	l := mk("100", "", "")
	changed, err := Initialize(l)
	if err != nil || !changed {
		t.Fatalf("Initialize = %v, %v", changed, err)
	}
	if got := l.Annotations[locksv1alpha1.TokenAnnotation]; got != "100" {
		t.Fatalf("token = %q, want the Lease's resourceVersion", got)
	}
	if changed, err := Initialize(mk("120", "", "100")); err != nil || changed {
		t.Fatalf("Initialize of a stamped lease = %v, %v; want no-op", changed, err)
	}
	if _, err := Initialize(mk("", "", "")); err == nil {
		t.Fatal("Initialize without resourceVersion must fail")
	}
}

func TestGrant(t *testing.T) {
	cases := []struct {
		name      string
		lease     *coordinationv1.Lease
		holder    string
		wantToken token.Token
		wantErr   func(error) bool
	}{
		{name: "free lock: token is the resourceVersion read", lease: mk("105", "", "100"), holder: "a", wantToken: 105},
		{name: "held lock", lease: mk("105", "b", "101"), holder: "a", wantErr: IsHeld},
		{name: "held by the same identity is still held", lease: mk("105", "a", "101"), holder: "a", wantErr: IsHeld},
		{name: "not initialized", lease: mk("105", "", ""), holder: "a",
			wantErr: func(err error) bool { return errors.Is(err, ErrNotInitialized) }},
		{name: "revision went backwards", lease: mk("90", "", "100"), holder: "a",
			wantErr: func(err error) bool { return err != nil }},
		{name: "equal revision", lease: mk("100", "", "100"), holder: "a",
			wantErr: func(err error) bool { return err != nil }},
		{name: "empty holder", lease: mk("105", "", "100"), holder: "",
			wantErr: func(err error) bool { return err != nil }},
		{name: "malformed token annotation", lease: mk("105", "", "1e3"), holder: "a",
			wantErr: func(err error) bool { return errors.Is(err, token.ErrMalformed) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := Grant(tc.lease, tc.holder, now)
			if tc.wantErr != nil {
				if !tc.wantErr(err) {
					t.Fatalf("Grant error = %v", err)
				}
				return
			}
			if err != nil || tok != tc.wantToken {
				t.Fatalf("Grant = %v, %v; want %v", tok, err, tc.wantToken)
			}
			st, err := Read(tc.lease)
			if err != nil {
				t.Fatal(err)
			}
			if st.Holder != tc.holder || st.Token != tok || st.Transitions != 1 || !st.AcquireTime.Time.Equal(now) {
				t.Fatalf("state after grant = %+v", st)
			}
		})
	}
}

func TestRenewReleaseRevoke(t *testing.T) {
	later := now.Add(5 * time.Second)
	type op func(l *coordinationv1.Lease, holder string, tok token.Token) error
	renew := func(l *coordinationv1.Lease, h string, tk token.Token) error { return Renew(l, h, tk, later) }
	release := func(l *coordinationv1.Lease, h string, tk token.Token) error {
		_, err := Release(l, h, tk, nil, later)
		return err
	}
	revoke := func(l *coordinationv1.Lease, h string, tk token.Token) error {
		_, err := Revoke(l, h, tk, true, nil, later)
		return err
	}
	ops := map[string]op{"renew": renew, "release": release, "revoke": revoke}
	for name, fn := range ops {
		t.Run(name+" by the holder", func(t *testing.T) {
			l := mk("110", "a", "105")
			if err := fn(l, "a", 105); err != nil {
				t.Fatal(err)
			}
			st, _ := Read(l)
			if st.Token != 105 {
				t.Fatalf("token changed to %v", st.Token)
			}
			switch name {
			case "renew":
				if st.Holder != "a" || !st.RenewTime.Time.Equal(later) {
					t.Fatalf("renew state %+v", st)
				}
			case "release":
				if st.Held() || st.RevokedToken != 0 {
					t.Fatalf("release state %+v", st)
				}
			case "revoke":
				if st.Held() || st.RevokedToken != 105 {
					t.Fatalf("revoke state %+v", st)
				}
			}
		})
		for _, bad := range []struct {
			desc   string
			lease  *coordinationv1.Lease
			holder string
			tok    token.Token
		}{
			{"wrong token", mk("110", "a", "105"), "a", 104},
			{"other holder", mk("110", "b", "107"), "a", 105},
			{"free lock", mk("110", "", "105"), "a", 105},
		} {
			t.Run(name+" "+bad.desc, func(t *testing.T) {
				before := bad.lease.DeepCopy()
				err := fn(bad.lease, bad.holder, bad.tok)
				if !IsLost(err) {
					t.Fatalf("err = %v; want LostError", err)
				}
				if bad.lease.Spec.HolderIdentity != nil && *bad.lease.Spec.HolderIdentity != *before.Spec.HolderIdentity {
					t.Fatal("a refused transition modified the lease")
				}
			})
		}
	}
}

func TestLostErrorSaysWhy(t *testing.T) {
	l := mk("110", "", "105")
	l.Annotations[locksv1alpha1.RevokedTokenAnnotation] = "105"
	err := Renew(l, "a", 105, now)
	var lost *LostError
	if !errors.As(err, &lost) || !lost.Revoked {
		t.Fatalf("err = %v; want revoked LostError", err)
	}
	err = Renew(mk("120", "b", "115"), "a", 105, now)
	if !errors.As(err, &lost) || lost.NowToken != 115 || lost.Revoked {
		t.Fatalf("err = %v; want superseded LostError", err)
	}
}

// A renewal is a change of spec.renewTime as stored (microseconds): the controller times expiry
// from when it sees that value change, so a renewal from a frozen or coarse clock, or one within
// the same microsecond, must still write a new value.
func TestRenewAlwaysChangesTheStoredRenewTime(t *testing.T) {
	stored := func(l *coordinationv1.Lease) *coordinationv1.Lease {
		b, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		out := &coordinationv1.Lease{}
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, at := range []time.Time{now, now.Add(300 * time.Nanosecond), now.Add(-time.Second)} {
		l := mk("110", "", "105")
		if _, err := Grant(l, "a", now); err != nil {
			t.Fatal(err)
		}
		l = stored(l)
		before := l.Spec.RenewTime.DeepCopy()
		if err := Renew(l, "a", 110, at); err != nil {
			t.Fatal(err)
		}
		if after := stored(l).Spec.RenewTime; after.Equal(before) {
			t.Errorf("renewal at %s left renewTime at %s: it renews nothing", at.Format(time.RFC3339Nano), after.Format(time.RFC3339Nano))
		}
	}
}

func TestOnlyRenewed(t *testing.T) {
	// held returns a Lease at rv held by "a" (a lock, or permit 1 of a semaphore of two).
	held := func(semaphore bool) *coordinationv1.Lease {
		l := mk("10", "", "10")
		l.UID = "u1"
		if semaphore {
			if _, err := SetPermits(l, 2); err != nil {
				t.Fatal(err)
			}
		}
		l.ResourceVersion = "11"
		if _, err := Grant(l, "a", now); err != nil {
			t.Fatal(err)
		}
		l.ResourceVersion = "12"
		return l
	}
	renewed := func(l *coordinationv1.Lease) *coordinationv1.Lease {
		n := l.DeepCopy()
		st, _ := Read(l)
		p, _ := st.HolderOf("a")
		if err := Renew(n, "a", p.Token, now.Add(5*time.Second)); err != nil {
			t.Fatal(err)
		}
		n.ResourceVersion = "13"
		return n
	}
	for _, semaphore := range []bool{false, true} {
		cases := []struct {
			name   string
			change func(l *coordinationv1.Lease) *coordinationv1.Lease
			want   bool
		}{
			{"a renewal", renewed, true},
			{"a renewal, and the managed fields changed", func(l *coordinationv1.Lease) *coordinationv1.Lease {
				n := renewed(l)
				n.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "x"}}
				return n
			}, true},
			{"nothing but the resourceVersion", func(l *coordinationv1.Lease) *coordinationv1.Lease {
				n := l.DeepCopy()
				n.ResourceVersion = "13"
				return n
			}, false},
			{"a renewal and the waiting mark", func(l *coordinationv1.Lease) *coordinationv1.Lease {
				n := renewed(l)
				n.Annotations[locksv1alpha1.WaitingAnnotation] = "true"
				return n
			}, false},
			{"a renewal and a new lease duration", func(l *coordinationv1.Lease) *coordinationv1.Lease {
				n := renewed(l)
				n.Spec.LeaseDurationSeconds = ptr.To[int32](30)
				return n
			}, false},
			{"a renewal and a label", func(l *coordinationv1.Lease) *coordinationv1.Lease {
				n := renewed(l)
				n.Labels = map[string]string{"x": "y"}
				return n
			}, false},
			{"released", func(l *coordinationv1.Lease) *coordinationv1.Lease {
				n := l.DeepCopy()
				st, _ := Read(l)
				p, _ := st.HolderOf("a")
				if _, err := Release(n, "a", p.Token, nil, now); err != nil {
					t.Fatal(err)
				}
				return n
			}, false},
			{"granted to another in between (the same renewTime)", func(l *coordinationv1.Lease) *coordinationv1.Lease {
				n := l.DeepCopy()
				if semaphore {
					if _, err := Grant(n, "b", now); err != nil {
						t.Fatal(err)
					}
					return n
				}
				n.Spec.HolderIdentity = new("b")
				n.Annotations[locksv1alpha1.TokenAnnotation] = "12"
				return n
			}, false},
			{"another Lease of the same name (recreated)", func(l *coordinationv1.Lease) *coordinationv1.Lease {
				n := renewed(l)
				n.UID = "u2"
				return n
			}, false},
		}
		for _, tc := range cases {
			old := held(semaphore)
			cur := tc.change(old.DeepCopy())
			st, got := OnlyRenewed(old, cur)
			if got != tc.want {
				t.Errorf("semaphore %v, %s: OnlyRenewed = %v, want %v", semaphore, tc.name, got, tc.want)
			}
			if want, _ := Read(cur); got && !equality.Semantic.DeepEqual(st, want) {
				t.Errorf("semaphore %v, %s: state %+v, want the new Lease's %+v", semaphore, tc.name, st, want)
			}
		}
	}
}

// writerFunc is a Writer made of a function.
type writerFunc func(context.Context, *coordinationv1.Lease) (*coordinationv1.Lease, error)

func (f writerFunc) Update(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	return f(ctx, l)
}

// TestCASResetsManagedFields: every write asks the API server to drop the Lease's managed fields,
// with the one-empty-entry value it reads as a reset (an empty list is dropped on the wire), and
// leaves the copy it was given alone.
func TestCASResetsManagedFields(t *testing.T) {
	cur := mk("12", "", "7")
	cur.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "someone", Operation: metav1.ManagedFieldsOperationApply}}
	var sent *coordinationv1.Lease
	_, err := CAS(context.Background(), writerFunc(func(_ context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
		sent = l
		return l, nil
	}), cur, func(next *coordinationv1.Lease) error { next.Spec.HolderIdentity = new("a"); return nil })
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(sent.ObjectMeta)
	if err != nil {
		t.Fatal(err)
	}
	var meta map[string]any
	if err := json.Unmarshal(raw, &meta); err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(meta["managedFields"]); string(got) != "[{}]" {
		t.Errorf("managedFields sent: %s, want [{}]", got)
	}
	if len(cur.ManagedFields) != 1 || cur.ManagedFields[0].Manager != "someone" {
		t.Errorf("CAS changed the copy it was given: %v", cur.ManagedFields)
	}
}

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

package lincheck

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// permits makes ops the ops of a semaphore of n permits on lockA.
func permits(n int, ops ...Op) []Op {
	out := make([]Op, len(ops))
	for i, op := range ops {
		op.Permits = n
		out[i] = op
	}
	return out
}

// TestSemaphore checks the semaphore model (N = 2 unless said) against hand-made histories.
func TestSemaphore(t *testing.T) {
	cases := []struct {
		name    string
		n       int
		history []Op
		ok      bool
		stuck   string // for a violation: the value or kind the stuck op shows
	}{
		{"two permits held at once write the same object in either order", 2, []Op{
			acquire(0, 10, OK, 0, 1), acquire(1, 12, OK, 2, 3),
			write(1, objX, 12, "b", OK, 4, 5),
			write(0, objX, 10, "a", OK, 6, 7), // below the record, and held: accepted
			read(2, objX, "a", 10, 8, 9),
		}, true, ""},
		{"a released permit writes an object no newer token wrote (a lagging view still shows it held)", 2, []Op{
			acquire(0, 10, OK, 0, 1), release(0, 10, 2, 3),
			acquire(1, 12, OK, 4, 5), write(1, objY, 12, "y", OK, 6, 7),
			write(0, objX, 10, "late", OK, 8, 9),
			read(2, objX, "late", 10, 10, 11),
		}, true, ""},
		{"a released permit writes after a newer token wrote the object", 2, []Op{
			acquire(0, 10, OK, 0, 1), release(0, 10, 2, 3),
			acquire(1, 12, OK, 4, 5), write(1, objX, 12, "new", OK, 6, 7),
			write(0, objX, 10, "stale", OK, 8, 9),
		}, false, "stale"},
		{"its release concurrent with the newer write: the write may come first", 2, []Op{
			acquire(0, 10, OK, 0, 1), acquire(1, 12, OK, 2, 3),
			release(0, 10, 4, 9),
			write(1, objX, 12, "new", OK, 5, 6),
			write(0, objX, 10, "old", OK, 7, 8), // released at 8.5, say
		}, true, ""},
		{"three grants with two permits: one of the first two ended, and its write is refused", 2, []Op{
			acquire(0, 10, OK, 0, 1), acquire(1, 12, OK, 2, 3), acquire(2, 14, OK, 4, 5),
			write(2, objX, 14, "c", OK, 6, 7),
			write(1, objX, 12, "b", OK, 8, 9),
			write(0, objX, 10, "a", OK, 10, 11),
		}, false, ""},
		{"the same with three permits: all three held", 3, []Op{
			acquire(0, 10, OK, 0, 1), acquire(1, 12, OK, 2, 3), acquire(2, 14, OK, 4, 5),
			write(2, objX, 14, "c", OK, 6, 7),
			write(1, objX, 12, "b", OK, 8, 9),
			write(0, objX, 10, "a", OK, 10, 11),
		}, true, ""},
		{"three grants with two permits: the revoked one is the one that wrote nothing more", 2, []Op{
			acquire(0, 10, OK, 0, 1), acquire(1, 12, OK, 2, 3), acquire(2, 14, OK, 4, 5),
			write(2, objX, 14, "c", OK, 6, 7),
			write(1, objX, 12, "b", OK, 8, 9), // 12 held (10 was revoked): accepted below the record
			read(3, objX, "b", 12, 10, 11),
		}, true, ""},
		{"tokens increase across permits", 2, []Op{
			acquire(0, 12, OK, 0, 1), acquire(1, 10, OK, 2, 3),
		}, false, ""},
		{"the same token granted to two permits", 2, []Op{
			acquire(0, 12, OK, 0, 1), acquire(1, 12, OK, 2, 3),
		}, false, ""},
		{"a token never issued, below the last one, accepted", 2, []Op{
			acquire(0, 10, OK, 0, 1), acquire(1, 12, OK, 2, 3),
			write(2, objX, 11, "forged", OK, 4, 5),
		}, false, "forged"},
		{"a token above the last one accepted", 2, []Op{
			acquire(0, 10, OK, 0, 1),
			write(2, objX, 11, "forged", OK, 4, 5),
		}, false, "forged"},
		{"a refused write has no effect", 2, []Op{
			acquire(0, 10, OK, 0, 1), release(0, 10, 2, 3), acquire(1, 12, OK, 4, 5),
			write(1, objX, 12, "new", OK, 6, 7),
			write(0, objX, 10, "stale", Denied, 8, 9),
			read(2, objX, "new", 12, 10, 11),
		}, true, ""},
		{"a stamp ends every permit", 2, []Op{
			acquire(0, 10, OK, 0, 1), stamp(9, 20, OK, 2, 3),
			acquire(1, 22, OK, 4, 5), write(1, objX, 22, "new", OK, 6, 7),
			write(0, objX, 10, "stale", OK, 8, 9),
		}, false, "stale"},
		{"an unknown write of a held permit takes effect late, lowering the record an ended permit then passes", 2, []Op{
			acquire(0, 10, OK, 0, 1), acquire(2, 11, OK, 2, 3), release(2, 11, 4, 5),
			acquire(1, 12, OK, 6, 7),
			write(0, objX, 10, "a", Unknown, 8, never),
			write(1, objX, 12, "b", OK, 9, 10),
			write(2, objX, 11, "c", OK, 12, 13), // legal only if a's write landed between 10 and 12
		}, true, ""},
		{"an unknown grant that may have happened", 2, []Op{
			acquire(0, 10, OK, 0, 1), acquire(1, 12, Unknown, 2, never),
			write(1, objX, 12, "b", OK, 4, 5),
		}, true, ""},
		{"a read must see the last accepted write of either permit", 2, []Op{
			acquire(0, 10, OK, 0, 1), acquire(1, 12, OK, 2, 3),
			write(0, objX, 10, "a", OK, 4, 5),
			write(1, objX, 12, "b", OK, 6, 7),
			read(2, objX, "a", 10, 8, 9),
		}, false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := permits(tc.n, tc.history...)
			res, err := Check(h, 10*time.Second)
			if res.Linearizable != tc.ok || (err == nil) != tc.ok {
				t.Fatalf("Linearizable = %v, err = %v; want linearizable %v", res.Linearizable, err, tc.ok)
			}
			if tc.ok {
				return
			}
			if !errors.Is(err, ErrNotLinearizable) || len(res.Violations) != 1 {
				t.Fatalf("err = %v, Violations = %+v; want one violation wrapping ErrNotLinearizable", err, res.Violations)
			}
			if tc.stuck != "" && !strings.Contains(err.Error(), "v="+tc.stuck+")") {
				t.Errorf("error %q does not name the write of %q", err, tc.stuck)
			}
			t.Logf("%v", err)
		})
	}
}

// TestSemaphoreAsLockIsStricter: the same history, checked as a lock, is refused where the
// semaphore admits it: holders of two permits write concurrently only on a semaphore.
func TestSemaphoreAsLockIsStricter(t *testing.T) {
	h := []Op{
		acquire(0, 10, OK, 0, 1), acquire(1, 12, OK, 2, 3),
		write(1, objX, 12, "b", OK, 4, 5), write(0, objX, 10, "a", OK, 6, 7),
	}
	if _, err := Check(permits(2, h...), time.Second); err != nil {
		t.Fatalf("as a semaphore of 2: %v", err)
	}
	if _, err := Check(h, time.Second); !errors.Is(err, ErrNotLinearizable) {
		t.Fatalf("as a lock: err = %v, want a violation", err)
	}
}

func TestSemaphoreStateDescribed(t *testing.T) {
	h := permits(2, acquire(0, 10, OK, 0, 1), acquire(1, 12, OK, 2, 3), release(0, 10, 4, 5),
		write(1, objX, 12, "b", OK, 6, 7), write(0, objX, 10, "stale", OK, 8, 9))
	_, err := Check(h, time.Second)
	if err == nil || !strings.Contains(err.Error(), "held=[12] ended=[10]") {
		t.Fatalf("err = %v, want the state with held=[12] ended=[10]", err)
	}
}

func TestSemaphoreInconsistentPermits(t *testing.T) {
	h := []Op{acquire(0, 10, OK, 0, 1), acquire(1, 12, OK, 2, 3)}
	h[1].Permits = 2
	if _, err := Check(h, time.Second); err == nil || errors.Is(err, ErrNotLinearizable) {
		t.Fatalf("err = %v, want an invalid-history error", err)
	}
}

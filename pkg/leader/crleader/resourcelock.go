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

package crleader

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/fencedlock/fencedlock/pkg/leader"
)

// errFollowing answers controller-runtime's election when it tries to lead without a term.
var errFollowing = errors.New("fenced leadership: no term of the lock yet")

// resourceLock is controller-runtime's resource lock, answered from the elector's state: its
// election leads exactly while the elector holds a term, and never writes anything itself. The
// record it reads while following names the observed leader, renewed on every read, so the
// election waits for the elector instead of trying to take over.
type resourceLock struct {
	el   *leader.Elector
	lock string

	mu       sync.Mutex
	observed string
}

var _ resourcelock.Interface = (*resourceLock)(nil)

func newResourceLock(el *leader.Elector, lock string) *resourceLock {
	return &resourceLock{el: el, lock: lock}
}

// observe keeps the observed leader for the records, until ctx ends.
func (r *resourceLock) observe(ctx context.Context) {
	for l := range r.el.Observe(ctx) {
		r.mu.Lock()
		r.observed = l.Identity
		r.mu.Unlock()
	}
}

func (r *resourceLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	now := metav1.NewTime(time.Now())
	rec := resourcelock.LeaderElectionRecord{LeaseDurationSeconds: int(leaseDuration / time.Second), RenewTime: now,
		AcquireTime: now}
	if !r.el.Token().IsZero() {
		rec.HolderIdentity = r.el.Identity()
	} else {
		r.mu.Lock()
		rec.HolderIdentity = r.observed
		r.mu.Unlock()
		if rec.HolderIdentity == "" || rec.HolderIdentity == r.el.Identity() {
			rec.HolderIdentity = "(campaigning: " + r.lock + ")"
		}
	}
	raw, err := json.Marshal(rec)
	return &rec, raw, err
}

// Create is never needed: Get always finds a record.
func (r *resourceLock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	return r.Update(ctx, rec)
}

// Update succeeds while the elector leads; a record without a holder (the release when the
// manager stops) resigns.
func (r *resourceLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	if rec.HolderIdentity == "" {
		return r.el.Resign(ctx)
	}
	if r.el.Token().IsZero() {
		return errFollowing
	}
	return nil
}

func (r *resourceLock) RecordEvent(string) {}

func (r *resourceLock) Identity() string { return r.el.Identity() }

func (r *resourceLock) Describe() string { return "FencedLock " + r.lock }

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

package lock

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
)

// retryBackoff paces Acquire's retries: quick at first, since an API server restart usually
// takes well under a second, then one attempt every 1 to 1.5 s.
func retryBackoff() wait.Backoff {
	return wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.5, Steps: 5, Cap: time.Second}
}

// conflictPause is how long a grant's write waits after its n-th conflict in a row before it
// reads the Lease again: a random time below 2 ms << n, at most 32 ms. The holders of a
// semaphore's permits write one Lease; retried at once, the writers that lost to one write meet
// again at the next (make bench, semaphores: conflicts per grant about 1.7 before, 0.8 after).
func conflictPause(n int) time.Duration {
	return time.Duration(rand.Int64N(int64(2 * time.Millisecond << min(n, 4))))
}

// retryable reports whether err is a transient failure of the API server or the network that a
// later attempt may not meet.
func retryable(err error) bool {
	if err == nil || notFree(err) || errors.Is(err, ErrLost) || errors.Is(err, ErrNotInitialized) {
		return false
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		_, delay := apierrors.SuggestsClientDelay(err)
		return delay || apierrors.IsServiceUnavailable(err) || apierrors.IsTooManyRequests(err) ||
			apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsInternalError(err) ||
			status.Status().Code >= 500
	}
	// Below the API: the transport's errors. TLS and authentication failures are not among them.
	if _, ok := errors.AsType[*net.OpError](err); ok {
		return true // dial and I/O failures: connection refused, reset, no route to host
	}
	if _, ok := errors.AsType[*net.DNSError](err); ok {
		return true
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, context.DeadlineExceeded) ||
		utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		utilnet.IsHTTP2ConnectionLost(err) || utilnet.IsTimeout(err)
}

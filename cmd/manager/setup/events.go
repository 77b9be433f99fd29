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

package setup

import (
	"net/http"
	"strings"

	"k8s.io/client-go/transport"
)

// eventsInFlight bounds the manager's Event requests in flight at once.
//
// client-go's events broadcaster, the one controller-runtime's recorders use, sends every Event
// from a goroutine of its own, at once. A burst (a thousand pods queued together, each told it
// waits) was a thousand concurrent requests: beyond the 250 streams an API server allows on one
// HTTP/2 connection, the client opens more, each a TLS handshake on both ends, and the Events
// compete with the grants for the API server (docs/benchmarks.md, the drain). A few at a time is
// what client-go's older recorder, which sends from one goroutine, did. An Event waits for a
// slot as long as its request's context allows; the broadcaster already drops Events when more
// than a thousand are queued.
const eventsInFlight = 4

// boundEvents wraps rt so that at most n Event requests (events.k8s.io, or the core API's
// events) are in flight; every other request passes as it is.
func boundEvents(n int) transport.WrapperFunc {
	slots := make(chan struct{}, n)
	return func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if !isEventRequest(req.URL.Path) {
				return rt.RoundTrip(req)
			}
			select {
			case slots <- struct{}{}:
			case <-req.Context().Done():
				return nil, req.Context().Err()
			}
			defer func() { <-slots }()
			return rt.RoundTrip(req)
		})
	}
}

// isEventRequest reports whether path is an Event's: .../apis/events.k8s.io/... or
// .../api/v1/namespaces/<ns>/events[/<name>] (after any prefix of the API server's URL).
func isEventRequest(path string) bool {
	if strings.Contains(path, "/apis/events.k8s.io/") {
		return true
	}
	_, rest, ok := strings.Cut(path, "/api/v1/namespaces/")
	if !ok {
		return false
	}
	_, res, _ := strings.Cut(rest, "/")
	return res == "events" || strings.HasPrefix(res, "events/")
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

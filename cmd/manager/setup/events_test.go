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
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
)

// eventServer answers Event creates once another request has arrived (or after 5 s), then after a
// pause, counting how many are in flight at once: the Events are still in flight when that other
// request comes, however fast the machine, unless the client holds it back behind them.
type eventServer struct {
	mu                sync.Mutex
	inFlight, most, n int
	otherDuringEvents bool
	other             chan struct{}
	otherOnce         sync.Once
}

func newEventServer() *eventServer { return &eventServer{other: make(chan struct{})} }

func (s *eventServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !isEventRequest(r.URL.Path) {
		s.mu.Lock()
		s.otherDuringEvents = s.otherDuringEvents || s.inFlight > 0
		s.mu.Unlock()
		s.otherOnce.Do(func() { close(s.other) })
		http.NotFound(w, r)
		return
	}
	s.mu.Lock()
	s.inFlight++
	s.most = max(s.most, s.inFlight)
	s.mu.Unlock()
	select {
	case <-s.other:
	case <-time.After(5 * time.Second): // held back behind the Events: the test fails on it
	}
	time.Sleep(20 * time.Millisecond)
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.inFlight--
	s.n++
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(body)
}

// A burst of Events through the manager's client config is sent a few at a time, all of them,
// while its other requests are not held back.
func TestManagerSendsEventsAFewAtATime(t *testing.T) {
	srv := newEventServer()
	ts := httptest.NewServer(srv)
	defer ts.Close()
	cfg := clientConfig(&rest.Config{Host: ts.URL, QPS: -1, ContentConfig: rest.ContentConfig{ContentType: "application/json"}})
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	defer b.Shutdown()
	if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	rec := b.NewRecorder(Scheme(), "fencedlock-test")
	const burst = 40
	for i := range burst {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("p%d", i)}}
		rec.Eventf(pod, nil, corev1.EventTypeNormal, "Waiting", "Queue", "pod %d waits", i)
	}
	// Another request of the manager's, sent while the Events queue for their slots.
	for start := time.Now(); ; time.Sleep(time.Millisecond) {
		srv.mu.Lock()
		sending := srv.inFlight > 0
		srv.mu.Unlock()
		if sending || time.Since(start) > 5*time.Second {
			break
		}
	}
	if _, err := cs.CoreV1().Pods("ns").Get(ctx, "p0", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a pod read beside the Events: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		srv.mu.Lock()
		n, most, other := srv.n, srv.most, srv.otherDuringEvents
		srv.mu.Unlock()
		if n == burst {
			if most > eventsInFlight || most < 2 {
				t.Fatalf("at most %d Events were in flight at once; want 2 to %d", most, eventsInFlight)
			}
			if !other {
				t.Fatal("the pod read was held back until the Events were sent")
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d Events arrived", n, burst)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestIsEventRequest(t *testing.T) {
	for path, want := range map[string]bool{
		"/apis/events.k8s.io/v1/namespaces/ns/events":             true,
		"/apis/events.k8s.io/v1/namespaces/ns/events/e1":          true,
		"/api/v1/namespaces/ns/events":                            true,
		"/api/v1/namespaces/ns/events/e1":                         true,
		"/prefix/api/v1/namespaces/ns/events":                     true,
		"/api/v1/namespaces/events/pods/p":                        false, // a namespace named events
		"/api/v1/namespaces/ns/pods/events":                       false, // a pod named events
		"/apis/coordination.k8s.io/v1/namespaces/ns/leases/l":     false,
		"/apis/locks.fencedlock.io/v1alpha1/namespaces/ns/events": false,
	} {
		if got := isEventRequest(path); got != want {
			t.Errorf("isEventRequest(%q) = %v, want %v", path, got, want)
		}
	}
}

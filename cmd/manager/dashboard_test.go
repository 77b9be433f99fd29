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

package main

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

const dashboardFile = "../../config/grafana/fencedlock-dashboard.json"

// metricName finds the metric names of a PromQL expression: those of this project and of
// controller-runtime (the manager's registry holds both).
var metricName = regexp.MustCompile(`\b(?:fencedlock|controller_runtime|workqueue)_[a-z0-9_]+`)

type dashboard struct {
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// registered reports whether the manager's registry (controller-runtime's, which the controllers
// and webhook packages register into when imported, as this binary does) has a metric of that
// name: registering a probe of the same name fails exactly when it has one, labelled or not, even
// before any series of it exists.
func registered(name string) bool {
	for _, suffix := range []string{"_bucket", "_count", "_sum"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && registered(base) {
			return true
		}
	}
	probe := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: "probe"})
	if err := ctrlmetrics.Registry.Register(probe); err != nil {
		return true
	}
	ctrlmetrics.Registry.Unregister(probe)
	return false
}

func TestDashboardUsesOnlyRegisteredMetrics(t *testing.T) {
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var used []string
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			names := metricName.FindAllString(tg.Expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q: no metric in %q", p.Title, tg.Expr)
			}
			for _, n := range names {
				if !registered(n) {
					t.Errorf("panel %q uses %s, which the manager does not export", p.Title, n)
				}
				used = append(used, n)
			}
		}
	}
	// What the dashboard is for: holders, waits, handovers, denials by reason.
	for _, n := range []string{"fencedlock_grants_total", "fencedlock_locks_held", "fencedlock_waiting_pods", "fencedlock_wait_seconds_bucket",
		"fencedlock_fence_decisions_total", "fencedlock_revocations_total"} {
		if !slices.Contains(used, n) {
			t.Errorf("no panel uses %s", n)
		}
	}
	if !strings.Contains(string(raw), `decision=\"denied\"`) || !strings.Contains(string(raw), "sum by (reason)") {
		t.Error("no panel shows the fence's denials by reason")
	}
}

// The probe itself: a name nobody registered is not found, and a labelled metric that has no
// series yet is.
func TestRegisteredProbe(t *testing.T) {
	if registered("fencedlock_no_such_metric_total") {
		t.Error("a metric nobody registered was found")
	}
	if !registered("fencedlock_fence_decisions_total") || !registered("fencedlock_wait_seconds_count") {
		t.Error("the fence's and the controller's metrics were not found")
	}
}

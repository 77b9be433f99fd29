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

package leader

import (
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"
)

func TestNewValidates(t *testing.T) {
	leases := fake.NewClientset().CoordinationV1()
	ok := Config{Leases: leases, Namespace: "ops", Name: "op", Identity: "a"}
	for name, tc := range map[string]struct {
		mutate func(*Config)
		want   string
	}{
		"no leases":         {func(c *Config) { c.Leases = nil }, "Config.Leases is nil"},
		"no name":           {func(c *Config) { c.Name = "" }, "must not be empty"},
		"no identity":       {func(c *Config) { c.Identity = "" }, "each replica needs its own"},
		"pod identity":      {func(c *Config) { c.Identity = "pod/x/y" }, "reserved for pods"},
		"negative interval": {func(c *Config) { c.RenewInterval = -1 }, "is negative"},
	} {
		c := ok
		tc.mutate(&c)
		if _, err := New(c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New = %v, want an error containing %q", name, err, tc.want)
		}
	}
	e, err := New(ok)
	if err != nil {
		t.Fatal(err)
	}
	if !e.Token().IsZero() {
		t.Fatalf("a new Elector leads with token %s", e.Token())
	}
}

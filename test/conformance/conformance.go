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

// Package conformance reads the protocol's conformance table (pkg/lease/testdata/conformance.yaml),
// which three runners share: the pure transitions (pkg/lease), the API server's policies and the
// shell example of docs/protocol.md (test/integration).
package conformance

import (
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

// State is a lock Lease as a case gives it.
type State struct {
	ResourceVersion string            `json:"resourceVersion"`
	Holder          string            `json:"holder"`
	Token           string            `json:"token"`
	Annotations     map[string]string `json:"annotations"`
}

// Outcome is the state a write leaves, or the write itself.
type Outcome struct {
	Holder          string            `json:"holder"`
	Token           string            `json:"token"`
	Granted         bool              `json:"granted"`
	Renewed         bool              `json:"renewed"`
	Annotations     map[string]string `json:"annotations"`
	QueueRead       *bool             `json:"queueRead"`
	Queue           *string           `json:"queue"`
	QueueUnreadable *string           `json:"queueUnreadable"`
	Ticket          uint64            `json:"ticket"`
}

// Case is one conformance case (the table's header describes the fields).
type Case struct {
	Name       string  `json:"name"`
	Before     State   `json:"before"`
	Queue      *string `json:"queue"`
	Actor      string  `json:"actor"`
	Transition string  `json:"transition"`
	Args       struct {
		Token   string   `json:"token"`
		Ticket  uint64   `json:"ticket"`
		Revoked bool     `json:"revoked"`
		Gone    []string `json:"gone"`
	} `json:"args"`
	Write  *Outcome `json:"write"`
	Expect struct {
		Admitted *Outcome `json:"admitted"`
		Refused  *struct {
			Error   string `json:"error"`
			Message string `json:"message"`
			Policy  string `json:"policy"`
		} `json:"refused"`
	} `json:"expect"`
}

// Load reads the table at path, refusing fields it does not know.
func Load(path string) ([]Case, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var table struct {
		Cases []Case `json:"cases"`
	}
	if err := yaml.UnmarshalStrict(b, &table); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return table.Cases, nil
}

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

package controllers

import (
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestPodReplaced(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	invalid := func(path ...string) error {
		return apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "worker-0",
			field.ErrorList{field.Invalid(field.NewPath(path[0], path[1:]...), "x", "field is immutable")})
	}
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"uid immutable", invalid("metadata", "uid"), true},
		{"uid precondition", apierrors.NewConflict(pods, "worker-0", errors.New("Precondition failed: UID")), true},
		{"another field invalid", invalid("metadata", "annotations"), false},
		{"not found", apierrors.NewNotFound(pods, "worker-0"), false},
		{"other", errors.New("connection refused"), false},
	}
	for _, tc := range cases {
		if got := podReplaced(tc.err); got != tc.want {
			t.Errorf("%s: podReplaced(%v) = %v; want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

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

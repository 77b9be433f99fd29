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

package policyeval

import (
	"context"
	"errors"
	"regexp"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/policy/generic"
	"k8s.io/apiserver/pkg/admission/plugin/policy/matching"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// Policies are the compiled ValidatingAdmissionPolicies of a directory. Admit is safe for
// concurrent use.
type Policies struct {
	hooks []hook
}

// Names are the names of the policies, in the order Admit meets them.
func (p *Policies) Names() []string {
	out := make([]string, len(p.hooks))
	for i, h := range p.hooks {
		out[i] = h.Policy.Name
	}
	return out
}

// Refusal is the API server's answer to a write: the zero value admits it. Policy is the name of
// the policy that refused it (as its file names it), Reason the refusal's status reason (the
// validation's reason; Invalid for an evaluation error), Message the validation's message, its
// messageExpression evaluated when that gives one, or the evaluation error. A request the
// evaluator cannot build or dispatch is refused with Policy "" and the error as Message.
type Refusal struct {
	Policy  string
	Reason  metav1.StatusReason
	Message string
}

// Admitted reports whether the write is admitted.
func (r Refusal) Admitted() bool { return r == Refusal{} }

// String is the refusal as the API server's error gives it, "" when admitted.
func (r Refusal) String() string {
	if r.Admitted() {
		return ""
	}
	return "ValidatingAdmissionPolicy '" + r.Policy + "' with binding '" + r.Policy + "' denied request: " + r.Message
}

var (
	objects = admission.NewObjectInterfacesFromScheme(clientgoscheme.Scheme)
	// matcher is the API server's: selectors of the old or the new object, rules, matchPolicy.
	matcher = generic.NewPolicyMatcher(matching.NewMatcher(namespaces{}, nil))
	// denied is the dispatcher's message for a policy's refusal.
	denied = regexp.MustCompile(`^ValidatingAdmissionPolicy '([^']*)' (?:with binding '[^']*' )?denied request: ((?s).*)$`)
)

// Admit evaluates the write as the API server's ValidatingAdmissionPolicy plugin does: every
// policy whose matchConstraints and matchConditions match it, every validation of each, and
// returns the first refusal (of the first refusing policy by name: the API server's order is
// arbitrary).
func (p *Policies) Admit(req Request) Refusal {
	attrs, err := req.attributes()
	if err != nil {
		return Refusal{Reason: metav1.StatusReasonBadRequest, Message: err.Error()}
	}
	d := validating.NewDispatcher(authz{manager: req.Manager}, matcher)
	return refusal(d.Dispatch(context.Background(), attrs, objects, p.hooks))
}

// refusal reads the dispatcher's error: a policy's refusal, or an error of its own (Policy "").
func refusal(err error) Refusal {
	if err == nil {
		return Refusal{}
	}
	var se *apierrors.StatusError
	if !errors.As(err, &se) {
		return Refusal{Reason: metav1.StatusReasonInternalError, Message: err.Error()}
	}
	r := Refusal{Reason: se.ErrStatus.Reason, Message: se.ErrStatus.Message}
	if d := se.ErrStatus.Details; d != nil && len(d.Causes) > 0 {
		if m := denied.FindStringSubmatch(d.Causes[len(d.Causes)-1].Message); m != nil {
			r.Policy, r.Message = m[1], m[2]
		}
	}
	return r
}

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
	"errors"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/cel/environment"
)

// hook is a compiled policy as the API server's dispatcher takes it.
type hook = validating.PolicyHook

// baseEnv is the API server's CEL environment for admission policies (validating's
// getCompositionEnvTemplateWithStrictCost); building it costs milliseconds, so once.
var baseEnv = environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())

// compile compiles a policy as the API server does (validating.compilePolicy, unexported in
// k8s.io/apiserver v0.37.2, restated here with the same calls), and binds it once with action Deny,
// as every binding of config/policy does. Unlike the API server it reports compilation errors.
func compile(p *admissionregistrationv1.ValidatingAdmissionPolicy) (hook, error) {
	if p.Spec.ParamKind != nil {
		return hook{}, fmt.Errorf("policy %s: paramKind is not supported", p.Name)
	}
	withAuthz := cel.OptionalVariableDeclarations{HasAuthorizer: true}
	// messageExpressions see no authorizer (validating.compilePolicy).
	withoutAuthz := cel.OptionalVariableDeclarations{}
	c, err := cel.NewCompositedCompiler(baseEnv)
	if err != nil {
		return hook{}, fmt.Errorf("policy %s: %w", p.Name, err)
	}
	var errs []error
	for _, v := range p.Spec.Variables {
		r := c.CompileAndStoreVariable(&validating.Variable{Name: v.Name, Expression: v.Expression}, withAuthz,
			environment.StoredExpressions)
		if r.Error != nil {
			errs = append(errs, fmt.Errorf("variable %s: %w", v.Name, r.Error))
		}
	}
	conditions := func(exprs []cel.ExpressionAccessor, opts cel.OptionalVariableDeclarations) cel.ConditionEvaluator {
		e := c.CompileCondition(exprs, opts, environment.StoredExpressions)
		errs = append(errs, e.CompilationErrors()...)
		return e
	}
	var matcher matchconditions.Matcher
	if mcs := p.Spec.MatchConditions; len(mcs) > 0 {
		exprs := make([]cel.ExpressionAccessor, len(mcs))
		for i := range mcs {
			exprs[i] = (*matchconditions.MatchCondition)(&mcs[i])
		}
		matcher = matchconditions.NewMatcher(conditions(exprs, withAuthz), p.Spec.FailurePolicy, "policy", "validate", p.Name)
	}
	v := validating.NewValidator(
		conditions(validations(p.Spec.Validations), withAuthz),
		matcher,
		conditions(auditAnnotations(p.Spec.AuditAnnotations), withoutAuthz),
		conditions(messageExpressions(p.Spec.Validations), withoutAuthz),
		p.Spec.FailurePolicy,
		nil,
	)
	if err := errors.Join(errs...); err != nil {
		return hook{}, fmt.Errorf("policy %s: %w", p.Name, err)
	}
	bindings := []*admissionregistrationv1.ValidatingAdmissionPolicyBinding{binding(p)}
	return hook{Policy: p, Bindings: bindings, Evaluator: v}, nil
}

// binding is the policy's binding: to every object the policy matches, with action Deny.
func binding(
	p *admissionregistrationv1.ValidatingAdmissionPolicy) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        p.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
}

func validations(vs []admissionregistrationv1.Validation) []cel.ExpressionAccessor {
	out := make([]cel.ExpressionAccessor, len(vs))
	for i, v := range vs {
		out[i] = &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason}
	}
	return out
}

// messageExpressions has an entry per validation, nil where it has none, as the validator
// pairs them by index.
func messageExpressions(vs []admissionregistrationv1.Validation) []cel.ExpressionAccessor {
	out := make([]cel.ExpressionAccessor, len(vs))
	for i, v := range vs {
		if v.MessageExpression != "" {
			out[i] = &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
		}
	}
	return out
}

func auditAnnotations(as []admissionregistrationv1.AuditAnnotation) []cel.ExpressionAccessor {
	out := make([]cel.ExpressionAccessor, len(as))
	for i, a := range as {
		out[i] = &validating.AuditAnnotationCondition{Key: a.Key, ValueExpression: a.ValueExpression}
	}
	return out
}

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
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/token"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func held(holder string, tok uint64) lease.State {
	st := lease.State{Holder: holder, Token: tokenOf(tok), Duration: 15 * time.Second, Transitions: 1, Limit: 1}
	st.Permits = []lease.Permit{{Number: 1, Holder: holder, Token: st.Token}}
	return st
}

func renewedAt(st lease.State, at time.Time) lease.State {
	t := metav1.NewMicroTime(at)
	st.RenewTime = &t
	if len(st.Permits) == 1 {
		st.Permits = []lease.Permit{st.Permits[0]}
		st.Permits[0].RenewTime = &t
	}
	return st
}

func tokenOf(v uint64) token.Token { return token.Token(v) }

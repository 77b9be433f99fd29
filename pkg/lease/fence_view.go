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

package lease

import "github.com/fencedlock/fencedlock/pkg/token"

// The fence's view of a lock: it judges a write by the token it presents, not by who presents it,
// so it looks permits up by token. Every grant has its own token (the resourceVersion its write
// was conditioned on), so at most one held permit has a given token.

// HeldToken returns the permit held now with token tok, if any. It does not allocate: the fence
// calls it on every admitted write.
func (s State) HeldToken(tok token.Token) (Permit, bool) {
	for i := range s.Permits {
		if s.Permits[i].Token == tok {
			return s.Permits[i], true
		}
	}
	return Permit{}, false
}

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
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/user"
	"strings"
	"sync"

	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/token"
)

// The plugin's default holder identity is user@host/<pid>-<random>: unique per process, as
// docs/protocol.md requires (renewal and release check only identity and token, so two processes
// sharing one could end each other's grants), and still saying whose it is in `get`. The random
// part keeps a pid reused after a reboot or in another container of the same name apart.

// identityHelp is the --identity flag's help: its default is resolved per process, not shown.
const identityHelp = "Holder identity (default: user@host/<pid>-<random>, unique to this process)"

// processIdentity is this process's default identity, drawn once so that every lock it takes
// (and the renewer it hands a grant to) uses the same one.
var processIdentity = sync.OnceValue(func() string {
	b := make([]byte, 2)
	_, _ = rand.Read(b) // never fails (crypto/rand panics rather than return an error)
	return fmt.Sprintf("%s/%d-%s", userHost(), os.Getpid(), hex.EncodeToString(b))
})

// identityOr returns identity, or the process's default identity if it is empty.
func identityOr(identity string) string {
	if identity == "" {
		return processIdentity()
	}
	return identity
}

// userHost is $USER@hostname (os/user when $USER is unset): whose processes the default
// identities of this host name.
func userHost() string {
	name := os.Getenv("USER")
	if name == "" {
		if u, err := user.Current(); err == nil {
			name = u.Username
		}
	}
	if name == "" {
		name = "user"
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return name + "@" + host
}

// userHostOf returns the user@host an identity starts with ("alice@db1" of "alice@db1/4242-9f3c"
// or "alice@db1/nightly"), or "" if it does not name one.
func userHostOf(identity string) string {
	uh, _, _ := strings.Cut(identity, "/")
	if !strings.Contains(uh, "@") {
		return ""
	}
	return uh
}

// sameUserHost reports whether holder is another identity of the user and host that identity
// names: another process of the same user on the same host, which a wait for it waits for.
func sameUserHost(identity, holder string) bool {
	uh := userHostOf(identity)
	return uh != "" && holder != identity && userHostOf(holder) == uh
}

// holderNote is what a progress or error line adds after a holder that is another process of
// the waiting user on this host: a forgotten "acquire" of a script is the usual cause, and
// waiting for it costs the rest of its lease.
// The command it suggests names the namespace, so that it works as pasted.
func holderNote(ns, name, identity, holder string, tok token.Token) string {
	if !sameUserHost(identity, holder) {
		return ""
	}
	return fmt.Sprintf(", another process of %s: if none of yours still needs it, release it with "+
		"\"kubectl fencedlock release %s -n %s --fencing-token %s\"", userHostOf(holder), name, ns, tok)
}

// ownNote marks, in a list of holders, one that is another process of identity's user and host.
func ownNote(identity, holder string) string {
	if !sameUserHost(identity, holder) {
		return ""
	}
	return " (another process of " + userHostOf(holder) + ")"
}

// tokenHolder returns the identity that holds the grant with token tok in st, if it is one of
// this user and host (user@host, as before identities were per process, or user@host/...), so
// that renew and release of a grant acquired by another invocation of the plugin need only its
// token. A grant held by someone else is an error naming them: acting on it needs --identity.
func tokenHolder(st lease.State, tok token.Token) (string, bool, error) {
	uh := userHost()
	for _, h := range st.Holders() {
		if _, ok := st.Permit(h, tok); !ok {
			continue
		}
		if userHostOf(h) == uh {
			return h, true, nil
		}
		return "", false, fmt.Errorf("token %s is held by %q, not by a process of %s: pass --identity %q to act on it",
			tok, h, uh, h)
	}
	return "", false, nil
}

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

package cabundle

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"slices"
	"time"
)

// pemCertificate is the PEM block type of a certificate.
const pemCertificate = "CERTIFICATE"

// maxOldCAs bounds the superseded CAs kept in a bundle (rotations in quick succession).
const maxOldCAs = 3

// bundle is the caBundle for the current CA given the one in place: the current CA first, then,
// while keepOld, the other unexpired CAs already there (newest first, at most maxOldCAs).
func bundle(current []*x509.Certificate, existing []byte, keepOld bool, now time.Time) []byte {
	var out bytes.Buffer
	for _, c := range current {
		_ = pem.Encode(&out, &pem.Block{Type: pemCertificate, Bytes: c.Raw})
	}
	if !keepOld {
		return out.Bytes()
	}
	old, _ := parseCerts(existing)
	old = slices.DeleteFunc(old, func(c *x509.Certificate) bool {
		return now.After(c.NotAfter) || slices.ContainsFunc(current, func(k *x509.Certificate) bool { return k.Equal(c) })
	})
	slices.SortStableFunc(old, func(a, b *x509.Certificate) int { return b.NotBefore.Compare(a.NotBefore) })
	for n, c := range old {
		if n == maxOldCAs {
			break
		}
		_ = pem.Encode(&out, &pem.Block{Type: pemCertificate, Bytes: c.Raw})
	}
	return out.Bytes()
}

// parseCerts parses the PEM certificates in b, skipping anything else.
func parseCerts(b []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for len(b) > 0 {
		var block *pem.Block
		if block, b = pem.Decode(b); block == nil {
			break
		}
		if block.Type != pemCertificate {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return certs, err
		}
		certs = append(certs, c)
	}
	return certs, nil
}

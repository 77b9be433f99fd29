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
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"
)

func caBundle(t *testing.T, cn string, notAfter time.Time) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: notAfter.Add(-365 * 24 * time.Hour), NotAfter: notAfter, IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// both is the CA bundle of two.
func both(t *testing.T, a, b string) string {
	t.Helper()
	pa, err := base64.StdEncoding.DecodeString(a)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := base64.StdEncoding.DecodeString(b)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(append(pa, pb...))
}

func TestCheckCABundle(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	valid := caBundle(t, "fencedlock-ca", now.Add(90*24*time.Hour))
	expired := caBundle(t, "old-ca", now.Add(-time.Hour))
	for _, tc := range []struct {
		name, bundle string
		ok           bool
		want         string
	}{
		{"valid", valid, true, `CA "fencedlock-ca" valid until 2027-03-07T12:00:00Z (90d)`},
		{"expired", expired, false, `CA certificate "old-ca" expired 2026-12-07T11:00:00Z`},
		{"one of two expired", both(t, valid, expired), false, `"old-ca" expired`},
		{"two valid", both(t, valid, valid), true, "valid until"},
		{"empty", "", false, "no CA bundle"},
		{"not PEM", base64.StdEncoding.EncodeToString([]byte("hello")), false, "holds no PEM certificate"},
		{"garbage in PEM", base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("x")})),
			false, "does not parse"},
	} {
		r := checkCABundle("w", tc.bundle, now)
		if r.ok != tc.ok || !strings.Contains(r.what, tc.want) || (!r.ok && r.fix == "") {
			t.Errorf("%s: %+v, want ok=%v and %q", tc.name, r, tc.ok, tc.want)
		}
	}
}

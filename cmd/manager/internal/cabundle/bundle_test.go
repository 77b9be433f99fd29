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
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"
)

func testCA(t *testing.T, serial int64, notBefore, notAfter time.Time) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "fencedlock-ca"},
		NotBefore: notBefore, NotAfter: notAfter, IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func pemOf(cs ...*x509.Certificate) []byte {
	var b bytes.Buffer
	for _, c := range cs {
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return b.Bytes()
}

func TestBundleKeepsSupersededCAsDuringTheOverlap(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	year := 365 * 24 * time.Hour
	ca1 := testCA(t, 1, now.Add(-2*year), now.Add(year))
	ca2 := testCA(t, 2, now.Add(-time.Hour), now.Add(10*year))
	expired := testCA(t, 3, now.Add(-3*year), now.Add(-time.Hour))
	cur := []*x509.Certificate{ca2}

	for name, tc := range map[string]struct {
		existing []byte
		keepOld  bool
		want     []*x509.Certificate
	}{
		"first injection":           {nil, true, []*x509.Certificate{ca2}},
		"rotated: old CA kept":      {pemOf(ca1), true, []*x509.Certificate{ca2, ca1}},
		"already in place":          {pemOf(ca2, ca1), true, []*x509.Certificate{ca2, ca1}},
		"current moved to front":    {pemOf(ca1, ca2), true, []*x509.Certificate{ca2, ca1}},
		"overlap over: old dropped": {pemOf(ca2, ca1), false, []*x509.Certificate{ca2}},
		"expired CA dropped":        {pemOf(ca1, expired), true, []*x509.Certificate{ca2, ca1}},
		"garbage ignored":           {[]byte("not a certificate"), true, []*x509.Certificate{ca2}},
	} {
		t.Run(name, func(t *testing.T) {
			if got := bundle(cur, tc.existing, tc.keepOld, now); !bytes.Equal(got, pemOf(tc.want...)) {
				t.Errorf("bundle:\n%s\nwant:\n%s", got, pemOf(tc.want...))
			}
		})
	}

	t.Run("at most maxOldCAs superseded CAs, newest first", func(t *testing.T) {
		old := make([]*x509.Certificate, 0, maxOldCAs+2)
		for i := range maxOldCAs + 2 {
			old = append(old, testCA(t, int64(10+i), now.Add(-time.Duration(10-i)*time.Hour), now.Add(year)))
		}
		got, _ := parseCerts(bundle(cur, pemOf(old...), true, now))
		if len(got) != 1+maxOldCAs {
			t.Fatalf("%d certificates in the bundle, want %d", len(got), 1+maxOldCAs)
		}
		if !got[0].Equal(ca2) || !got[1].Equal(old[len(old)-1]) {
			t.Error("the current CA first, then the newest superseded ones")
		}
	})
}

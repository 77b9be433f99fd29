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

package token

import (
	"errors"
	"testing"
)

func TestParse(t *testing.T) {
	cases := []struct {
		in      string
		want    Token
		wantErr bool
	}{
		{in: "1", want: 1},
		{in: "33", want: 33},
		{in: "18446744073709551615", want: 18446744073709551615},
		{in: "18446744073709551616", wantErr: true}, // 2^64
		{in: "999999999999999999999", wantErr: true},
		{in: "", wantErr: true},
		{in: "0", wantErr: true},
		{in: "00", wantErr: true},
		{in: "033", wantErr: true},
		{in: "-1", wantErr: true},
		{in: "+1", wantErr: true},
		{in: " 1", wantErr: true},
		{in: "1 ", wantErr: true},
		{in: "1\n", wantErr: true},
		{in: "1e3", wantErr: true},
		{in: "0x10", wantErr: true},
		{in: "3.0", wantErr: true},
		{in: "abc", wantErr: true},
		{in: "１", wantErr: true}, // fullwidth digit
	}
	for _, tc := range cases {
		got, err := Parse(tc.in)
		if tc.wantErr {
			if err == nil || !errors.Is(err, ErrMalformed) {
				t.Errorf("Parse(%q) = %v, %v; want ErrMalformed", tc.in, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if got.String() != tc.in {
			t.Errorf("Parse(%q).String() = %q; want round trip", tc.in, got.String())
		}
	}
}

func TestZero(t *testing.T) {
	if !Token(0).IsZero() || Token(0).String() != "" || Token(7).IsZero() {
		t.Fatal("zero token semantics broken")
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"1", "0", "-1", "18446744073709551615", " 7", "007"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := Parse(s)
		if err != nil {
			return
		}
		// Whatever parses must be positive and round-trip exactly.
		if tok == 0 || tok.String() != s {
			t.Fatalf("Parse(%q) = %d does not round-trip", s, tok)
		}
	})
}

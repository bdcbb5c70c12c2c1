package rules

import (
	"errors"
	"strings"
	"testing"

	"leases"
)

// The name rule: what it refuses, each with a message of one line that
// shows the name escaped, and what it keeps accepting.
func TestCheckName(t *testing.T) {
	for _, tc := range []struct {
		name string
		// want is a part of the message; empty: the name is valid.
		want string
	}{
		{"jobs/invoice-42", ""},
		{"worker a", ""},
		{" padded ", ""},
		{"Ünïcödé 資源 🚀", ""},
		{`r'); DROP TABLE authority_leases; --`, ""},
		{strings.Repeat("n", leases.MaxNameBytes), ""},
		{"", "resource is empty"},
		{strings.Repeat("n", leases.MaxNameBytes+1), "resource is 257 bytes, more than 256"},
		{"r\xff", "not valid UTF-8"},
		{"r\x00", "NUL byte"},
		{" ", `resource " " is only white space`},
		{"\u00a0\u3000", `is only white space`},
		{"a\tb", `resource "a\tb" has the control character U+0009 at byte 1`},
		{"a\nb", `has the control character U+000A at byte 1`},
		{"\r", `only white space`},
		{"a\x1b[31mred", `has the control character U+001B at byte 1`},
		{"del\x7f", `U+007F at byte 3`},
		{"c1\u0085", `U+0085 at byte 2`},
		{"ls\u2028", `U+2028 at byte 2`},
		{"ps\u2029", `U+2029 at byte 2`},
	} {
		err := CheckName("resource", tc.name)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v; want it valid", tc.name, err)
		case tc.want == "":
		case !errors.Is(err, leases.ErrInvalidInput) || !strings.Contains(err.Error(), tc.want) || strings.ContainsAny(err.Error(), "\n\t"):
			t.Errorf("%q: %v; want ErrInvalidInput, one line, saying %q", tc.name, err, tc.want)
		}
	}
}

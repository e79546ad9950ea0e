package deadletters

import "testing"

// A NUL byte or invalid UTF-8 in a dead letter's headers or error would make PostgreSQL refuse
// the insert (text and jsonb take neither) and the letter would be retried forever.
func TestPGTextHasNoNULAndIsValidUTF8(t *testing.T) {
	for in, want := range map[string]string{
		"plain":         "plain",
		"a\x00b":        "a\uFFFDb",
		"bad \xff utf8": "bad \uFFFD utf8",
		"\x00":          "\uFFFD",
	} {
		if got := pgText(in); got != want {
			t.Errorf("pgText(%q) = %q, want %q", in, got, want)
		}
	}
}

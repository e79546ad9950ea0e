package tlsfiles

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var words = Words{CA: "the CA setting", Cert: "the cert setting", Key: "the key setting",
	CertWithoutKey: "the cert needs the key", KeyWithoutCert: "the key needs the cert"}

// Each file that cannot be used is named in the caller's words, all of them in one error.
func TestEachUnusableFileIsNamedInTheCallersWords(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	for _, c := range []struct {
		name  string
		files Files
		want  []string
	}{
		{"missing CA", Files{CA: missing}, []string{"the CA setting: open " + missing}},
		{"CA without PEM", Files{CA: notPEM}, []string{"the CA setting " + notPEM + ": no PEM certificate in it"}},
		{"unreadable pair", Files{Cert: missing, Key: notPEM}, []string{"the cert setting " + missing + ", the key setting " + notPEM + ": "}},
		{"cert alone", Files{Cert: notPEM}, []string{"the cert needs the key"}},
		{"key alone and a bad CA", Files{CA: notPEM, Key: notPEM}, []string{"no PEM certificate in it", "the key needs the cert"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Config(c.files, false, words)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestNoFilesIsTLS12WithTheSystemsRoots(t *testing.T) {
	tc, err := Config(Files{}, true, words)
	if err != nil {
		t.Fatal(err)
	}
	if tc.MinVersion < tls.VersionTLS12 || tc.RootCAs != nil || len(tc.Certificates) != 0 || !tc.InsecureSkipVerify {
		t.Fatalf("config %+v: want TLS 1.2 or later, the system's roots, no client certificate, InsecureSkipVerify as asked", tc)
	}
}

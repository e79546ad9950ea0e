package testenv

import (
	"os"
	"strings"
	"testing"
)

// The schema registry's variables, printed by scripts/registry-up.sh.
const (
	RegistryURLEnv    = "CDC_RELAY_REGISTRY_URL"     // the Confluent-compatible API over HTTP
	RegistryTLSURLEnv = "CDC_RELAY_REGISTRY_TLS_URL" // the same over HTTPS, certificate signed by ...
	RegistryTLSCAEnv  = "CDC_RELAY_REGISTRY_TLS_CA"  // ... this CA (the dev CA of scripts/lib/tls.sh)
	RegistryJarsEnv   = "CDC_RELAY_REGISTRY_JARS"    // the registry's jars, Apache Avro's Java library among them
)

const registryHint = `run: eval "$(scripts/registry-up.sh)"`

// requireRegistry is Require for the registry, whose hint names its own script: it returns when
// each of vars is set, else fails the test under Strict and skips it otherwise.
func requireRegistry(t testing.TB, vars ...string) {
	t.Helper()
	var missing []string
	for _, v := range vars {
		if os.Getenv(v) == "" {
			missing = append(missing, v)
		}
	}
	if len(missing) == 0 {
		return
	}
	msg := "needs the schema registry: " + strings.Join(missing, ", ") + " not set; " + registryHint
	if Strict() {
		t.Fatal(msg)
	}
	t.Skip(msg + " (a skip: CI=true or " + RequireServicesEnv + "=1 makes it a failure)")
}

// RegistryURL returns CDC_RELAY_REGISTRY_URL, the real schema registry's Confluent-compatible
// API; without it the test stops as Require stops it.
func RegistryURL(t testing.TB) string {
	t.Helper()
	requireRegistry(t, RegistryURLEnv)
	return os.Getenv(RegistryURLEnv)
}

// RegistryTLS returns the registry's HTTPS URL and the file of the CA that signs its certificate.
func RegistryTLS(t testing.TB) (url, caFile string) {
	t.Helper()
	requireRegistry(t, RegistryTLSURLEnv, RegistryTLSCAEnv)
	return os.Getenv(RegistryTLSURLEnv), os.Getenv(RegistryTLSCAEnv)
}

// RegistryJars returns the directory of the registry's jars (a Java classpath: dir/*), which
// hold Apache Avro's Java library, for reading values back with a library of another language.
func RegistryJars(t testing.TB) string {
	t.Helper()
	requireRegistry(t, RegistryJarsEnv)
	return os.Getenv(RegistryJarsEnv)
}

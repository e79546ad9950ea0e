package testenv

import (
	"os"
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

// requireRegistry is Require for the registry, whose hint names its own script.
func requireRegistry(t testing.TB, vars ...string) {
	t.Helper()
	require(t, "the schema registry", registryHint, vars...)
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

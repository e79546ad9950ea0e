# shellcheck shell=bash
# The secure variant's test CA: a CA, server and client certificates and random passwords under
# $TLS_DIR, made once per data dir, and the exports that name them. pg.sh and kafka.sh turn TLS on
# with them (pg_tls_conf, kafka_tls_conf).

# The secure variant: a test CA and certificates under $TLS_DIR,
# Postgres with ssl=on and least-privilege roles that may only connect over TLS, a SASL_SSL
# (SCRAM/PLAIN) and an SSL (mTLS) Kafka listener next to the plaintext one.
TLS_DIR="$DEV_DIR/tls"
PG_TLS_ROLE="cdc_relay_app"   # LOGIN REPLICATION, password (scram-sha-256) over hostssl only
PG_CERT_ROLE="cdc_relay_cert" # LOGIN REPLICATION, client certificate (CN) over hostssl only

# tls_leaf NAME CN SAN EKU: a key and a certificate signed by the CA in the current directory.
tls_leaf() {
	openssl req -new -newkey rsa:2048 -nodes -sha256 -subj "/CN=$2" -keyout "$1.key" -out "$1.csr" &&
		printf 'subjectAltName=%s\nextendedKeyUsage=%s\nkeyUsage=critical,digitalSignature,keyEncipherment\nbasicConstraints=CA:FALSE\n' \
			"$3" "$4" >"$1.ext" &&
		openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -set_serial "0x$(openssl rand -hex 8)" -days 3650 -sha256 \
			-extfile "$1.ext" -out "$1.crt" &&
		rm -f "$1.csr" "$1.ext"
}

tls_make() {
	cd "$1" &&
		openssl req -x509 -new -newkey rsa:2048 -nodes -sha256 -days 3650 -subj "/CN=cdc-relay dev CA" \
			-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
			-keyout ca.key -out ca.crt &&
		tls_leaf server 127.0.0.1 "IP:127.0.0.1,DNS:localhost" serverAuth &&
		tls_leaf client "$PG_CERT_ROLE" "DNS:$PG_CERT_ROLE" clientAuth &&
		tls_leaf wronghost wrong-host.invalid "DNS:wrong-host.invalid" serverAuth &&
		openssl rand -hex 16 >keystore-password &&
		openssl pkcs12 -export -in server.crt -inkey server.key -certfile ca.crt -name server \
			-passout file:keystore-password -out server.p12 &&
		openssl rand -hex 24 >pg-password &&
		openssl rand -hex 24 >kafka-password &&
		chmod 0600 ./*.key ./*-password server.p12
}

# tls_certs makes, once per data dir, in $TLS_DIR: a test CA (ca.crt), a server certificate for 127.0.0.1
# and localhost (server.crt, and server.p12 for Kafka), a client certificate with CN $PG_CERT_ROLE
# (client.crt, client.key: Postgres cert auth and Kafka mTLS), a certificate for another name
# (wronghost.crt: hostname-mismatch tests), and random passwords (pg-password, kafka-password).
tls_certs() {
	if [[ -f "$TLS_DIR/.complete" ]]; then return 0; fi
	command -v openssl >/dev/null || die "openssl not found (needed to make the test certificates)"
	log "making a test CA, certificates and passwords in $TLS_DIR"
	local tmp="$TLS_DIR.tmp"
	rm -rf "$tmp" "$TLS_DIR"
	mkdir -p "$tmp"
	chmod 0700 "$tmp"
	(tls_make "$tmp") >>"$DEV_DIR/tls.log" 2>&1 || die "making the test certificates failed; see $DEV_DIR/tls.log"
	touch "$tmp/.complete"
	mv "$tmp" "$TLS_DIR"
}

# print_tls_exports prints the secure variant's settings. No password is printed: they are in files.
print_tls_exports() {
	printf "export CDC_RELAY_TLS_PG_URL='%s'\n" "$PG_TLS_URL"
	printf "export CDC_RELAY_TLS_PG_PASSWORD_FILE='%s'\n" "$TLS_DIR/pg-password"
	printf "export CDC_RELAY_TLS_PG_CERT_ROLE='%s'\n" "$PG_CERT_ROLE"
	printf "export CDC_RELAY_TLS_BROKERS='%s'\n" "127.0.0.1:$KAFKA_SASL_PORT"
	printf "export CDC_RELAY_MTLS_BROKERS='%s'\n" "127.0.0.1:$KAFKA_SSL_PORT"
	printf "export CDC_RELAY_TLS_CA='%s'\n" "$TLS_DIR/ca.crt"
	printf "export CDC_RELAY_TLS_CLIENT_CERT='%s'\n" "$TLS_DIR/client.crt"
	printf "export CDC_RELAY_TLS_CLIENT_KEY='%s'\n" "$TLS_DIR/client.key"
	printf "export CDC_RELAY_SCRAM_USER='%s'\n" "$KAFKA_SCRAM_USER"
	printf "export CDC_RELAY_SCRAM_PASSWORD_FILE='%s'\n" "$TLS_DIR/kafka-password"
}

package telemetry

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A certificate variable the OTLP exporter could not use (a CA file
// missing or holding no PEM certificate, a client certificate without
// its key, a pair that is not one) was logged in the exporter's words
// ("read tls ca cert file" "error"="open …") or not at all, and the
// export went on without it. Setup refuses it, naming the variable, its
// value and what it takes (tracing stays off); good files pass.
func TestSetupRefusesBadCertificates(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	certPEM, keyPEM := selfSigned(t)
	cert, key := write("cert.pem", certPEM), write("key.pem", keyPEM)
	junk, missing := write("junk.pem", []byte("not a certificate\n")), filepath.Join(dir, "missing.pem")
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"OTEL_EXPORTER_OTLP_CERTIFICATE": missing}, "OTEL_EXPORTER_OTLP_CERTIFICATE=" + missing + ": cannot read the file: no such file or directory"},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE": junk}, "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE=" + junk + ": no PEM certificate in the file"},
		{map[string]string{"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": cert}, "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE is set, OTEL_EXPORTER_OTLP_CLIENT_KEY is not"},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY": key, "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": cert},
			"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE is set, OTEL_EXPORTER_OTLP_CLIENT_KEY is not"},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY": key}, "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY is set, OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE is not"},
		{map[string]string{"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": cert, "OTEL_EXPORTER_OTLP_CLIENT_KEY": missing}, "OTEL_EXPORTER_OTLP_CLIENT_KEY=" + missing + ": cannot read the file"},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE": cert, "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY": junk},
			"OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE=" + cert + ", OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY=" + junk + ": not a certificate and its private key in PEM"},
	} {
		tc.env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "https://127.0.0.1:1"
		_, err := Setup(t.Context(), func(k string) string { return tc.env[k] })
		if err == nil || !strings.Contains(err.Error(), "tracing: "+tc.want) || Enabled() {
			t.Errorf("Setup(%v): err %v, enabled %v; want %q", tc.env, err, Enabled(), tc.want)
		}
	}
	good := map[string]string{"OTEL_EXPORTER_OTLP_CERTIFICATE": cert, "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE": " " + cert + " ",
		"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": cert, "OTEL_EXPORTER_OTLP_CLIENT_KEY": key}
	if err := checkEnv(func(k string) string { return good[k] }); err != nil {
		t.Errorf("good files refused: %v", err)
	}
}

// selfSigned returns a self-signed certificate and its key, in PEM.
func selfSigned(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "collector"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

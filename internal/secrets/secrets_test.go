package secrets

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

func keyBytes(b byte) []byte { return bytes.Repeat([]byte{b}, KeySize) }

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestFromEnv(t *testing.T) {
	k := keyBytes(7)
	tests := []struct {
		name    string
		env     map[string]string
		enabled bool
		wantErr string
	}{
		{"unset: no box", nil, false, ""},
		{"base64", map[string]string{EnvKey: base64.StdEncoding.EncodeToString(k)}, true, ""},
		{"raw base64url", map[string]string{EnvKey: base64.RawURLEncoding.EncodeToString(k)}, true, ""},
		{"hex", map[string]string{EnvKey: hex.EncodeToString(k)}, true, ""},
		{"hex with spaces", map[string]string{EnvKey: " " + hex.EncodeToString(k) + "\n"}, true, ""},
		{"short base64", map[string]string{EnvKey: base64.StdEncoding.EncodeToString(k[:16])}, false, "MAESTRO_ENCRYPTION_KEY: expected 32 bytes (base64 or 64 hex digits, e.g. `openssl rand -base64 32`), the value decodes to 16 bytes"},
		{"not a key", map[string]string{EnvKey: "correct horse battery staple!"}, false, "MAESTRO_ENCRYPTION_KEY: expected 32 bytes written as base64 or as 64 hex digits"},
		{"previous without current", map[string]string{EnvPreviousKey: hex.EncodeToString(k)}, false, "MAESTRO_ENCRYPTION_KEY_PREVIOUS is set but MAESTRO_ENCRYPTION_KEY is not"},
		{"bad previous", map[string]string{EnvKey: hex.EncodeToString(k), EnvPreviousKey: "x,y"}, false, "MAESTRO_ENCRYPTION_KEY_PREVIOUS (key 1): expected 32 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := FromEnv(env(tc.env))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), tc.env[EnvKey]) && tc.env[EnvKey] != "" {
					t.Fatalf("the error repeats the key: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if b.Enabled() != tc.enabled {
				t.Fatalf("Enabled = %v, want %v", b.Enabled(), tc.enabled)
			}
		})
	}
}

func TestSealOpenRoundTrip(t *testing.T) {
	b, err := New(keyBytes(1))
	if err != nil {
		t.Fatal(err)
	}
	for _, plain := range []string{"", "hunter2", strings.Repeat("ключ ", 1000)} {
		s, err := b.SealString(plain, "ssh_connection/prod/secret")
		if err != nil {
			t.Fatal(err)
		}
		if !IsSealed(s) || KeyOf(s) != b.KeyID() || (plain != "" && strings.Contains(s, plain)) {
			t.Fatalf("sealed %q as %q", plain, s)
		}
		got, err := b.OpenString(s, "ssh_connection/prod/secret")
		if err != nil || got != plain {
			t.Fatalf("Open = %q, %v; want %q", got, err, plain)
		}
	}
	s1, _ := b.SealString("x", "p")
	s2, _ := b.SealString("x", "p")
	if s1 == s2 {
		t.Fatal("two seals of one value are equal: the nonce is not random")
	}
}

func TestOpenRefusesTampering(t *testing.T) {
	b, _ := New(keyBytes(1))
	other, _ := New(keyBytes(2))
	sealed, err := b.SealString("the password", "mcp_server/gh/env/TOKEN")
	if err != nil {
		t.Fatal(err)
	}
	flip := func(s string, i int) string {
		raw := []byte(s)
		if raw[i] == 'A' {
			raw[i] = 'B'
		} else {
			raw[i] = 'A'
		}
		return string(raw)
	}
	tests := []struct {
		name    string
		box     *Box
		sealed  string
		purpose string
		want    error
	}{
		{"a flipped ciphertext character", b, flip(sealed, len(sealed)-10), "mcp_server/gh/env/TOKEN", ErrCorrupt},
		{"a flipped nonce character", b, flip(sealed, len("mse1:12345678:")+1), "mcp_server/gh/env/TOKEN", ErrCorrupt},
		{"truncated", b, sealed[:len(sealed)-4], "mcp_server/gh/env/TOKEN", ErrCorrupt},
		{"another purpose (moved to another field)", b, sealed, "mcp_server/gh/env/OTHER", ErrCorrupt},
		{"plain text", b, "the password", "mcp_server/gh/env/TOKEN", ErrCorrupt},
		{"another key", other, sealed, "mcp_server/gh/env/TOKEN", ErrUnknownKey},
		{"no key", nil, sealed, "mcp_server/gh/env/TOKEN", ErrNoKey},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.box.Open(tc.sealed, tc.purpose)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Open = %q, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestSealWithoutKeyRefused(t *testing.T) {
	var b *Box
	_, err := b.SealString("secret", "p")
	if !errors.Is(err, ErrNoKey) || !strings.Contains(err.Error(), EnvKey) {
		t.Fatalf("err = %v, want ErrNoKey naming %s", err, EnvKey)
	}
}

func TestRotation(t *testing.T) {
	old, _ := New(keyBytes(1))
	sealed, _ := old.SealString("v", "p")
	b, err := FromEnv(env(map[string]string{
		EnvKey:         hex.EncodeToString(keyBytes(2)),
		EnvPreviousKey: base64.StdEncoding.EncodeToString(keyBytes(1)),
	}))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := b.OpenString(sealed, "p"); err != nil || got != "v" {
		t.Fatalf("open with the previous key = %q, %v", got, err)
	}
	again, _ := b.SealString("v", "p")
	if KeyOf(again) == KeyOf(sealed) || KeyOf(again) != b.KeyID() {
		t.Fatalf("re-sealed with key %s, want the current %s", KeyOf(again), b.KeyID())
	}
}

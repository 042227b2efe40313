// Package secrets seals the credentials Maestro keeps at rest (API-managed
// MCP server environment and header values, SSH keys and passwords) with
// AES-256-GCM under a key from MAESTRO_ENCRYPTION_KEY.
//
// A sealed value is text:
//
//	mse1:<key id>:<base64url(nonce ‖ ciphertext ‖ tag)>
//
// "mse1" is the format version; the key id (the first 8 hex digits of the
// key's SHA-256) names the key that sealed it, so the key can be rotated:
// the new key goes in MAESTRO_ENCRYPTION_KEY and the old ones in
// MAESTRO_ENCRYPTION_KEY_PREVIOUS (comma-separated) until every value was
// sealed again. Each value is sealed for a purpose (its record and field,
// e.g. "ssh_connection/prod/secret") given as additional data, so a sealed
// value copied into another record or field does not open.
//
// Without a key nothing can be sealed: storing a secret is refused with an
// error naming the variable (see ErrNoKey).
package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// The environment variables the key comes from.
const (
	EnvKey         = "MAESTRO_ENCRYPTION_KEY"
	EnvPreviousKey = "MAESTRO_ENCRYPTION_KEY_PREVIOUS"
)

// KeySize is the key's length in bytes (AES-256).
const KeySize = 32

// prefix starts every sealed value (format version 1).
const prefix = "mse1:"

var (
	// ErrNoKey: a secret was to be sealed or opened but no key is
	// configured.
	ErrNoKey = errors.New("no encryption key: set " + EnvKey + " to 32 random bytes, base64 or hex (for example `openssl rand -base64 32`), to store secrets")
	// ErrUnknownKey: the value was sealed by a key that is neither the
	// current nor a previous one.
	ErrUnknownKey = errors.New("sealed with an unknown key")
	// ErrCorrupt: the value is not a sealed value, or it was altered, or
	// it was sealed for another purpose.
	ErrCorrupt = errors.New("sealed value is corrupt or was altered")
)

// Box seals and opens values. The zero or nil Box has no key: Seal and Open
// fail with ErrNoKey.
type Box struct {
	current *key
	keys    map[string]*key
}

type key struct {
	id   string
	aead cipher.AEAD
}

// New returns a Box sealing with current and opening with current or any of
// previous (raw 32-byte keys).
func New(current []byte, previous ...[]byte) (*Box, error) {
	b := &Box{keys: map[string]*key{}}
	for i, raw := range append([][]byte{current}, previous...) {
		k, err := newKey(raw)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			b.current = k
		}
		b.keys[k.id] = k
	}
	return b, nil
}

func newKey(raw []byte) (*key, error) {
	if len(raw) != KeySize {
		return nil, fmt.Errorf("encryption key: expected %d bytes, got %d", KeySize, len(raw))
	}
	block, err := aes.NewCipher(raw)
	if err != nil {
		return nil, fmt.Errorf("encryption key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("encryption key: %w", err)
	}
	sum := sha256.Sum256(raw)
	return &key{id: hex.EncodeToString(sum[:4]), aead: aead}, nil
}

// FromEnv returns the Box of MAESTRO_ENCRYPTION_KEY (and
// MAESTRO_ENCRYPTION_KEY_PREVIOUS), or nil when the key is not set. A key
// that is not 32 bytes in base64 or hex is an error naming the variable
// (never its value).
func FromEnv(getenv func(string) string) (*Box, error) {
	cur := strings.TrimSpace(getenv(EnvKey))
	if cur == "" {
		if getenv(EnvPreviousKey) != "" {
			return nil, fmt.Errorf("%s is set but %s is not: set the current key too", EnvPreviousKey, EnvKey)
		}
		return nil, nil
	}
	raw, err := ParseKey(cur)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvKey, err)
	}
	var prev [][]byte
	for i, p := range strings.Split(getenv(EnvPreviousKey), ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		r, err := ParseKey(p)
		if err != nil {
			return nil, fmt.Errorf("%s (key %d): %w", EnvPreviousKey, i+1, err)
		}
		prev = append(prev, r)
	}
	return New(raw, prev...)
}

// ParseKey decodes a key written as 64 hex digits or as base64 (standard
// or URL alphabet, padded or not) of 32 bytes.
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if len(s) == 2*KeySize {
		if raw, err := hex.DecodeString(s); err == nil {
			return raw, nil
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if raw, err := enc.DecodeString(s); err == nil {
			if len(raw) != KeySize {
				return nil, fmt.Errorf("expected %d bytes (base64 or 64 hex digits, e.g. `openssl rand -base64 32`), the value decodes to %d bytes", KeySize, len(raw))
			}
			return raw, nil
		}
	}
	return nil, fmt.Errorf("expected %d bytes written as base64 or as 64 hex digits (e.g. `openssl rand -base64 32`); the value is neither", KeySize)
}

// Enabled reports whether b can seal.
func (b *Box) Enabled() bool { return b != nil && b.current != nil }

// KeyID is the id of the key b seals with ("" without a key).
func (b *Box) KeyID() string {
	if !b.Enabled() {
		return ""
	}
	return b.current.id
}

// Seal encrypts plain for purpose (bound as additional data).
func (b *Box) Seal(plain []byte, purpose string) (string, error) {
	if !b.Enabled() {
		return "", ErrNoKey
	}
	k := b.current
	nonce := make([]byte, k.aead.NonceSize(), k.aead.NonceSize()+len(plain)+k.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("seal %s: read a nonce: %w", purpose, err)
	}
	out := k.aead.Seal(nonce, nonce, plain, []byte(purpose))
	return prefix + k.id + ":" + base64.RawURLEncoding.EncodeToString(out), nil
}

// SealString is Seal of a string.
func (b *Box) SealString(plain, purpose string) (string, error) {
	return b.Seal([]byte(plain), purpose)
}

// Open decrypts a value Seal returned for the same purpose.
func (b *Box) Open(sealed, purpose string) ([]byte, error) {
	if !b.Enabled() {
		return nil, fmt.Errorf("open %s: %w", purpose, ErrNoKey)
	}
	id, data, ok := split(sealed)
	if !ok {
		return nil, fmt.Errorf("open %s: %w", purpose, ErrCorrupt)
	}
	k, ok := b.keys[id]
	if !ok {
		return nil, fmt.Errorf("open %s: key %s: %w (set it in %s)", purpose, id, ErrUnknownKey, EnvPreviousKey)
	}
	raw, err := base64.RawURLEncoding.DecodeString(data)
	if err != nil || len(raw) < k.aead.NonceSize()+k.aead.Overhead() {
		return nil, fmt.Errorf("open %s: %w", purpose, ErrCorrupt)
	}
	n := k.aead.NonceSize()
	plain, err := k.aead.Open(nil, raw[:n], raw[n:], []byte(purpose))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", purpose, ErrCorrupt)
	}
	return plain, nil
}

// OpenString is Open returning a string.
func (b *Box) OpenString(sealed, purpose string) (string, error) {
	p, err := b.Open(sealed, purpose)
	return string(p), err
}

// IsSealed reports whether s has the form of a sealed value.
func IsSealed(s string) bool {
	_, _, ok := split(s)
	return ok
}

// KeyOf returns the id of the key that sealed s ("" if s is not sealed):
// a rotation re-seals the values whose key is not the current one.
func KeyOf(s string) string {
	id, _, _ := split(s)
	return id
}

func split(s string) (id, data string, ok bool) {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok {
		return "", "", false
	}
	id, data, ok = strings.Cut(rest, ":")
	return id, data, ok && len(id) == 8 && data != ""
}

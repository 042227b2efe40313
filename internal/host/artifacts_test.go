package host

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/blobstore"
	"github.com/maestro-run/maestro/internal/config"
)

// TestArtifacts: --artifacts (else config.yaml's artifacts) chooses the
// artifact store; mistakes are refused naming the flag, the config key or
// the missing variable.
func TestArtifacts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "blobs")
	noEnv := func(string) string { return "" }
	cfgFile := config.Config{Path: "/home/u/.maestro/config.yaml"}
	tests := []struct {
		name    string
		flag    string
		cfg     config.Config
		want    string // the store's Location; "" none
		wantErr []string
	}{
		{name: "none", cfg: cfgFile},
		{name: "directory", flag: dir, cfg: cfgFile, want: dir},
		{name: "directory from config", cfg: config.Config{Path: cfgFile.Path, Artifacts: dir}, want: dir},
		{name: "relative directory", flag: "blobs", cfg: cfgFile, wantErr: []string{"--artifacts", `"blobs"`, "s3://bucket/prefix"}},
		{name: "s3 without keys", flag: "s3://team/maestro", cfg: cfgFile, wantErr: []string{"--artifacts s3://team/maestro", "AWS_ACCESS_KEY_ID is not set"}},
		{name: "s3 from config without keys", cfg: config.Config{Path: cfgFile.Path, Artifacts: "s3://team"}, wantErr: []string{"artifacts in /home/u/.maestro/config.yaml", "AWS_ACCESS_KEY_ID"}},
		{name: "s3 without the secret", flag: "s3://team", cfg: config.Config{ArtifactsS3: config.ArtifactsS3{AccessKey: "k"}}, wantErr: []string{"AWS_SECRET_ACCESS_KEY is not set"}},
		{name: "malformed s3 URL", flag: "s3://team/../x", cfg: cfgFile, wantErr: []string{"--artifacts", "s3://team/../x"}},
		{name: "bad endpoint", flag: "s3://team", cfg: config.Config{ArtifactsS3: config.ArtifactsS3{AccessKey: "k", SecretKey: "s", Endpoint: "ftp://x"}}, wantErr: []string{"--artifacts s3://team", "AWS_ENDPOINT_URL_S3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Artifacts(t.Context(), tt.flag, tt.cfg, noEnv)
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("Artifacts = %v, want an error", s)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == "" {
				if s != nil {
					t.Fatalf("Artifacts = %v, want none", s.Location())
				}
				return
			}
			if s == nil || s.Location() != tt.want {
				t.Fatalf("Artifacts = %v, want a store at %s", s, tt.want)
			}
			if _, ok := s.(*blobstore.Local); !ok {
				t.Errorf("store %T, want *blobstore.Local", s)
			}
			s.(*blobstore.Local).Close()
		})
	}
}

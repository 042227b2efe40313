package host

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/maestro-run/maestro/internal/blobstore"
	"github.com/maestro-run/maestro/internal/config"
)

// Artifacts opens the artifact store of serve and workers
// (docs/scale-out.md, "Artifacts"): flag (--artifacts) or else
// config.yaml's artifacts names it. s3://bucket/prefix is an S3-compatible
// store reached with config.yaml's artifacts_s3 and the AWS variables
// getenv reads; an absolute directory is a Local store there (several
// machines sharing a mount). Empty: nil, the files stay in the data
// directory as they always have (uploads staged under <data dir>/uploads).
func Artifacts(ctx context.Context, flag string, cfg config.Config, getenv func(string) string) (blobstore.Store, error) {
	loc, what := flag, "--artifacts"
	if loc == "" {
		loc, what = cfg.Artifacts, "artifacts in "+cfg.Path
	}
	switch {
	case loc == "":
		return nil, nil
	case strings.HasPrefix(loc, "s3://"):
		bucket, prefix, err := blobstore.ParseS3URL(loc, what)
		if err != nil {
			return nil, err
		}
		c := cfg.ArtifactsS3
		s3cfg, err := blobstore.S3ConfigFromEnv(blobstore.S3Config{
			Bucket: bucket, Prefix: prefix, Endpoint: c.Endpoint, Region: c.Region, AccessKey: c.AccessKey, SecretKey: c.SecretKey,
		}, getenv, what+" "+loc)
		if err != nil {
			return nil, err
		}
		s, err := blobstore.OpenS3(ctx, s3cfg)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", what, loc, err)
		}
		return s, nil
	case filepath.IsAbs(loc):
		s, err := blobstore.OpenLocal(loc)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", what, loc, err)
		}
		return s, nil
	}
	return nil, fmt.Errorf("%s %q: expected s3://bucket/prefix or an absolute directory (empty: the data directory)", what, loc)
}

package blobstore

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Config says where an S3 store is and how to reach it.
type S3Config struct {
	// Bucket and Prefix are where the objects live: key k is the object
	// Prefix/k of Bucket.
	Bucket, Prefix string
	// Endpoint is the service's URL (http://host:port for a local
	// S3-compatible server); empty: AWS S3 (https://s3.amazonaws.com).
	Endpoint string
	// Region is the bucket's region (empty: the service's default).
	Region string
	// AccessKey and SecretKey are the credentials (SessionToken with
	// temporary ones).
	AccessKey, SecretKey, SessionToken string
	// Timeout bounds each request's response headers (default one
	// minute); bodies are bounded by the caller's context.
	Timeout time.Duration
}

// The environment variables an S3 store reads (the AWS SDKs' own names).
const (
	EnvEndpoint     = "AWS_ENDPOINT_URL"
	EnvEndpointS3   = "AWS_ENDPOINT_URL_S3"
	EnvAccessKey    = "AWS_ACCESS_KEY_ID"
	EnvSecretKey    = "AWS_SECRET_ACCESS_KEY"
	EnvSessionToken = "AWS_SESSION_TOKEN"
	EnvRegion       = "AWS_REGION"
	EnvRegionOld    = "AWS_DEFAULT_REGION"
)

// ParseS3URL splits s3://bucket/prefix. what names where the URL came
// from (a flag, a config key) for the error.
func ParseS3URL(raw, what string) (bucket, prefix string, err error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "s3" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", "", fmt.Errorf("%s %q: expected s3://bucket/prefix (the prefix optional)", what, raw)
	}
	prefix = strings.Trim(u.Path, "/")
	if prefix != "" {
		if _, err := CheckKey(prefix); err != nil {
			return "", "", fmt.Errorf("%s %q: the prefix: %w", what, raw, err)
		}
	}
	return u.Host, prefix, nil
}

// S3ConfigFromEnv completes cfg from the AWS variables getenv reads where
// cfg leaves a field empty: AWS_ENDPOINT_URL_S3 (else AWS_ENDPOINT_URL),
// AWS_REGION (else AWS_DEFAULT_REGION), AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN. It fails naming the variable
// when the credentials are missing.
func S3ConfigFromEnv(cfg S3Config, getenv func(string) string, what string) (S3Config, error) {
	first := func(v string, names ...string) string {
		for _, n := range names {
			if v != "" {
				return v
			}
			v = getenv(n)
		}
		return v
	}
	cfg.Endpoint = first(cfg.Endpoint, EnvEndpointS3, EnvEndpoint)
	cfg.Region = first(cfg.Region, EnvRegion, EnvRegionOld)
	cfg.AccessKey = first(cfg.AccessKey, EnvAccessKey)
	cfg.SecretKey = first(cfg.SecretKey, EnvSecretKey)
	cfg.SessionToken = first(cfg.SessionToken, EnvSessionToken)
	switch {
	case cfg.AccessKey == "":
		return cfg, fmt.Errorf("%s: %s is not set: an S3 artifact store needs credentials (set it and %s, or artifacts_s3.access_key in config.yaml)", what, EnvAccessKey, EnvSecretKey)
	case cfg.SecretKey == "":
		return cfg, fmt.Errorf("%s: %s is not set: an S3 artifact store needs credentials (set it with %s, or artifacts_s3.secret_key in config.yaml)", what, EnvSecretKey, EnvAccessKey)
	}
	return cfg, nil
}

// S3 is a Store in an S3-compatible service. Each object carries its
// SHA-256 as user metadata (x-amz-meta-sha256).
type S3 struct {
	c              *minio.Client
	bucket, prefix string
	loc            string
}

// metaSHA256 is the user metadata key of an object's SHA-256 (minio-go
// canonicalises it as "Sha256" when reading).
const metaSHA256 = "sha256"

// OpenS3 connects to the bucket of cfg and checks that it exists.
func OpenS3(ctx context.Context, cfg S3Config) (*S3, error) {
	endpoint := cfg.Endpoint
	if endpoint == "" {
		endpoint = "https://s3.amazonaws.com"
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("S3 endpoint %q (%s or %s): expected http(s)://host[:port]", endpoint, EnvEndpointS3, EnvEndpoint)
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = timeout
	opts := &minio.Options{
		Creds:     credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, cfg.SessionToken),
		Secure:    u.Scheme == "https",
		Region:    cfg.Region,
		Transport: tr,
	}
	if cfg.Endpoint != "" {
		opts.BucketLookup = minio.BucketLookupPath // S3-compatible servers on a host:port
	}
	c, err := minio.New(u.Host, opts)
	if err != nil {
		return nil, fmt.Errorf("S3 client for %s: %w", endpoint, err)
	}
	s := &S3{c: c, bucket: cfg.Bucket, prefix: strings.Trim(cfg.Prefix, "/"), loc: "s3://" + Join(cfg.Bucket, cfg.Prefix)}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ok, err := c.BucketExists(cctx, cfg.Bucket)
	if err == nil && !ok {
		// A HEAD answer has no body to say why: some servers (versitygw)
		// answer an unknown access key 404, which reads as no bucket. A
		// listing's answer says which it is.
		for o := range c.ListObjects(cctx, cfg.Bucket, minio.ListObjectsOptions{MaxKeys: 1}) {
			err = o.Err
			break
		}
		ok = err == nil
	}
	if err != nil || !ok {
		return nil, bucketError(cfg.Bucket, endpoint, err)
	}
	return s, nil
}

// bucketError says why the bucket could not be opened and what to do:
// create a missing bucket, check refused credentials.
func bucketError(bucket, endpoint string, err error) error {
	resp := minio.ToErrorResponse(err)
	switch {
	case err == nil, resp.Code == minio.NoSuchBucket:
		return fmt.Errorf("S3 bucket %q at %s does not exist: create it first", bucket, endpoint)
	case resp.StatusCode == http.StatusForbidden, refusedKeyCodes[resp.Code]:
		why := resp.Message
		if why == "" {
			why = resp.Code
		}
		return fmt.Errorf("S3 bucket %q at %s: the server refused the credentials (%s): check %s and %s (or artifacts_s3.access_key and secret_key in config.yaml), and that they may list the bucket",
			bucket, endpoint, strings.TrimSuffix(why, "."), EnvAccessKey, EnvSecretKey)
	}
	return fmt.Errorf("S3 bucket %q at %s: %w", bucket, endpoint, err)
}

// refusedKeyCodes are the S3 error codes of credentials the server does
// not accept (XAdminUserNotFound: versitygw's unknown access key).
var refusedKeyCodes = map[string]bool{
	"AccessDenied": true, "InvalidAccessKeyId": true, "SignatureDoesNotMatch": true,
	"InvalidToken": true, "ExpiredToken": true, "XAdminUserNotFound": true,
}

// Location is s3://bucket/prefix.
func (s *S3) Location() string { return s.loc }

// object is the object name of key.
func (s *S3) object(key string) (string, error) {
	key, err := CheckKey(key)
	if err != nil {
		return "", err
	}
	return Join(s.prefix, key), nil
}

// Put uploads the body with its SHA-256 as metadata; a body that turns
// out not to match is removed again.
func (s *S3) Put(ctx context.Context, key string, r io.Reader, size int64, sum string) error {
	name, err := s.object(key)
	if err != nil {
		return err
	}
	if err := checkSum(sum); err != nil {
		return err
	}
	cr := newCheckedReader(r, size, sum)
	_, err = s.c.PutObject(ctx, s.bucket, name, cr, size, minio.PutObjectOptions{
		ContentType:  "application/octet-stream",
		UserMetadata: map[string]string{metaSHA256: strings.ToLower(sum)},
	})
	if err == nil {
		err = cr.verify()
		if err != nil {
			s.c.RemoveObject(context.WithoutCancel(ctx), s.bucket, name, minio.RemoveObjectOptions{})
		}
	}
	if err != nil {
		return fmt.Errorf("put blob %s in %s: %w", key, s.loc, err)
	}
	return nil
}

// Get opens the object (a seekable reader issuing ranged requests).
func (s *S3) Get(ctx context.Context, key string) (io.ReadSeekCloser, Info, error) {
	info, err := s.Stat(ctx, key)
	if err != nil {
		return nil, Info{}, err
	}
	name, _ := s.object(info.Key)
	obj, err := s.c.GetObject(ctx, s.bucket, name, minio.GetObjectOptions{})
	if err != nil {
		return nil, Info{}, fmt.Errorf("get blob %s from %s: %w", key, s.loc, s.mapErr(err))
	}
	return obj, info, nil
}

// Stat asks for the object's metadata.
func (s *S3) Stat(ctx context.Context, key string) (Info, error) {
	name, err := s.object(key)
	if err != nil {
		return Info{}, err
	}
	oi, err := s.c.StatObject(ctx, s.bucket, name, minio.StatObjectOptions{})
	if err != nil {
		return Info{}, fmt.Errorf("stat blob %s in %s: %w", key, s.loc, s.mapErr(err))
	}
	return Info{Key: strings.TrimPrefix(name, s.prefix+"/"), Size: oi.Size, SHA256: oi.UserMetadata["Sha256"], Modified: oi.LastModified}, nil
}

// List lists the objects under prefix (SHA256 left empty).
func (s *S3) List(ctx context.Context, prefix string) ([]Info, error) {
	p := ""
	if prefix = strings.Trim(prefix, "/"); prefix != "" {
		var err error
		if p, err = s.object(prefix); err != nil {
			return nil, err
		}
	} else {
		p = s.prefix
	}
	if p != "" {
		p += "/"
	}
	var out []Info
	for oi := range s.c.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: p, Recursive: true}) {
		if oi.Err != nil {
			return nil, fmt.Errorf("list blobs under %q in %s: %w", prefix, s.loc, oi.Err)
		}
		key := oi.Key
		if s.prefix != "" {
			key = strings.TrimPrefix(key, s.prefix+"/")
		}
		if _, err := CheckKey(key); err != nil || strings.HasSuffix(oi.Key, "/") {
			continue // not an object Maestro wrote (a directory marker)
		}
		out = append(out, Info{Key: key, Size: oi.Size, Modified: oi.LastModified})
	}
	return out, nil
}

// Delete removes the object.
func (s *S3) Delete(ctx context.Context, key string) error {
	name, err := s.object(key)
	if err != nil {
		return err
	}
	if err := s.c.RemoveObject(ctx, s.bucket, name, minio.RemoveObjectOptions{}); err != nil {
		if err = s.mapErr(err); !IsNotExist(err) {
			return fmt.Errorf("delete blob %s from %s: %w", key, s.loc, err)
		}
	}
	return nil
}

// mapErr turns a missing key's error into one matching ErrNotExist.
func (s *S3) mapErr(err error) error {
	switch minio.ToErrorResponse(err).Code {
	case minio.NoSuchKey, "NotFound":
		return fmt.Errorf("%w (%v)", ErrNotExist, err)
	}
	return err
}

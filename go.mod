module github.com/maestro-run/maestro

go 1.26.8

require github.com/google/jsonschema-go v0.4.3

require (
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	go.yaml.in/yaml/v4 v4.0.0 // indirect
	mvdan.cc/sh/v3 v3.14.1 // indirect
)

// Package compose holds the docker compose deployment (compose.yaml and its
// Prometheus and Grafana configuration); its test validates compose.yaml with
// compose-go v2, the loader of `docker compose` v2.
package compose

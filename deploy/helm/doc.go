// Package helm holds the test that keeps switchyard's Helm chart
// (deploy/helm/switchyard) and the plain manifests of deploy/ the same:
// the chart with default values renders deploy/'s objects. The chart
// itself is YAML; this package has no code.
package helm

// Package install tests how the operator is installed, observed and used by a platform team:
// the Helm chart (dist/chart) and dist/install.yaml rendered and applied to a real
// kube-apiserver (envtest), with the real kube-controller-manager's ClusterRole aggregation, so
// that a namespace editor creates VacuumPolicies through the aggregated roles; and the
// manager's metrics endpoint, its alerts and its names checked with promtool.
package install

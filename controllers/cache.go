package controllers

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The manager's cache. It watches VacuumPolicies, VacuumRuns and the runner pods, and nothing
// else: the pod informer is restricted by label to the pods the operator makes, so a big
// cluster's pods cost the manager no memory, and Secrets are never cached (reads of the key
// go to the API server). Reads that must see pods of other owners (a quiesced app's pods)
// use the uncached APIReader.
const (
	// LabelManagedBy marks every runner pod; the pod cache holds only pods with
	// LabelManagedBy=ManagedBy.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedBy is the operator's value of LabelManagedBy.
	ManagedBy = "vacuum-operator"
)

// CacheOptions is the manager's cache configuration: pods only with the operator's label and,
// when namespaces are given, only those namespaces (a namespaced install, whose RBAC grants
// nothing elsewhere).
func CacheOptions(namespaces []string) cache.Options {
	opts := cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}: {Label: labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedBy})},
	}}
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return opts
}

package main

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// secretsOnly keeps Secrets out of the manager's cache: a cached read would start a Secret
// informer, which needs list and watch on every Secret, and the manager has neither.
var secretsOnly = []client.Object{&corev1.Secret{}}

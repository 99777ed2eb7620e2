// Package v1alpha1 holds the vacuum.vacuumops.io/v1alpha1 API: VacuumPolicy (what to clean,
// how gently, how wide, when) and VacuumRun (one execution of it, with its live status).
//
// The *_types.go files are declarative: fields, their godoc (which becomes `kubectl explain`
// text) and their markers (defaults, ranges, CEL rules). Behaviour lives in *_funcs.go.
// No floats appear in the API: sizes and rates are quantities or integers, durations are
// duration strings, and rates are also kept as human strings for printing.
//
// +kubebuilder:object:generate=true
// +groupName=vacuum.vacuumops.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "vacuum.vacuumops.io", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// addKnownTypes registers the package's types and the meta types (ListOptions and the like)
// under GroupVersion.
func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&VacuumPolicy{}, &VacuumPolicyList{},
		&VacuumRun{}, &VacuumRunList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

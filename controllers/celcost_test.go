package controllers

import (
	"context"
	"os"
	"testing"

	apiextensions "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// runValidator compiles the VacuumRun CRD's x-kubernetes-validations rules as kube-apiserver
// does (apiextensions-apiserver's CEL validator over the structural schema).
func runValidator(tb testing.TB) (*cel.Validator, *structuralschema.Structural) {
	tb.Helper()
	b, err := os.ReadFile("../config/crd/bases/vacuum.vacuumops.io_vacuumruns.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(b, &crd); err != nil {
		tb.Fatal(err)
	}
	var props apiextensions.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(
		crd.Spec.Versions[0].Schema.OpenAPIV3Schema, &props, nil); err != nil {
		tb.Fatal(err)
	}
	ss, err := structuralschema.NewStructural(&props)
	if err != nil {
		tb.Fatal(err)
	}
	return cel.NewValidator(ss, true, celconfig.PerCallLimit), ss
}

// fleetRunWrite is a status write of the kind the fleet makes most: a run as a policy makes
// it, before and after its pod's record.
func fleetRunWrite(tb testing.TB) (obj, old map[string]any) {
	tb.Helper()
	run := &vacuumv1alpha1.VacuumRun{
		TypeMeta: metav1.TypeMeta{APIVersion: vacuumv1alpha1.GroupVersion.String(), Kind: "VacuumRun"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "p-0001-29876543", Generation: 1,
			Labels:     map[string]string{vacuumv1alpha1.LabelPolicy: "p-0001"},
			Finalizers: []string{vacuumv1alpha1.FinalizerRun}},
	}
	run.Spec.Target.PersistentVolumeClaim = "data-0001"
	run.Spec.PolicyName = "p-0001"
	run.Spec.PodStartTimeoutSeconds = ptr.To(int64(600))
	before := run.DeepCopy()
	before.Status.TokenSecret = &vacuumv1alpha1.OwnedObject{Name: "p-0001-29876543-token-abcde", UID: "u1"}
	after := before.DeepCopy()
	after.Status.Attempts = 1
	after.Status.PodName = "p-0001-29876543-1"
	after.Status.MarkPending(1, vacuumv1alpha1.ReasonPodPending, "waiting for runner pod p-0001-29876543-1 to start: unscheduled")
	var err error
	if obj, err = runtime.DefaultUnstructuredConverter.ToUnstructured(after); err != nil {
		tb.Fatal(err)
	}
	if old, err = runtime.DefaultUnstructuredConverter.ToUnstructured(before); err != nil {
		tb.Fatal(err)
	}
	return obj, old
}

// BenchmarkRunStatusWriteCEL is the CEL cost kube-apiserver pays on each status write of a
// run: it evaluates every rule of the object, the spec's transition rules included.
func BenchmarkRunStatusWriteCEL(b *testing.B) {
	v, ss := runValidator(b)
	obj, old := fleetRunWrite(b)
	// As stored: with the CRD's defaults (the throttle's, among others).
	structuraldefaulting.Default(obj, ss)
	structuraldefaulting.Default(old, ss)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if errs, _ := v.Validate(ctx, nil, ss, obj, old, celconfig.RuntimeCELCostBudget); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}

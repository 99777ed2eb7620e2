package controllers

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// onlineSpec is a valid online spec (a server target) as the API server receives it.
func onlineSpec() map[string]any {
	return map[string]any{
		"target": map[string]any{"server": map[string]any{"service": "orders-db", "database": "postgres",
			"credentialsSecret": map[string]any{"name": "orders-db-vacuum"}}},
		"throttle": map[string]any{"costDelay": "2ms"},
	}
}

// onlinePolicy is a VacuumPolicy of onlineSpec, edited by edit.
func onlinePolicy(ns, name string, edit func(spec map[string]any)) *unstructured.Unstructured {
	u := policyObject(ns, name, nil)
	spec := onlineSpec()
	if edit != nil {
		edit(spec)
	}
	u.Object["spec"] = spec
	return u
}

func adaptiveField(v any) func(map[string]any) { return throttleField("adaptive", v) }

// longestQuantity is a string of n characters that parses as a quantity of value 1.
func longestQuantity(n int) string { return strings.Repeat("0", n-1) + "1" }

// largestAdaptiveSpec is an online spec at every bound that multiplies the CEL rules' cost:
// the most tables, the most overrides, each with every throttle field at its longest and
// both adaptive targets, and the run's adaptive throttle with every field.
func largestAdaptiveSpec() map[string]any {
	spec := onlineSpec()
	full := func() map[string]any {
		return map[string]any{
			"foregroundLatency": map[string]any{"percentilePerMille": 999, "target": strings.Repeat("0", 29) + "1ms"},
			"replicationLag":    map[string]any{"maxBytes": longestQuantity(32), "maxDelaySeconds": 86400},
		}
	}
	runAdaptive := full()
	runAdaptive["floorPerMille"] = 1000
	spec["throttle"] = map[string]any{"costDelay": "100ms", "costLimit": 10000, "maxReadBytesPerSecond": longestQuantity(32),
		"maxWriteBytesPerSecond": longestQuantity(32), "maxWALBytesPerSecond": longestQuantity(32), "adaptive": runAdaptive}
	tables := manyTables(256)
	overrides := make([]any, 64)
	for i := range overrides {
		overrides[i] = map[string]any{"table": tables[i], "throttle": map[string]any{
			"costDelay": strings.Repeat("0", 29) + "1ms", "costLimit": 10000, "pageHitCost": 10000, "pageMissCost": 10000, "pageDirtyCost": 10000,
			"maxReadBytesPerSecond": longestQuantity(32), "maxWriteBytesPerSecond": longestQuantity(32), "maxWALBytesPerSecond": longestQuantity(32),
			"adaptive": full()}}
	}
	target, ok := spec["target"].(map[string]any)
	Expect(ok).To(BeTrue(), "the online spec has a target map")
	target["tables"] = tables
	spec["tableOverrides"] = overrides
	return spec
}

var _ = Describe("throttle.adaptive validation", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("fills in the defaults: p99 and a floor of 100 per mille; overrides carry only the targets", func() {
		Expect(k8sClient.Create(suiteCtx, onlinePolicy(ns, "adaptive-defaults", func(spec map[string]any) {
			adaptiveField(map[string]any{"foregroundLatency": map[string]any{"target": "5ms"}})(spec)
			spec["tableOverrides"] = []any{map[string]any{"table": "events", "throttle": map[string]any{
				"adaptive": map[string]any{"replicationLag": map[string]any{"maxBytes": "16Mi"}}}}}
		}))).To(Succeed())
		p := getPolicy(ns, "adaptive-defaults")
		a := p.Spec.Throttle.Adaptive
		Expect(a).NotTo(BeNil())
		Expect(a.ForegroundLatency.Target.Duration.String()).To(Equal("5ms"))
		Expect(a.ForegroundLatency.PercentilePerMille).To(HaveValue(BeEquivalentTo(990)))
		Expect(a.FloorPerMille).To(HaveValue(BeEquivalentTo(100)))
		Expect(a.ReplicationLag).To(BeNil())
		o := p.Spec.TableOverrides[0].Throttle.Adaptive
		Expect(o.ReplicationLag.MaxBytes.Value()).To(BeEquivalentTo(16 << 20))
		Expect(o.ForegroundLatency).To(BeNil())
	})

	It("refuses a floor on a table override: overrides carry only the targets", func() {
		err := k8sClient.Create(suiteCtx, onlinePolicy(ns, "override-floor", field("tableOverrides", []any{map[string]any{"table": "t",
			"throttle": map[string]any{"adaptive": map[string]any{"floorPerMille": 10,
				"foregroundLatency": map[string]any{"target": "5ms"}}}}})), client.FieldValidation(metav1.FieldValidationStrict))
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring(`unknown field "spec.tableOverrides[0].throttle.adaptive.floorPerMille"`))
	})

	DescribeTable("refuses an invalid adaptive throttle with a message naming the field",
		func(edit func(map[string]any), offline bool, wantMsg string) {
			var u *unstructured.Unstructured
			if offline {
				u = policyObject(ns, "bad-adaptive", edit)
			} else {
				u = onlinePolicy(ns, "bad-adaptive", edit)
			}
			err := k8sClient.Create(suiteCtx, u, client.FieldValidation(metav1.FieldValidationStrict))
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring(wantMsg))
		},
		Entry("no target at all", adaptiveField(map[string]any{"floorPerMille": 100}), false,
			"throttle.adaptive must set foregroundLatency, replicationLag or both"),
		Entry("percentile under 500", adaptiveField(map[string]any{"foregroundLatency": map[string]any{"target": "5ms", "percentilePerMille": 499}}), false,
			"spec.throttle.adaptive.foregroundLatency.percentilePerMille in body should be greater than or equal to 500"),
		Entry("percentile 1000", adaptiveField(map[string]any{"foregroundLatency": map[string]any{"target": "5ms", "percentilePerMille": 1000}}), false,
			"spec.throttle.adaptive.foregroundLatency.percentilePerMille in body should be less than or equal to 999"),
		Entry("latency target 0", adaptiveField(map[string]any{"foregroundLatency": map[string]any{"target": "0s"}}), false,
			"throttle.adaptive.foregroundLatency.target must be a duration above 0 and at most 1h"),
		Entry("latency target missing", adaptiveField(map[string]any{"foregroundLatency": map[string]any{}}), false,
			"spec.throttle.adaptive.foregroundLatency.target: Required value"),
		Entry("lag with neither bound", adaptiveField(map[string]any{"replicationLag": map[string]any{}}), false,
			"throttle.adaptive.replicationLag must set maxBytes, maxDelaySeconds or both"),
		Entry("lag bytes 0", adaptiveField(map[string]any{"replicationLag": map[string]any{"maxBytes": "0"}}), false,
			"throttle.adaptive.replicationLag.maxBytes must be a whole number of bytes above 0"),
		Entry("lag bytes not a quantity", adaptiveField(map[string]any{"replicationLag": map[string]any{"maxBytes": "lots"}}), false,
			"throttle.adaptive.replicationLag.maxBytes must be a whole number of bytes above 0"),
		Entry("lag seconds 0", adaptiveField(map[string]any{"replicationLag": map[string]any{"maxDelaySeconds": 0}}), false,
			"spec.throttle.adaptive.replicationLag.maxDelaySeconds in body should be greater than or equal to 1"),
		Entry("floor 0", adaptiveField(map[string]any{"floorPerMille": 0, "foregroundLatency": map[string]any{"target": "5ms"}}), false,
			"spec.throttle.adaptive.floorPerMille in body should be greater than or equal to 1"),
		Entry("floor over 1000", adaptiveField(map[string]any{"floorPerMille": 1001, "foregroundLatency": map[string]any{"target": "5ms"}}), false,
			"spec.throttle.adaptive.floorPerMille in body should be less than or equal to 1000"),
		Entry("no ceiling to scale", func(spec map[string]any) {
			spec["throttle"] = map[string]any{"costDelay": "0s", "adaptive": map[string]any{"foregroundLatency": map[string]any{"target": "5ms"}}}
		}, false, "throttle.adaptive needs a static ceiling to scale: costDelay above 0 or a max*BytesPerSecond"),
		Entry("an override with no target", field("tableOverrides", []any{map[string]any{"table": "t",
			"throttle": map[string]any{"adaptive": map[string]any{}}}}), false,
			"tableOverrides throttle.adaptive must set foregroundLatency, replicationLag or both"),
		Entry("an offline run", adaptiveField(map[string]any{"foregroundLatency": map[string]any{"target": "5ms"}}), true,
			"spec.throttle.adaptive needs target.server: an offline run has no foreground or standby to adapt to"),
		Entry("an offline run's override", field("tableOverrides", []any{map[string]any{"table": "t",
			"throttle": map[string]any{"adaptive": map[string]any{"foregroundLatency": map[string]any{"target": "5ms"}}}}}), true,
			"spec.tableOverrides[].throttle.adaptive needs target.server: an offline run has no foreground or standby to adapt to"),
	)

	It("refuses adaptive on an offline VacuumRun as on a policy", func() {
		run := &vacuumv1alpha1.VacuumRun{}
		run.Name, run.Namespace = "offline-adaptive", ns
		run.Spec.Target.PersistentVolumeClaim = "orders-data"
		run.Spec.Throttle.Adaptive = &vacuumv1alpha1.AdaptiveThrottle{ReplicationLag: &vacuumv1alpha1.ReplicationLagTarget{MaxDelaySeconds: new(int32(5))}}
		err := k8sClient.Create(suiteCtx, run)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("spec.throttle.adaptive needs target.server"))
	})

	// The API server refuses at CRD creation any CRD whose rules' estimated cost, at the
	// largest object its bounds allow, is over the per-rule or the whole-schema budget: the
	// suite's CRDs were created, so they are within it. This spec applies that largest
	// object (and updates it, so the transition rules run) to both kinds, then shows the
	// check is live and what margin there is: the same CRD with tableOverrides allowed
	// 100 times as many entries is still accepted, and with 100,000 times it is refused,
	// with the API server's estimate of how far over the budget it is.
	It("accepts the largest allowed object on both kinds, and the CRD's CEL cost is within the API server's budget", func() {
		u := onlinePolicy(ns, "largest", nil)
		u.Object["spec"] = largestAdaptiveSpec()
		Expect(k8sClient.Create(suiteCtx, u)).To(Succeed())
		p := getPolicy(ns, "largest")
		Expect(p.Spec.TableOverrides).To(HaveLen(64))
		Expect(p.Spec.TableOverrides[63].Throttle.Adaptive.ReplicationLag.MaxDelaySeconds).To(HaveValue(BeEquivalentTo(86400)))
		p.Spec.Throttle.Adaptive.FloorPerMille = new(int32(1))
		Expect(k8sClient.Update(suiteCtx, p)).To(Succeed())

		run := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "vacuum.vacuumops.io/v1alpha1", "kind": "VacuumRun",
			"metadata": map[string]any{"name": "largest", "namespace": ns},
			"spec":     largestAdaptiveSpec(),
		}}
		Expect(k8sClient.Create(suiteCtx, run)).To(Succeed())
		// A live change of the run's targets (throttle is mutable): every transition rule runs.
		Expect(k8sClient.Patch(suiteCtx, run, client.RawPatch(types.MergePatchType,
			[]byte(`{"spec":{"throttle":{"adaptive":{"foregroundLatency":{"target":"7ms"}}}}}`)))).To(Succeed())
		var r vacuumv1alpha1.VacuumRun
		Expect(k8sClient.Get(suiteCtx, key(ns, "largest"), &r)).To(Succeed())
		Expect(r.Spec.Throttle.Adaptive.ForegroundLatency.Target.Duration.String()).To(Equal("7ms"))

		for _, tc := range []struct {
			factor int64
			refuse bool
		}{{100, false}, {100000, true}} {
			crd := scaledRunCRD(tc.factor)
			err := k8sClient.Create(suiteCtx, crd)
			if err == nil {
				DeferCleanup(func() { Expect(k8sClient.Delete(suiteCtx, crd)).To(Succeed()) })
			}
			if !tc.refuse {
				Expect(err).NotTo(HaveOccurred(), "the VacuumRun CRD with %d times the table overrides", tc.factor)
				continue
			}
			Expect(err).To(HaveOccurred(), "the VacuumRun CRD with %d times the table overrides", tc.factor)
			Expect(err.Error()).To(ContainSubstring("estimated rule cost"))
			for _, line := range strings.Split(err.Error(), ", ") {
				if strings.Contains(line, "exceeds budget by factor") || strings.Contains(line, "exceeding") {
					fmt.Fprintf(GinkgoWriter, "the API server on %d times the overrides: %s\n", tc.factor, line)
				}
			}
		}
	})
})

// scaledRunCRD is the VacuumRun CRD under another group (so it installs beside the real
// one) with tableOverrides' maxItems multiplied by factor.
// It is unstructured: the suite's scheme has no apiextensions types.
func scaledRunCRD(factor int64) *unstructured.Unstructured {
	b, err := os.ReadFile(filepath.Join("..", "config", "crd", "bases", "vacuum.vacuumops.io_vacuumruns.yaml"))
	Expect(err).NotTo(HaveOccurred())
	crd := &apiextensionsv1.CustomResourceDefinition{}
	Expect(yaml.Unmarshal(b, crd)).To(Succeed())
	group := fmt.Sprintf("cost%d.vacuumops.io", factor)
	crd.Name, crd.Spec.Group = crd.Spec.Names.Plural+"."+group, group
	crd.ResourceVersion = ""
	for i := range crd.Spec.Versions {
		spec := crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"]
		o := spec.Properties["tableOverrides"]
		Expect(o.MaxItems).NotTo(BeNil())
		o.MaxItems = new(*o.MaxItems * factor)
		spec.Properties["tableOverrides"] = o
		crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
	Expect(err).NotTo(HaveOccurred())
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion("apiextensions.k8s.io/v1")
	u.SetKind("CustomResourceDefinition")
	return u
}

package controllers

import (
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// policyObject is a valid VacuumPolicy as the API server receives it; edit breaks it.
func policyObject(ns, name string, edit func(spec map[string]any)) *unstructured.Unstructured {
	spec := map[string]any{
		"target":   map[string]any{"persistentVolumeClaim": "orders-data"},
		"throttle": map[string]any{"costDelay": "2ms"},
	}
	if edit != nil {
		edit(spec)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "vacuum.vacuumops.io/v1alpha1", "kind": "VacuumPolicy",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     spec,
	}}
	return u
}

func throttleField(key string, v any) func(map[string]any) {
	return func(spec map[string]any) {
		throttle, ok := spec["throttle"].(map[string]any)
		Expect(ok).To(BeTrue(), "the valid policy has a throttle map")
		throttle[key] = v
	}
}

// override sets one throttle field of a single table override.
func override(key string, v any) func(map[string]any) {
	return field("tableOverrides", []any{map[string]any{"table": "events", "throttle": map[string]any{key: v}}})
}

func field(key string, v any) func(map[string]any) {
	return func(spec map[string]any) { spec[key] = v }
}

var _ = Describe("CRD validation", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("accepts every sample in config/samples", func() {
		files, err := filepath.Glob(filepath.Join("..", "config", "samples", "vacuum_*.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(files).NotTo(BeEmpty())
		for _, f := range files {
			b, err := os.ReadFile(f)
			Expect(err).NotTo(HaveOccurred())
			u := &unstructured.Unstructured{}
			Expect(yaml.Unmarshal(b, &u.Object)).To(Succeed(), f)
			u.SetNamespace(ns)
			Expect(k8sClient.Create(suiteCtx, u)).To(Succeed(), "sample %s", f)
		}
	})

	It("accepts the online samples' server, Secrets and load generator, and the primary and standby pair", func() {
		for _, f := range []string{"engine_server.yaml", "load_generator.yaml", "engine_server_replication.yaml"} {
			for _, d := range sampleDocs(GinkgoT(), f) {
				u := &unstructured.Unstructured{}
				Expect(yaml.Unmarshal(d, &u.Object)).To(Succeed(), f)
				u.SetNamespace(ns)
				Expect(k8sClient.Create(suiteCtx, u)).To(Succeed(), "%s %s in %s", u.GetKind(), u.GetName(), f)
			}
		}
	})

	It("fills in the documented defaults, the same as the runner's", func() {
		Expect(k8sClient.Create(suiteCtx, policyObject(ns, "defaults", func(spec map[string]any) { delete(spec, "throttle") }))).To(Succeed())
		var p vacuumv1alpha1.VacuumPolicy
		Expect(k8sClient.Get(suiteCtx, key(ns, "defaults"), &p)).To(Succeed())
		s := p.Spec
		Expect(s.Mode).To(Equal(vacuumv1alpha1.VacuumModeLazy))
		Expect(s.Throttle.CostDelay.Duration).To(Equal(runnerwire.DefaultCostDelay))
		Expect(int64(*s.Throttle.CostLimit)).To(BeEquivalentTo(runnerwire.DefaultCostLimit))
		Expect([]int32{*s.Throttle.PageHitCost, *s.Throttle.PageMissCost, *s.Throttle.PageDirtyCost}).To(Equal([]int32{1, 2, 20}))
		Expect(s.Throttle.MaxReadBytesPerSecond).To(BeNil())
		// ringSize, bufferPoolSize and truncate have no CRD default: theirs depends on the
		// target's form, and the controller applies it (runSpecFor).
		Expect(s.RingSize).To(BeNil())
		Expect(s.BufferPoolSize).To(BeNil())
		Expect(s.Truncate).To(BeNil())
		rs := runSpecFor(&s.VacuumSpec)
		Expect(rs.RingSize.Value()).To(BeEquivalentTo(runnerwire.DefaultRingSize))
		Expect(rs.BufferPoolSize.Value()).To(BeEquivalentTo(runnerwire.DefaultBufferPoolSize))
		Expect(*rs.Truncate).To(BeTrue())
		Expect(s.MaintenanceWorkMem.Value()).To(BeEquivalentTo(runnerwire.DefaultMaintenanceWorkMem))
		Expect(s.Parallelism).To(BeEquivalentTo(runnerwire.DefaultParallelism))
		Expect(s.IndexWorkers).To(BeZero())
		Expect(s.MinDeadTuplePercent).To(BeZero())
		Expect(s.BackoffLimit).To(BeEquivalentTo(2))
		Expect(s.ActiveDeadlineSeconds).To(BeNil())
		Expect(s.Schedule).To(BeEmpty())
		Expect(s.TimeZone).To(Equal("UTC"))
		Expect(s.StartingDeadlineSeconds).To(BeNil())
		Expect(s.Suspend).To(BeFalse())
		Expect(s.ConcurrencyPolicy).To(Equal(vacuumv1alpha1.ForbidConcurrent))
		Expect([]int32{*s.SuccessfulRunsHistoryLimit, *s.FailedRunsHistoryLimit}).To(Equal([]int32{3, 3}))
	})

	It("gives a Go client that leaves the history limits out 3 and 3, and keeps an explicit 0", func() {
		unset := &vacuumv1alpha1.VacuumPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "typed"}}
		unset.Spec.Target.PersistentVolumeClaim = "orders-data"
		Expect(k8sClient.Create(suiteCtx, unset)).To(Succeed())
		got := getPolicy(ns, "typed")
		Expect(got.Spec.SuccessfulRunsHistoryLimit).To(HaveValue(BeEquivalentTo(3)))
		Expect(got.Spec.FailedRunsHistoryLimit).To(HaveValue(BeEquivalentTo(3)))

		zero := &vacuumv1alpha1.VacuumPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keep-none"}}
		zero.Spec.Target.PersistentVolumeClaim = "orders-data"
		zero.Spec.SuccessfulRunsHistoryLimit, zero.Spec.FailedRunsHistoryLimit = ptr.To(int32(0)), ptr.To(int32(0))
		Expect(k8sClient.Create(suiteCtx, zero)).To(Succeed())
		got = getPolicy(ns, "keep-none")
		Expect(got.Spec.SuccessfulRunsHistoryLimit).To(HaveValue(BeZero()))
		Expect(got.Spec.FailedRunsHistoryLimit).To(HaveValue(BeZero()))
	})

	It("gives a table override no defaults of its own, and accepts its byte rates as quantities", func() {
		Expect(k8sClient.Create(suiteCtx, policyObject(ns, "override", field("tableOverrides",
			[]any{map[string]any{"table": "events", "throttle": map[string]any{"costDelay": "10ms",
				"maxReadBytesPerSecond": "10Mi", "maxWriteBytesPerSecond": 0, "maxWALBytesPerSecond": "1e6"}}})))).To(Succeed())
		var p vacuumv1alpha1.VacuumPolicy
		Expect(k8sClient.Get(suiteCtx, key(ns, "override"), &p)).To(Succeed())
		o := p.Spec.TableOverrides[0].Throttle
		Expect(o.CostDelay.Duration.String()).To(Equal("10ms"))
		Expect(o.CostLimit).To(BeNil())
		Expect(o.PageDirtyCost).To(BeNil())
		Expect(o.MaxReadBytesPerSecond.Value()).To(BeEquivalentTo(10 << 20))
		Expect(o.MaxWriteBytesPerSecond.IsZero()).To(BeTrue())
		Expect(o.MaxWALBytesPerSecond.Value()).To(BeEquivalentTo(1000000))
	})

	DescribeTable("rejects an invalid policy with a message naming the field and its range",
		func(edit func(map[string]any), name string, wantMsg string) {
			if name == "" {
				name = "bad"
			}
			// Strict field validation, as kubectl apply does by default.
			err := k8sClient.Create(suiteCtx, policyObject(ns, name, edit),
				client.FieldValidation(metav1.FieldValidationStrict))
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring(wantMsg))
		},
		Entry("costDelay over 100ms", throttleField("costDelay", "200ms"), "", "throttle.costDelay must be a duration between 0 and 100ms"),
		Entry("negative costDelay", throttleField("costDelay", "-1ms"), "", "throttle.costDelay must be a duration between 0 and 100ms"),
		Entry("costLimit 0", throttleField("costLimit", 0), "", "spec.throttle.costLimit in body should be greater than or equal to 1"),
		Entry("costLimit over 10000", throttleField("costLimit", 10001), "", "spec.throttle.costLimit in body should be less than or equal to 10000"),
		Entry("negative page dirty cost", throttleField("pageDirtyCost", -1), "", "spec.throttle.pageDirtyCost in body should be greater than or equal to 0"),
		Entry("negative read rate", throttleField("maxReadBytesPerSecond", "-1Mi"), "", "throttle.maxReadBytesPerSecond must be a whole number of bytes per second"),
		Entry("fractional WAL rate", throttleField("maxWALBytesPerSecond", "0.5"), "", "throttle.maxWALBytesPerSecond must be a whole number of bytes per second"),
		Entry("ringSize under 128Ki", field("ringSize", "64Ki"), "", "ringSize must be 0 or between 128Ki and 16Gi"),
		Entry("ringSize over 16Gi", field("ringSize", "17Gi"), "", "ringSize must be 0 or between 128Ki and 16Gi"),
		Entry("bufferPoolSize under 1Mi", field("bufferPoolSize", "100Ki"), "", "bufferPoolSize must be between 1Mi and 1Ti"),
		Entry("maintenanceWorkMem over 1Ti", field("maintenanceWorkMem", "2Ti"), "", "maintenanceWorkMem must be between 1Mi and 1Ti"),
		Entry("parallelism 0", field("parallelism", 0), "", "spec.parallelism in body should be greater than or equal to 1"),
		Entry("parallelism 65", field("parallelism", 65), "", "spec.parallelism in body should be less than or equal to 64"),
		Entry("indexWorkers 65", field("indexWorkers", 65), "", "spec.indexWorkers in body should be less than or equal to 64"),
		Entry("minDeadTuplePercent 101", field("minDeadTuplePercent", 101), "", "spec.minDeadTuplePercent in body should be less than or equal to 100"),
		Entry("backoffLimit 11", field("backoffLimit", 11), "", "spec.backoffLimit in body should be less than or equal to 10"),
		Entry("history limit -1", field("successfulRunsHistoryLimit", -1), "", "spec.successfulRunsHistoryLimit in body should be greater than or equal to 0"),
		Entry("unknown mode", field("mode", "Analyze"), "", `spec.mode: Unsupported value: "Analyze": supported values: "Lazy", "Full"`),
		Entry("unknown concurrency policy", field("concurrencyPolicy", "Allow"), "", `spec.concurrencyPolicy: Unsupported value: "Allow"`),
		Entry("neither a volume claim nor a server", field("target", map[string]any{}), "", "target must set exactly one of persistentVolumeClaim (an offline run) and server (an online run)"),
		Entry("subPath escaping the volume", field("target", map[string]any{"persistentVolumeClaim": "d", "subPath": "a/../../etc"}), "",
			"target.subPath must be a relative path without '..'"),
		Entry("too many tables", field("target", map[string]any{"persistentVolumeClaim": "d", "tables": manyTables(257)}), "",
			"spec.target.tables: Too many: 257: must have at most 256 items"),
		Entry("quiesce of a DaemonSet", field("target", map[string]any{"persistentVolumeClaim": "d",
			"quiesce": map[string]any{"kind": "DaemonSet", "name": "db"}}), "", `spec.target.quiesce.kind: Unsupported value: "DaemonSet"`),
		Entry("override costDelay over 100ms", field("tableOverrides", []any{map[string]any{"table": "t",
			"throttle": map[string]any{"costDelay": "1s"}}}), "", "tableOverrides throttle.costDelay must be a duration between 0 and 100ms"),
		Entry("negative override read rate", override("maxReadBytesPerSecond", "-1Mi"), "",
			"tableOverrides throttle.maxReadBytesPerSecond must be a whole number of bytes per second, 0 (no limit) or more"),
		Entry("fractional override write rate", override("maxWriteBytesPerSecond", "100m"), "",
			"tableOverrides throttle.maxWriteBytesPerSecond must be a whole number of bytes per second, 0 (no limit) or more"),
		Entry("fractional override WAL rate", override("maxWALBytesPerSecond", "0.5"), "",
			"tableOverrides throttle.maxWALBytesPerSecond must be a whole number of bytes per second, 0 (no limit) or more"),
		Entry("override rate not a quantity", override("maxWALBytesPerSecond", "fast"), "",
			"tableOverrides throttle.maxWALBytesPerSecond must be a whole number of bytes per second, 0 (no limit) or more"),
		Entry("override rate too long", override("maxReadBytesPerSecond", strings.Repeat("1", 33)), "",
			"spec.tableOverrides[0].throttle.maxReadBytesPerSecond: Too long: may not be more than 32 bytes"),
		Entry("negative override rate as a plain integer", override("maxReadBytesPerSecond", -5), "",
			"tableOverrides throttle.maxReadBytesPerSecond must be a whole number of bytes per second, 0 (no limit) or more"),
		Entry("root UID", field("runner", map[string]any{"podSecurityContext": map[string]any{"runAsUser": 0}}), "",
			"spec.runner.podSecurityContext.runAsUser in body should be greater than or equal to 1"),
		Entry("UID over 2^31-1", field("runner", map[string]any{"podSecurityContext": map[string]any{"runAsUser": int64(2147483648)}}), "",
			"podSecurityContext.runAsUser must be at most 2147483647"),
		Entry("GID over 2^31-1", field("runner", map[string]any{"podSecurityContext": map[string]any{"runAsGroup": int64(4294967296)}}), "",
			"podSecurityContext.runAsGroup must be at most 2147483647"),
		Entry("fsGroup over 2^31-1", field("runner", map[string]any{"podSecurityContext": map[string]any{"fsGroup": int64(2147483648)}}), "",
			"podSecurityContext.fsGroup must be at most 2147483647"),
		Entry("supplemental group over 2^31-1", field("runner", map[string]any{"podSecurityContext": map[string]any{
			"supplementalGroups": []any{int64(1000), int64(2147483648)}}}), "",
			"podSecurityContext.supplementalGroups must each be at most 2147483647"),
		Entry("podStartTimeoutSeconds 0", field("podStartTimeoutSeconds", 0), "",
			"spec.podStartTimeoutSeconds in body should be greater than or equal to 1"),
		Entry("a pod security field the operator owns", field("runner", map[string]any{"podSecurityContext": map[string]any{"runAsNonRoot": false}}), "",
			`unknown field "spec.runner.podSecurityContext.runAsNonRoot"`),
		Entry("policy name over 40 characters", nil, strings.Repeat("p", 41),
			"metadata.name of a VacuumPolicy must be at most 40 characters"),
	)

	It("accepts the largest UID and GID a pod takes, 2147483647", func() {
		largest := int64(2147483647)
		Expect(k8sClient.Create(suiteCtx, policyObject(ns, "max-ids", field("runner", map[string]any{"podSecurityContext": map[string]any{
			"runAsUser": largest, "runAsGroup": largest, "fsGroup": largest, "supplementalGroups": []any{largest}}})))).To(Succeed())
	})

	It("refuses to change the target volume claim", func() {
		Expect(k8sClient.Create(suiteCtx, policyObject(ns, "immutable", nil))).To(Succeed())
		var p vacuumv1alpha1.VacuumPolicy
		Expect(k8sClient.Get(suiteCtx, key(ns, "immutable"), &p)).To(Succeed())
		p.Spec.Target.PersistentVolumeClaim = "other-data"
		err := k8sClient.Update(suiteCtx, &p)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("target.persistentVolumeClaim is immutable"))
	})

	It("rejects a run name too long for its pod and Secret names", func() {
		run := &vacuumv1alpha1.VacuumRun{}
		run.Name, run.Namespace = strings.Repeat("r", 54), ns
		run.Spec.Target.PersistentVolumeClaim = "orders-data"
		err := k8sClient.Create(suiteCtx, run)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("metadata.name of a VacuumRun must be at most 53 characters"))
	})
})

func manyTables(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = "t" + strings.Repeat("x", i%50) + string(rune('a'+i%26)) + string(rune('a'+i/26))
	}
	return out
}

package e2ereal

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// runnerUID is the image's user (USER 65532:65532): the volume must be its to write.
const runnerUID = 65532

// bloat is one table `vacuum-runner bloat` makes.
type bloat struct {
	table        string
	rows         int
	deadFraction string
}

// volume is a data directory on the host, exposed as a local PersistentVolume pre-bound to a
// claim.
type volume struct {
	dir  string
	pvc  string
	ns   string
	dead map[string]int64 // dead tuples per table, from `stats --json` after bloating
}

// tableStats is one table of `vacuum-runner stats --json`.
type tableStats struct {
	Name       string `json:"name"`
	LiveTuples int64  `json:"liveTuples"`
	DeadTuples int64  `json:"deadTuples"`
}

// makeVolume bloats a fresh data directory under the volumes directory (E2E_REAL_VOLUMES), hands
// it to the runner's UID, and binds claim ns/pvc to it through a local PV on the node (at the path
// the node sees it: E2E_REAL_NODE_VOLUMES).
func makeVolume(ctx context.Context, ns, pvc string, tables ...bloat) volume {
	GinkgoHelper()
	v := volume{dir: filepath.Join(env.volumes, ns+"-"+pvc), pvc: pvc, ns: ns}
	Expect(os.MkdirAll(v.dir, 0o755)).To(Succeed())
	run(ctx, nil, env.runner, "init", "--data", v.dir)
	for _, t := range tables {
		run(ctx, nil, env.runner, "bloat", "--data", v.dir, "--table", t.table, "--rows", strconv.Itoa(t.rows),
			"--dead-fraction", t.deadFraction, "--indexes", "2")
	}
	v.dead = map[string]int64{}
	for _, s := range v.stats(ctx) {
		v.dead[s.Name] = s.DeadTuples
		Expect(s.DeadTuples).To(BeNumerically(">", 0), "bloat left no dead tuples in %s", s.Name)
	}
	v.giveToRunner()
	bindLocalVolume(ctx, ns, pvc)
	return v
}

// bindEmptyLocalVolume binds claim ns/pvc to a new empty directory owned by the image's user
// (as a StatefulSet's server finds a fresh volume).
func bindEmptyLocalVolume(ctx context.Context, ns, pvc string) {
	GinkgoHelper()
	dir := filepath.Join(env.volumes, ns+"-"+pvc)
	Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
	Expect(os.Chown(dir, runnerUID, runnerUID)).To(Succeed())
	bindLocalVolume(ctx, ns, pvc)
}

// bindLocalVolume binds claim ns/pvc to the host directory ns-pvc under the volumes
// directory through a local PV on the node (at the path the node sees it).
func bindLocalVolume(ctx context.Context, ns, pvc string) {
	GinkgoHelper()
	nodes := &corev1.NodeList{}
	Expect(k8sClient.List(ctx, nodes)).To(Succeed())
	Expect(nodes.Items).To(HaveLen(1))
	pvName := "e2e-real-" + ns + "-" + pvc
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              "e2e-real-local",
			PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: filepath.Join(env.nodeVols, ns+"-"+pvc)}},
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: pvc},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn,
					Values: []string{nodes.Items[0].Labels[corev1.LabelHostname]},
				}}}},
			}},
		},
	}
	Expect(k8sClient.Create(ctx, pv)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) {
		Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, pv))).To(Succeed())
	})
	storageClass := "e2e-real-local"
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pvc},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &storageClass,
			VolumeName:       pvName,
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			},
		},
	}
	Expect(k8sClient.Create(ctx, claim)).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(claim), claim)).To(Succeed())
		g.Expect(claim.Status.Phase).To(Equal(corev1.ClaimBound))
	}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed(), "the claim never bound to its local PV")
}

// giveToRunner makes every file of the volume the runner's (commands run on the host as root
// may have created files it could not open).
func (v volume) giveToRunner() {
	GinkgoHelper()
	Expect(filepath.WalkDir(v.dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, runnerUID, runnerUID)
	})).To(Succeed())
}

func (v volume) stats(ctx context.Context) []tableStats {
	GinkgoHelper()
	var out struct {
		Tables []tableStats `json:"tables"`
	}
	Expect(json.Unmarshal([]byte(run(ctx, nil, env.runner, "stats", "--data", v.dir, "--json")), &out)).To(Succeed())
	return out.Tables
}

func (v volume) totalDead() int64 {
	var n int64
	for _, d := range v.dead {
		n += d
	}
	return n
}

// expectClean asserts `vacuum-runner check` finds no problem and no table has dead tuples left.
func (v volume) expectClean(ctx context.Context) {
	GinkgoHelper()
	var check struct {
		OK       bool `json:"ok"`
		Problems []struct {
			File    string `json:"file"`
			Block   int64  `json:"block"`
			Message string `json:"message"`
		} `json:"problems"`
	}
	out := run(ctx, nil, env.runner, "check", "--data", v.dir, "--json")
	Expect(json.Unmarshal([]byte(out), &check)).To(Succeed())
	Expect(check.OK).To(BeTrue(), "vacuum-runner check found problems: %+v", check.Problems)
	for _, s := range v.stats(ctx) {
		Expect(s.DeadTuples).To(BeZero(), "table %s still has dead tuples", s.Name)
	}
	v.giveToRunner()
}

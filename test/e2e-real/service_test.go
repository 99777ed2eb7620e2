package e2ereal

import (
	"context"
	"fmt"
	"net"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// restrictedContainer is what the namespaces' PodSecurity "restricted" profile asks of a
// container of the image (whose user is the runner's).
func restrictedContainer(c corev1.Container) corev1.Container {
	c.Image, c.ImagePullPolicy = env.image, corev1.PullNever
	c.SecurityContext = &corev1.SecurityContext{
		RunAsNonRoot: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
		Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	return c
}

var _ = Describe("Services on the real cluster (kube-proxy, iptables mode)", func() {
	It("lets a pod reach the engine server by its Service's ClusterIP", func(ctx SpecContext) {
		ns := newNamespace(ctx, "e2e-real-svc")
		Expect(k8sClient.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "users"},
			StringData: map[string]string{"users": "app:app-secret\n", "password": "app-secret"},
		})).To(Succeed())
		secretVolume := corev1.Volume{Name: "users", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "users"}}}
		server := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db", Labels: map[string]string{"app": "db"}},
			Spec: corev1.PodSpec{
				Containers: []corev1.Container{restrictedContainer(corev1.Container{
					Name: "db", Command: []string{"/engine-server"},
					Args:  []string{"serve", "--init", "--data", "/data", "--listen", "0.0.0.0:5432", "--users-file", "/etc/users/users"},
					Ports: []corev1.ContainerPort{{Name: "postgres", ContainerPort: 5432}},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("postgres")}},
						PeriodSeconds: 1},
					VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "users", MountPath: "/etc/users"}},
				})},
				Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}, secretVolume},
			},
		}
		Expect(k8sClient.Create(ctx, server)).To(Succeed())
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "db"},
				Ports: []corev1.ServicePort{{Name: "postgres", Port: 5432, TargetPort: intstr.FromString("postgres")}}},
		}
		Expect(k8sClient.Create(ctx, svc)).To(Succeed())
		Expect(svc.Spec.ClusterIP).NotTo(BeEmpty())
		Eventually(func(g Gomega) {
			var p corev1.Pod
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(server), &p)).To(Succeed())
			ready := false
			for _, c := range p.Status.Conditions {
				ready = ready || c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
			}
			g.Expect(ready).To(BeTrue(), "server pod %s", p.Status.Phase)
		}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())

		// A Ready pod is in the Service's EndpointSlice at once, but kube-proxy writes its
		// rule for the ClusterIP up to a sync period later: the CI run of stop 33 lost that
		// race (its client pod dialled before the rule existed). The host cannot stand in for
		// a pod to wait for the rule (on the kind lane no rule of the node's is on the host),
		// so the spec does what the operator does with a runner: exit 3, busy or unreachable,
		// is retried; any other failure fails the spec.
		addr := net.JoinHostPort(svc.Spec.ClusterIP, "5432")
		By("a client pod runs an online vacuum of the server through " + addr)
		var logs string
		for attempt := 1; ; attempt++ {
			clientPod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("client-%d", attempt)},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{restrictedContainer(corev1.Container{
						Name: "client", Command: []string{"/vacuum-runner"},
						Args: []string{"vacuum", "--server", addr, "--database", "postgres",
							"--user", "app", "--password-file", "/etc/users/password", "--sslmode", "disable"},
						VolumeMounts: []corev1.VolumeMount{{Name: "users", MountPath: "/etc/users"}},
					})},
					Volumes: []corev1.Volume{secretVolume},
				},
			}
			Expect(k8sClient.Create(ctx, clientPod)).To(Succeed())
			var done corev1.Pod
			Eventually(func(g Gomega) {
				g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(clientPod), &done)).To(Succeed())
				g.Expect(done.Status.Phase).To(BeElementOf(corev1.PodSucceeded, corev1.PodFailed))
			}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
			logs, _ = tryRun(context.Background(), nil, env.kubectl, "--kubeconfig", env.kubeconfig, "-n", ns, "logs", clientPod.Name)
			if done.Status.Phase == corev1.PodSucceeded || attempt == 3 || clientExitCode(done) != runnerwire.ExitBusy {
				Expect(done.Status.Phase).To(Equal(corev1.PodSucceeded), "client attempt %d through the ClusterIP: %s", attempt, logs)
				break
			}
			GinkgoWriter.Printf("client attempt %d exited busy or unreachable (retried, as the operator does): %s\n", attempt, logs)
			time.Sleep(2 * time.Second)
		}
	})
})

// clientExitCode is the exit code of the pod's one container, or -1 when it has not
// terminated.
func clientExitCode(p corev1.Pod) int {
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			return int(t.ExitCode)
		}
	}
	return -1
}

package localnode

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
)

// heartbeatInterval is how often the Node's Ready condition is refreshed.
const heartbeatInterval = 20 * time.Second

// register creates (or takes over) the Node object and marks it Ready.
func (n *Node) register(ctx context.Context) error {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.cfg.NodeName, Labels: map[string]string{
			LabelLocalNode:           "true",
			"kubernetes.io/hostname": n.cfg.NodeName,
			"kubernetes.io/os":       runtime.GOOS,
			"kubernetes.io/arch":     runtime.GOARCH,
		}},
	}
	if !n.cfg.AllPods {
		// Keeps a real scheduler, should one ever run, from placing other pods here; the
		// local node binds the pods it selects itself.
		node.Spec.Taints = []corev1.Taint{{Key: LabelLocalNode, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	}
	if err := n.client.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("register node %s: %w", n.cfg.NodeName, err)
	}
	return n.writeNodeStatus(ctx)
}

// heartbeat refreshes the Ready condition until ctx ends.
func (n *Node) heartbeat(ctx context.Context) {
	t := time.NewTicker(heartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := n.writeNodeStatus(ctx); err != nil && ctx.Err() == nil {
				n.cfg.Log.Error(err, "node heartbeat")
			}
		}
	}
}

// writeNodeStatus sets the node's Ready condition, address, capacity and info.
func (n *Node) writeNodeStatus(ctx context.Context) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var node corev1.Node
		if err := n.reader.Get(ctx, types.NamespacedName{Name: n.cfg.NodeName}, &node); err != nil {
			return fmt.Errorf("get node %s: %w", n.cfg.NodeName, err)
		}
		now := metav1.Now()
		host, _ := os.Hostname()
		capacity := corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
			corev1.ResourceMemory: resource.MustParse("64Gi"),
			corev1.ResourcePods:   *resource.NewQuantity(253, resource.DecimalSI),
		}
		ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
			Reason: "LocalNodeReady", Message: "local dev node runs pods as local processes",
			LastHeartbeatTime: now, LastTransitionTime: now}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready.LastTransitionTime = c.LastTransitionTime
			}
		}
		node.Status.Conditions = []corev1.NodeCondition{ready}
		node.Status.Addresses = []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: "127.0.0.1"},
			{Type: corev1.NodeHostName, Address: host},
		}
		node.Status.Capacity = capacity
		node.Status.Allocatable = capacity
		node.Status.NodeInfo = corev1.NodeSystemInfo{OperatingSystem: runtime.GOOS, Architecture: runtime.GOARCH,
			KubeletVersion: "localnode", ContainerRuntimeVersion: "localnode://process"}
		if err := n.client.Status().Update(ctx, &node); err != nil {
			return fmt.Errorf("update status of node %s: %w", n.cfg.NodeName, err)
		}
		return nil
	})
}

package localnode

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vacuumops/vacuum-operator/internal/endpoints"
)

// serviceEnv is what a kubelet gives a pod with enableServiceLinks (the default): for each
// Service of its namespace, <NAME>_SERVICE_HOST, <NAME>_SERVICE_PORT and
// <NAME>_SERVICE_PORT_<PORT NAME>. A kubelet points them at the ClusterIP, which kube-proxy
// forwards; this node has no kube-proxy, so they point at one ready endpoint of the Service
// (from its EndpointSlices) and its target ports instead. A Service with no ready endpoint
// gets none, as one that does not exist yet (a kubelet also sets them only at the pod's
// start). Sorted by name, so a pod's environment does not depend on list order.
func (n *Node) serviceEnv(ctx context.Context, pod *corev1.Pod) ([][2]string, error) {
	if pod.Spec.EnableServiceLinks != nil && !*pod.Spec.EnableServiceLinks {
		return nil, nil
	}
	var svcs corev1.ServiceList
	if err := n.reader.List(ctx, &svcs, client.InNamespace(pod.Namespace)); err != nil {
		return nil, fmt.Errorf("list Services of %s: %w", pod.Namespace, err)
	}
	sort.Slice(svcs.Items, func(i, j int) bool { return svcs.Items[i].Name < svcs.Items[j].Name })
	var out [][2]string
	for _, svc := range svcs.Items {
		if len(svc.Spec.Ports) == 0 || svc.Spec.Type == corev1.ServiceTypeExternalName {
			continue
		}
		var eps discoveryv1.EndpointSliceList
		if err := n.reader.List(ctx, &eps, client.InNamespace(pod.Namespace),
			client.MatchingLabels{discoveryv1.LabelServiceName: svc.Name}); err != nil {
			return nil, fmt.Errorf("list EndpointSlices of Service %s/%s: %w", pod.Namespace, svc.Name, err)
		}
		prefix := strings.ToUpper(strings.ReplaceAll(svc.Name, "-", "_")) + "_SERVICE_"
		var host string
		var vars [][2]string
		for i, p := range svc.Spec.Ports {
			ip, target, ok := endpoints.Ready(eps.Items, p.Name)
			if !ok {
				continue
			}
			if host == "" {
				host = ip
			} else if ip != host {
				continue // one host per Service: a port served elsewhere is left out
			}
			port := strconv.Itoa(int(target))
			if i == 0 {
				vars = append(vars, [2]string{prefix + "PORT", port})
			}
			if p.Name != "" {
				vars = append(vars, [2]string{prefix + "PORT_" + strings.ToUpper(strings.ReplaceAll(p.Name, "-", "_")), port})
			}
		}
		if host == "" {
			continue
		}
		out = append(out, [2]string{prefix + "HOST", host})
		out = append(out, vars...)
	}
	return out, nil
}

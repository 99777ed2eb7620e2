package localnode

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// containerEnv resolves the container's env in order, as a kubelet does: literal values
// (with $(VAR) references to earlier variables expanded), fieldRef (downward API),
// secretKeyRef and configMapKeyRef. It returns the final map and the ordered list.
func (n *Node) containerEnv(ctx context.Context, pod *corev1.Pod, c *corev1.Container, podIP string) (map[string]string, [][2]string, error) {
	if len(c.EnvFrom) > 0 {
		return nil, nil, &podError{"Unsupported", "envFrom is not supported on the local node"}
	}
	m := map[string]string{}
	// The Service variables come first, so the container's own env may refer to them and
	// override them, as with a kubelet.
	list, err := n.serviceEnv(ctx, pod)
	if err != nil {
		return nil, nil, err
	}
	for _, kv := range list {
		m[kv[0]] = kv[1]
	}
	lookup := func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	for _, e := range c.Env {
		var v string
		switch {
		case e.ValueFrom == nil:
			v = expand(e.Value, lookup)
		case e.ValueFrom.FieldRef != nil:
			var err error
			if v, err = fieldValue(pod, podIP, e.ValueFrom.FieldRef.FieldPath, n.cfg.NodeName); err != nil {
				return nil, nil, &podError{"CreateContainerConfigError", fmt.Sprintf("env %s: %v", e.Name, err)}
			}
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			var err error
			if v, err = n.keyRef(ctx, pod.Namespace, &corev1.Secret{}, ref.Name, ref.Key, ref.Optional); err != nil {
				return nil, nil, err
			}
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			var err error
			if v, err = n.keyRef(ctx, pod.Namespace, &corev1.ConfigMap{}, ref.Name, ref.Key, ref.Optional); err != nil {
				return nil, nil, err
			}
		default:
			return nil, nil, &podError{"CreateContainerConfigError", fmt.Sprintf("env %s: only value, fieldRef, secretKeyRef and configMapKeyRef are supported on the local node", e.Name)}
		}
		m[e.Name] = v
		list = append(list, [2]string{e.Name, v})
	}
	return m, list, nil
}

// keyRef reads one key of a Secret or ConfigMap (obj, empty), waiting while it is missing
// unless optional.
func (n *Node) keyRef(ctx context.Context, ns string, obj client.Object, name, key string, optional *bool) (string, error) {
	opt := optional != nil && *optional
	err := n.reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		if opt {
			return "", nil
		}
		return "", &waitError{"CreateContainerConfigError", fmt.Sprintf("%s/%s not found", ns, name)}
	}
	if err != nil {
		return "", fmt.Errorf("get %s/%s: %w", ns, name, err)
	}
	var b []byte
	found := false
	switch o := obj.(type) {
	case *corev1.Secret:
		b, found = o.Data[key]
	case *corev1.ConfigMap:
		var s string
		s, found = o.Data[key]
		b = []byte(s)
	}
	if !found && !opt {
		return "", &waitError{"CreateContainerConfigError", fmt.Sprintf("%s/%s has no key %q", ns, name, key)}
	}
	return string(b), nil
}

// fieldValue is the downward-API value of a fieldRef path.
func fieldValue(pod *corev1.Pod, podIP, path, nodeName string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return nodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs":
		return podIP, nil
	case "status.hostIP", "status.hostIPs":
		return "127.0.0.1", nil
	}
	for prefix, m := range map[string]map[string]string{"metadata.labels": pod.Labels, "metadata.annotations": pod.Annotations} {
		if rest, ok := strings.CutPrefix(path, prefix+"['"); ok && strings.HasSuffix(rest, "']") {
			return m[strings.TrimSuffix(rest, "']")], nil
		}
	}
	return "", fmt.Errorf("fieldRef %q is not supported", path)
}

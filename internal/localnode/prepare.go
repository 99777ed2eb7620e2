package localnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
)

// waitError means the pod cannot start yet (a PVC not bound, a Secret not created): the
// node retries, showing the reason as the container's waiting state.
type waitError struct{ reason, message string }

func (e *waitError) Error() string { return e.reason + ": " + e.message }

// podError means the pod can never run here: it is marked Failed with this reason.
type podError struct{ reason, message string }

func (e *podError) Error() string { return e.reason + ": " + e.message }

// launch is everything needed to start a pod's process.
type launch struct {
	path     string   // host binary
	args     []string // argv[1:]
	env      []string // KEY=VALUE
	dir      string   // pod directory (also the working directory unless workingDir is set)
	workDir  string
	termPath string // host file standing for the termination message path
}

// prepare writes out the pod's volumes under its directory and works out its command and
// environment, with every mount path rewritten to its host directory.
func (n *Node) prepare(ctx context.Context, pod *corev1.Pod, podIP string) (*launch, error) {
	if len(pod.Spec.Containers) != 1 || len(pod.Spec.InitContainers) != 0 {
		return nil, &podError{"Unsupported", fmt.Sprintf("the local node runs pods of exactly one container and no init containers; this pod has %d and %d",
			len(pod.Spec.Containers), len(pod.Spec.InitContainers))}
	}
	c := &pod.Spec.Containers[0]
	root, ok := n.imageRoot(c.Image)
	if !ok {
		return nil, &podError{"ErrImageNeverPull", fmt.Sprintf("image %q is not mapped to a host directory on the local node", c.Image)}
	}
	if len(c.Command) == 0 {
		return nil, &podError{"Unsupported", "the local node needs an explicit container command (it knows no image entrypoints)"}
	}
	bin := filepath.Join(root, filepath.Clean("/"+c.Command[0]))
	if st, err := os.Stat(bin); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return nil, &podError{"ErrImageNeverPull", fmt.Sprintf("command %s of image %q: no executable %s on the host", c.Command[0], c.Image, bin)}
	}

	dir := n.podDir(pod)
	if err := os.MkdirAll(filepath.Join(dir, "volumes"), 0o700); err != nil {
		return nil, fmt.Errorf("create pod directory %s: %w", dir, err)
	}
	hostVolumes, err := n.materialiseVolumes(ctx, pod, dir)
	if err != nil {
		return nil, err
	}
	var rw pathRewriter
	for _, m := range c.VolumeMounts {
		host, ok := hostVolumes[m.Name]
		if !ok {
			return nil, &podError{"Unsupported", fmt.Sprintf("volumeMount %s names no volume of the pod", m.Name)}
		}
		if m.SubPath != "" {
			sub := filepath.Clean(m.SubPath)
			if filepath.IsAbs(sub) || sub == ".." || strings.HasPrefix(sub, "../") {
				return nil, &podError{"Unsupported", fmt.Sprintf("volumeMount %s: subPath %q leaves the volume", m.Name, m.SubPath)}
			}
			host = filepath.Join(host, sub)
			if err := os.MkdirAll(host, 0o750); err != nil {
				return nil, fmt.Errorf("create subPath %s: %w", host, err)
			}
		}
		rw.add(m.MountPath, host)
	}
	termPath := filepath.Join(dir, "termination-log")
	if err := os.WriteFile(termPath, nil, 0o600); err != nil {
		return nil, fmt.Errorf("create termination message file: %w", err)
	}
	containerTermPath := c.TerminationMessagePath
	if containerTermPath == "" {
		containerTermPath = corev1.TerminationMessagePathDefault
	}
	rw.add(containerTermPath, termPath)
	// A process here has no mount namespace, so the container paths in its downward-API files
	// (the runner's spec file names its data directory) are rewritten to host paths, as its
	// arguments and environment are below.
	if err := rewriteDownwardAPIFiles(pod, hostVolumes, &rw); err != nil {
		return nil, err
	}

	envMap, envList, err := n.containerEnv(ctx, pod, c, podIP)
	if err != nil {
		return nil, err
	}
	lookup := func(k string) (string, bool) { v, ok := envMap[k]; return v, ok }
	l := &launch{path: bin, dir: dir, workDir: dir, termPath: termPath}
	for _, a := range append(append([]string(nil), c.Command[1:]...), c.Args...) {
		l.args = append(l.args, rw.rewrite(expand(a, lookup)))
	}
	if c.WorkingDir != "" {
		l.workDir = rw.rewrite(c.WorkingDir)
	}
	l.env = baseEnv(pod, dir, &rw)
	for _, kv := range envList {
		l.env = append(l.env, kv[0]+"="+rw.rewrite(kv[1]))
	}
	return l, nil
}

// imageRoot finds the host directory of an image: by full reference, by repository, or
// the AnyImage entry.
func (n *Node) imageRoot(image string) (string, bool) {
	if d, ok := n.cfg.Images[image]; ok {
		return d, true
	}
	repo := image
	if i := strings.IndexByte(repo, '@'); i >= 0 {
		repo = repo[:i]
	}
	if i := strings.LastIndexByte(repo, ':'); i > strings.LastIndexByte(repo, '/') {
		repo = repo[:i]
	}
	if d, ok := n.cfg.Images[repo]; ok {
		return d, true
	}
	d, ok := n.cfg.Images[AnyImage]
	return d, ok
}

// baseEnv is what every process gets before the container's env: a PATH, a HOME and a
// TMPDIR of its own (the /tmp mount when the pod has one), HOSTNAME = the pod's name.
func baseEnv(pod *corev1.Pod, dir string, rw *pathRewriter) []string {
	tmp := rw.rewrite("/tmp")
	if tmp == "/tmp" {
		tmp = filepath.Join(dir, "tmp")
		_ = os.MkdirAll(tmp, 0o700)
	}
	return []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=" + dir,
		"TMPDIR=" + tmp,
		"HOSTNAME=" + pod.Name,
	}
}

// materialiseVolumes returns the host directory of each pod volume, writing Secret and
// ConfigMap contents into the pod directory and resolving PVCs to their PV's path.
func (n *Node) materialiseVolumes(ctx context.Context, pod *corev1.Pod, dir string) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		vdir := filepath.Join(dir, "volumes", v.Name)
		var err error
		switch {
		case v.EmptyDir != nil:
			err = os.MkdirAll(vdir, 0o700)
		case v.Secret != nil:
			err = n.writeSecret(ctx, pod.Namespace, v.Secret, vdir)
		case v.ConfigMap != nil:
			err = n.writeConfigMap(ctx, pod.Namespace, v.ConfigMap, vdir)
		case v.DownwardAPI != nil:
			err = writeDownwardAPI(pod, v.DownwardAPI, vdir)
		case v.HostPath != nil:
			vdir = v.HostPath.Path
		case v.PersistentVolumeClaim != nil:
			vdir, err = n.claimPath(ctx, pod.Namespace, v.PersistentVolumeClaim.ClaimName)
		default:
			err = &podError{"Unsupported", fmt.Sprintf("volume %s: only emptyDir, secret, configMap, downwardAPI (metadata fields), hostPath and persistentVolumeClaim volumes run on the local node", v.Name)}
		}
		if err != nil {
			return nil, err
		}
		out[v.Name] = vdir
	}
	return out, nil
}

// writeSecret writes a Secret's keys (or the listed items) as files 0600 in a 0700 dir.
func (n *Node) writeSecret(ctx context.Context, ns string, src *corev1.SecretVolumeSource, dir string) error {
	var s corev1.Secret
	err := n.reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: src.SecretName}, &s)
	if apierrors.IsNotFound(err) && src.Optional != nil && *src.Optional {
		return os.MkdirAll(dir, 0o700)
	}
	if apierrors.IsNotFound(err) {
		return &waitError{"ContainerCreating", fmt.Sprintf("secret %s/%s not found", ns, src.SecretName)}
	}
	if err != nil {
		return fmt.Errorf("get secret %s/%s: %w", ns, src.SecretName, err)
	}
	return writeKeys(dir, s.Data, src.Items, "secret "+src.SecretName)
}

// writeDownwardAPI writes a downward-API volume's files, as the kubelet does for fieldRefs of
// the pod's metadata: name, namespace, uid, and one label or annotation by key (verbatim, no
// expansion of $). Whole-map fields and resourceFieldRefs are refused.
func writeDownwardAPI(pod *corev1.Pod, src *corev1.DownwardAPIVolumeSource, dir string) error {
	data := map[string][]byte{}
	var items []corev1.KeyToPath
	for _, it := range src.Items {
		if it.FieldRef == nil {
			return &podError{"Unsupported", fmt.Sprintf("downwardAPI file %s: only fieldRef runs on the local node", it.Path)}
		}
		v, err := metadataField(pod, it.FieldRef.FieldPath)
		if err != nil {
			return err
		}
		data[it.Path] = []byte(v)
		items = append(items, corev1.KeyToPath{Key: it.Path, Path: it.Path})
	}
	return writeKeys(dir, data, items, "downwardAPI volume")
}

// rewriteDownwardAPIFiles maps the container paths inside each downward-API file of the pod to
// host paths (see pathRewriter).
func rewriteDownwardAPIFiles(pod *corev1.Pod, hostVolumes map[string]string, rw *pathRewriter) error {
	for _, v := range pod.Spec.Volumes {
		if v.DownwardAPI == nil {
			continue
		}
		for _, it := range v.DownwardAPI.Items {
			p := filepath.Join(hostVolumes[v.Name], it.Path)
			b, err := os.ReadFile(p)
			if err != nil {
				return fmt.Errorf("read downwardAPI file %s: %w", p, err)
			}
			if err := os.WriteFile(p, []byte(rw.rewrite(string(b))), 0o600); err != nil {
				return fmt.Errorf("rewrite downwardAPI file %s: %w", p, err)
			}
		}
	}
	return nil
}

// metadataField reads a downward-API field path of the pod's metadata.
func metadataField(pod *corev1.Pod, path string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	}
	for prefix, m := range map[string]map[string]string{"metadata.annotations": pod.Annotations, "metadata.labels": pod.Labels} {
		if key, ok := strings.CutPrefix(path, prefix+"['"); ok && strings.HasSuffix(key, "']") {
			return m[strings.TrimSuffix(key, "']")], nil
		}
	}
	return "", &podError{"Unsupported", fmt.Sprintf("downwardAPI field %q does not run on the local node", path)}
}

// writeConfigMap writes a ConfigMap's keys (or the listed items) as files.
func (n *Node) writeConfigMap(ctx context.Context, ns string, src *corev1.ConfigMapVolumeSource, dir string) error {
	var cm corev1.ConfigMap
	err := n.reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: src.Name}, &cm)
	if apierrors.IsNotFound(err) && src.Optional != nil && *src.Optional {
		return os.MkdirAll(dir, 0o700)
	}
	if apierrors.IsNotFound(err) {
		return &waitError{"ContainerCreating", fmt.Sprintf("configmap %s/%s not found", ns, src.Name)}
	}
	if err != nil {
		return fmt.Errorf("get configmap %s/%s: %w", ns, src.Name, err)
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return writeKeys(dir, data, src.Items, "configmap "+src.Name)
}

// writeKeys writes data (all keys, or items' keys at items' paths) under dir.
func writeKeys(dir string, data map[string][]byte, items []corev1.KeyToPath, what string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create volume dir %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("chmod volume dir %s: %w", dir, err)
	}
	files := map[string][]byte{}
	if len(items) == 0 {
		for k, v := range data {
			files[k] = v
		}
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			return &waitError{"ContainerCreating", fmt.Sprintf("%s has no key %q", what, it.Key)}
		}
		files[it.Path] = v
	}
	for rel, v := range files {
		clean := filepath.Clean(rel)
		if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
			return &podError{"Unsupported", fmt.Sprintf("%s: path %q leaves the volume", what, rel)}
		}
		p := filepath.Join(dir, clean)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return fmt.Errorf("create dir for %s: %w", p, err)
		}
		if err := os.WriteFile(p, v, 0o600); err != nil {
			return fmt.Errorf("write %s: %w", p, err)
		}
	}
	return nil
}

// errNotLocal is wrapped when a PV has no local or hostPath source.
var errNotLocal = errors.New("persistent volume has neither spec.local.path nor spec.hostPath.path")

package localnode

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// holdAddressEnv makes the test binary, run as a child, take one address from the pool in
// the directory it names, print it and hold it until its stdin closes.
const holdAddressEnv = "LOCALNODE_TEST_HOLD_ADDRESS_IN"

// holdAddress is the child's side of TestAddressesAreSharedOutAcrossProcesses.
func holdAddress(dir string) int {
	p, err := newIPPool(dir)
	if err != nil {
		println(err.Error())
		return 1
	}
	addr, err := p.acquire()
	if err != nil {
		println(err.Error())
		return 1
	}
	println("holding", addr)
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	return 0
}

func TestTwoPoolsOfOneHostNeverHandOutTheSameAddress(t *testing.T) {
	dir := t.TempDir()
	a, err := newIPPool(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := newIPPool(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for i := range 253 {
		p, name := a, "a"
		if i%2 == 1 {
			p, name = b, "b"
		}
		addr, err := p.acquire()
		if err != nil {
			t.Fatalf("acquire %d by %s: %v", i, name, err)
		}
		if other, dup := seen[addr]; dup {
			t.Fatalf("%s handed out %s, which %s holds", name, addr, other)
		}
		seen[addr] = name
	}
	if addr, err := b.acquire(); err == nil {
		t.Fatalf("a 254th address %s was handed out", addr)
	}
	a.release("127.0.0.2")
	if addr, err := b.acquire(); err != nil || addr != "127.0.0.2" {
		t.Fatalf("after a released 127.0.0.2, b got %q (%v)", addr, err)
	}
}

func TestAddressesAreSharedOutAcrossProcessesAndFreedWhenOneDies(t *testing.T) {
	dir := t.TempDir()
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), holdAddressEnv+"="+dir)
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := child.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stdin.Close(); _ = child.Wait() }()
	line, err := bufio.NewReader(stderr).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "holding 127.0.0.2" {
		t.Fatalf("child said %q (%v), want holding 127.0.0.2", line, err)
	}
	p, err := newIPPool(dir)
	if err != nil {
		t.Fatal(err)
	}
	if addr, err := p.acquire(); err != nil || addr != "127.0.0.3" {
		t.Fatalf("while another process holds 127.0.0.2, got %q (%v), want 127.0.0.3", addr, err)
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	if addr, err := p.acquire(); err != nil || addr != "127.0.0.2" {
		t.Fatalf("after the holder was killed, got %q (%v), want 127.0.0.2: a lock dies with its process", addr, err)
	}
}

// TestTwoLocalNodesRunningAtOnceGiveTheirPodsDifferentAddresses runs a second local node
// beside the suite's (as the e2e and fault suites each run one), with its own selector,
// and a pod on each listening on port 9000 of its address.
func TestTwoLocalNodesRunningAtOnceGiveTheirPodsDifferentAddresses(t *testing.T) {
	second, err := New(testCfg, Config{NodeName: "second-localnode", Selector: labels.SelectorFromSet(labels.Set{"localnode-test": "second"}),
		Images: map[string]string{"example.test/helper": imageDir}, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- second.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("second node: %v", err)
		}
	}()
	ns := newNamespace(t)
	mine := helperPod(ns, "first", "--term", "/dev/termination-log", "--listen", "$(POD_IP):9000", "--sleep", "3s")
	theirs := helperPod(ns, "second", "--term", "/dev/termination-log", "--listen", "$(POD_IP):9000", "--sleep", "3s")
	theirs.Labels = map[string]string{"localnode-test": "second"}
	a, b := createPod(t, mine), createPod(t, theirs)
	pa := waitPod(t, a, 30*time.Second, "Succeeded", terminal)
	pb := waitPod(t, b, 30*time.Second, "Succeeded", terminal)
	if pa.Spec.NodeName != DefaultNodeName || pb.Spec.NodeName != "second-localnode" {
		t.Fatalf("pods ran on %q and %q, want %s and second-localnode", pa.Spec.NodeName, pb.Spec.NodeName, DefaultNodeName)
	}
	if pa.Status.Phase != corev1.PodSucceeded || pb.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("phases %s (%s) and %s (%s), want both Succeeded", pa.Status.Phase, describe(pa), pb.Status.Phase, describe(pb))
	}
	if pa.Status.PodIP == pb.Status.PodIP {
		t.Fatalf("both nodes gave their pod address %s", pa.Status.PodIP)
	}
}

package localnode

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
)

// holdAddressEnv makes the test binary, run as a child, open the pool of the range
// holdRangeEnv (default loopback) in the directory it names, take one address, print it and
// hold it until its stdin closes or it is killed.
const (
	holdAddressEnv = "LOCALNODE_TEST_HOLD_ADDRESS_IN"
	holdRangeEnv   = "LOCALNODE_TEST_HOLD_RANGE"
)

// testRange is a range of its own for the routing tests, so that they never delete the route
// of the default range that other local nodes of the host may be using.
var testRange = netip.MustParsePrefix("10.213.251.0/29")

// holdAddress is the child's side of the cross-process tests.
func holdAddress(dir string) int {
	prefix := netip.MustParsePrefix(LoopbackPodCIDR)
	if r := os.Getenv(holdRangeEnv); r != "" {
		prefix = netip.MustParsePrefix(r)
	}
	p, err := openAddressPool(dir, prefix)
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

// startHolder starts a child holding one address of prefix from dir; it returns the address
// and the child, whose stdin closing lets it exit.
func startHolder(t *testing.T, dir string, prefix netip.Prefix) (string, *exec.Cmd) {
	t.Helper()
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), holdAddressEnv+"="+dir, holdRangeEnv+"="+prefix.String())
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
	t.Cleanup(func() { _ = stdin.Close(); _ = child.Wait() })
	line, err := bufio.NewReader(stderr).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "holding ")
	if err != nil || !ok {
		t.Fatalf("child said %q (%v), want holding ADDRESS", line, err)
	}
	return addr, child
}

func loopbackPool(t *testing.T, dir string) *addressPool {
	t.Helper()
	p, err := openAddressPool(dir, netip.MustParsePrefix(LoopbackPodCIDR))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPoolHandsOutTheRangeLowestFreeFirst(t *testing.T) {
	cases := []struct {
		prefix      string
		first, last string
		count       int
	}{
		{"127.0.0.0/24", "127.0.0.2", "127.0.0.254", 253},
		{"10.213.0.0/24", "10.213.0.2", "10.213.0.254", 253},
		{"10.213.8.0/29", "10.213.8.2", "10.213.8.6", 5},
		{"10.212.0.0/16", "10.212.0.2", "10.212.4.1", 1024},
	}
	for _, c := range cases {
		t.Run(c.prefix, func(t *testing.T) {
			// Bounds and locks only: a pool made by hand routes nothing.
			p := &addressPool{prefix: netip.MustParsePrefix(c.prefix), dir: t.TempDir(), held: map[netip.Addr]*os.File{}}
			var got []string
			for {
				a, err := p.acquire()
				if err != nil {
					break
				}
				got = append(got, a)
			}
			if len(got) != c.count || got[0] != c.first || got[len(got)-1] != c.last {
				t.Fatalf("handed out %d addresses %s..%s, want %d %s..%s", len(got), got[0], got[len(got)-1], c.count, c.first, c.last)
			}
			p.release(got[1])
			if a, err := p.acquire(); err != nil || a != got[1] {
				t.Fatalf("after releasing %s got %q (%v), want it again", got[1], a, err)
			}
		})
	}
}

func TestParsePodCIDRRefusesWhatNoPoolCanServe(t *testing.T) {
	for _, s := range []string{"", "10.213.0.0", "fd00::/64", "10.213.0.0/30", "nonsense/24"} {
		if p, err := ParsePodCIDR(s); err == nil {
			t.Errorf("ParsePodCIDR(%q) = %s, want an error", s, p)
		}
	}
	if p, err := ParsePodCIDR("10.213.0.9/24"); err != nil || p.String() != "10.213.0.0/24" {
		t.Fatalf("ParsePodCIDR(10.213.0.9/24) = %s (%v), want 10.213.0.0/24", p, err)
	}
}

func TestTwoPoolsOfOneHostNeverHandOutTheSameAddress(t *testing.T) {
	dir := t.TempDir()
	a, b := loopbackPool(t, dir), loopbackPool(t, dir)
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
	addr, child := startHolder(t, dir, netip.MustParsePrefix(LoopbackPodCIDR))
	if addr != "127.0.0.2" {
		t.Fatalf("child holds %s, want 127.0.0.2", addr)
	}
	p := loopbackPool(t, dir)
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

// needRoute skips a test that must route a range when this process may not (not root): what
// then works is what the loopback tests show.
func needRoute(t *testing.T) {
	t.Helper()
	if err := ensureLocalRoute(testRange); errors.Is(err, errRouteNotPermitted) {
		t.Skipf("this process may not route a range (%v): pods get loopback addresses", err)
	} else if err != nil {
		t.Fatal(err)
	}
	if err := deleteLocalRoute(testRange); err != nil {
		t.Fatal(err)
	}
}

func routed(t *testing.T, prefix netip.Prefix) bool {
	t.Helper()
	ok, err := hasLocalRoute(prefix)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func TestRangeIsRoutedWhileAPoolUsesItAndTheLastToCloseRemovesTheRoute(t *testing.T) {
	needRoute(t)
	dir := t.TempDir()
	a, err := openAddressPool(dir, testRange)
	if err != nil {
		t.Fatal(err)
	}
	if !routed(t, testRange) {
		t.Fatalf("no local route of %s while a pool is open", testRange)
	}
	addr, err := a.acquire()
	if err != nil || addr != "10.213.251.2" {
		t.Fatalf("first address %q (%v), want 10.213.251.2", addr, err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		t.Fatalf("listen on the pod address: %v", err)
	}
	c, err := net.DialTimeout("tcp", l.Addr().String(), 2*time.Second)
	if err != nil {
		t.Fatalf("connect to %s: %v", l.Addr(), err)
	}
	_ = c.Close()
	_ = l.Close()
	b, err := openAddressPool(dir, testRange)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.close(); err != nil {
		t.Fatal(err)
	}
	if !routed(t, testRange) {
		t.Fatal("the first pool to close removed the route another pool still uses")
	}
	if err := b.close(); err != nil {
		t.Fatal(err)
	}
	if routed(t, testRange) {
		t.Fatal("the last pool closed and the route is still there")
	}
}

func TestRouteLeftByANodeThatDiedIsTakenOverAndRemovedByTheNext(t *testing.T) {
	needRoute(t)
	dir := t.TempDir()
	addr, child := startHolder(t, dir, testRange)
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	if !routed(t, testRange) {
		t.Fatalf("the killed holder of %s left no route; the test shows nothing", addr)
	}
	p, err := openAddressPool(dir, testRange)
	if err != nil {
		t.Fatalf("open the range after a holder died: %v", err)
	}
	if a, err := p.acquire(); err != nil || a != addr {
		t.Fatalf("got %q (%v), want the dead holder's %s", a, err, addr)
	}
	if err := p.close(); err != nil {
		t.Fatal(err)
	}
	if routed(t, testRange) {
		t.Fatal("the route left by the dead holder is still there after the next pool closed")
	}
}

func TestRangeOverlappingAHostRouteIsRefused(t *testing.T) {
	needRoute(t)
	// The host's own address is routed (table local); a range around it must be refused.
	ifs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var own netip.Addr
	for _, a := range ifs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			own, _ = netip.AddrFromSlice(n.IP.To4())
		}
	}
	if !own.IsValid() {
		t.Skip("this host has no IPv4 address besides loopback to overlap")
	}
	prefix := netip.PrefixFrom(own, 29).Masked()
	_, err = openAddressPool(t.TempDir(), prefix)
	if err == nil || !strings.Contains(err.Error(), "overlaps") {
		t.Fatalf("opening %s around the host's address %s: %v, want an overlap error", prefix, own, err)
	}
	if routed(t, prefix) {
		t.Fatalf("a route of %s was added", prefix)
	}
}

func TestHoldAddressGivesAnAddressAServerCanListenOn(t *testing.T) {
	h, err := HoldAddress()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := h.Release(); err != nil {
			t.Error(err)
		}
	}()
	ip := netip.MustParseAddr(h.IP)
	if h.Loopback != ip.IsLoopback() {
		t.Fatalf("address %s with Loopback %v", h.IP, h.Loopback)
	}
	if !h.Loopback && !netip.MustParsePrefix(defaultPodCIDR()).Contains(ip) {
		t.Fatalf("address %s is not in the pod range %s", h.IP, defaultPodCIDR())
	}
	l, err := net.Listen("tcp", net.JoinHostPort(h.IP, "0"))
	if err != nil {
		t.Fatalf("listen on the held address: %v", err)
	}
	_ = l.Close()
}

// TestPodAddressesAreRoutedAndAcceptedInEndpointSlices: a pod gets an address of the node's
// range in podIP and podIPs, listens on it, is reachable there from the host, and the API
// server takes that address in an EndpointSlice (it refuses loopback addresses).
func TestPodAddressesAreRoutedAndAcceptedInEndpointSlices(t *testing.T) {
	if testNode.Loopback() {
		t.Skipf("the suite's node fell back to loopback addresses (%s): not root", testNode.PodCIDR())
	}
	ns := newNamespace(t)
	key := createPod(t, helperPod(ns, "server", "--term", "/dev/termination-log", "--listen", "$(POD_IP):9000", "--sleep", "20s"))
	pod := waitPod(t, key, 30*time.Second, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	ip, err := netip.ParseAddr(pod.Status.PodIP)
	if err != nil || !netip.MustParsePrefix(testNode.PodCIDR()).Contains(ip) {
		t.Fatalf("podIP %q (%v) is not in the node's range %s", pod.Status.PodIP, err, testNode.PodCIDR())
	}
	if len(pod.Status.PodIPs) != 1 || pod.Status.PodIPs[0].IP != pod.Status.PodIP {
		t.Fatalf("podIPs %v, want [%s]", pod.Status.PodIPs, pod.Status.PodIP)
	}
	var c net.Conn
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err = net.DialTimeout("tcp", net.JoinHostPort(pod.Status.PodIP, "9000"), time.Second); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("connect to the pod at %s:9000: %v (%s)", pod.Status.PodIP, err, describe(pod))
	}
	_ = c.Close()
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: "server-1", Labels: map[string]string{discoveryv1.LabelServiceName: "server"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{pod.Status.PodIP},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}, NodeName: ptr.To(DefaultNodeName)}},
		Ports: []discoveryv1.EndpointPort{{Port: ptr.To(int32(9000))}},
	}
	if err := testClient.Create(context.Background(), slice); err != nil {
		t.Fatalf("the API server refused the pod's address %s in an EndpointSlice: %v", pod.Status.PodIP, err)
	}
	if err := testClient.Delete(context.Background(), pod); err != nil {
		t.Fatal(err)
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

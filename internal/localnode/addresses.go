package localnode

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// DefaultPodCIDR is the range the local node gives its pods when it may route it (root, or
// CAP_NET_ADMIN, on Linux): private, and neither the real-cluster lane's pod range
// (10.88.0.0/24) nor its Service range (10.96.0.0/24).
const DefaultPodCIDR = "10.213.0.0/24"

// PodCIDREnv names the variable that, when set, replaces DefaultPodCIDR for nodes whose
// Config.PodCIDR is empty (and for HoldAddress). A range inside 127.0.0.0/8 means loopback
// addresses and no route.
const PodCIDREnv = "VACUUM_LOCALNODE_POD_CIDR"

// LoopbackPodCIDR is the range used when the pod range cannot be routed: the API server
// refuses these addresses in EndpointSlices, so no Service gets endpoints then.
const LoopbackPodCIDR = "127.0.0.0/24"

// routeProtocol marks the local route of a pod range as the local node's (rtm_protocol; the
// kernel's own values stop at 4, routing daemons use 8 to 99 and 186 to 192).
const routeProtocol = 213

// maxPoolSize bounds how many addresses one range hands out.
const maxPoolSize = 1024

// DefaultAddressLockDir is where the local nodes of one host take their pod addresses:
// <user cache dir>/vacuum-operator/localnode-addresses.
func DefaultAddressLockDir() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("local node: no cache directory for the pod address locks: %w", err)
	}
	return filepath.Join(cache, "vacuum-operator", "localnode-addresses"), nil
}

// errRouteNotPermitted is wrapped when the host does not let this process route the pod
// range (not root, no CAP_NET_ADMIN, not Linux).
var errRouteNotPermitted = errors.New("not permitted to route the pod range (needs root or CAP_NET_ADMIN on Linux)")

// addressPool hands out the pod addresses of one range, lowest free first, from the second
// host address to the last but one (10.213.0.2 to 10.213.0.254 for a /24), so an address is
// reused as soon as the pod that held it has ended. The pool is host-wide: an address is held
// by an exclusive flock on <dir>/<address>.lock for as long as its pod runs, so two local
// nodes on one host (two test suites at once, each with its own node) never hand out the same
// address. A lock goes with the process that holds it, so a node that crashes leaves no lock.
//
// Outside 127.0.0.0/8 the range is made local to the host by one route in the kernel's local
// table, `local <range> dev lo proto 213 scope host`, so any of its addresses can be bound as
// loopback addresses can, reached only from this host. Every pool of the range holds a shared
// flock on <dir>/range-<range>.lock while it is open; the one that closes last (it then gets
// the lock exclusively) deletes the route. A route left by a node that died is taken over by
// the next pool of that range and deleted when that one closes.
type addressPool struct {
	prefix   netip.Prefix
	loopback bool
	dir      string
	rangeFD  *os.File // the shared lock on the range (nil for loopback)

	mu   sync.Mutex
	held map[netip.Addr]*os.File // the lock file of each address this pool handed out
}

// ParsePodCIDR parses a pod range: IPv4, at most maxPoolSize usable addresses, at least one.
func ParsePodCIDR(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(strings.TrimSpace(s))
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("pod range %q: %w", s, err)
	}
	p = p.Masked()
	if !p.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("pod range %s: only IPv4 ranges are supported", p)
	}
	if p.Bits() > 29 {
		return netip.Prefix{}, fmt.Errorf("pod range %s: too small, want /29 or larger", p)
	}
	return p, nil
}

// defaultPodCIDR is PodCIDREnv if set, else DefaultPodCIDR.
func defaultPodCIDR() string {
	if s := os.Getenv(PodCIDREnv); s != "" {
		return s
	}
	return DefaultPodCIDR
}

// openAddressPool opens the pool of prefix with its locks in dir and, outside loopback,
// routes the range (see addressPool). It fails with errRouteNotPermitted when the host
// refuses the route.
func openAddressPool(dir string, prefix netip.Prefix) (*addressPool, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("local node: create pod address lock directory %s: %w", dir, err)
	}
	p := &addressPool{prefix: prefix, dir: dir, held: map[netip.Addr]*os.File{},
		loopback: netip.MustParsePrefix("127.0.0.0/8").Overlaps(prefix)}
	if p.loopback {
		return p, nil
	}
	f, err := os.OpenFile(filepath.Join(dir, "range-"+strings.ReplaceAll(prefix.String(), "/", "_")+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock of pod range %s: %w", prefix, err)
	}
	// Shared, and blocking: a pool closing last holds it exclusively while it deletes the
	// route, so the route is (re)made below only after that.
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lock pod range %s: %w", prefix, err)
	}
	if err := ensureLocalRoute(prefix); err != nil {
		_ = f.Close()
		return nil, err
	}
	p.rangeFD = f
	return p, nil
}

// first and last are the lowest and highest address handed out.
func (p *addressPool) bounds() (first, last netip.Addr) {
	first = p.prefix.Addr().Next().Next() // skip the network address and .1
	size := 1 << (32 - p.prefix.Bits())
	b := p.prefix.Addr().As4()
	n := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	n += uint32(min(size-2, maxPoolSize+1)) // the broadcast address is never handed out
	last = netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
	return first, last
}

// acquire returns the lowest address no pool of the host holds.
func (p *addressPool) acquire() (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	first, last := p.bounds()
	for a := first; a.Compare(last) <= 0; a = a.Next() {
		if p.held[a] != nil {
			continue
		}
		f, err := os.OpenFile(filepath.Join(p.dir, a.String()+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return "", fmt.Errorf("open lock of pod address %s: %w", a, err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			_ = f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				continue // another local node's pod has it
			}
			return "", fmt.Errorf("lock pod address %s: %w", a, err)
		}
		p.held[a] = f
		return a.String(), nil
	}
	return "", fmt.Errorf("all pod addresses %s-%s are in use on this host", first, last)
}

// release returns addr to the host's pool; an address this pool does not hold is ignored.
func (p *addressPool) release(addr string) {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if f := p.held[a]; f != nil {
		_ = f.Close() // closing the only descriptor of the lock releases it
		delete(p.held, a)
	}
}

// close releases every address and the range; the last pool of the range deletes its route.
func (p *addressPool) close() error {
	p.mu.Lock()
	for a, f := range p.held {
		_ = f.Close()
		delete(p.held, a)
	}
	f := p.rangeFD
	p.rangeFD = nil
	p.mu.Unlock()
	if f == nil {
		return nil
	}
	defer func() { _ = f.Close() }()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_UN); err != nil {
		return fmt.Errorf("unlock pod range %s: %w", p.prefix, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil // another pool still uses the range: its last one deletes the route
		}
		return fmt.Errorf("lock pod range %s: %w", p.prefix, err)
	}
	return deleteLocalRoute(p.prefix)
}

// HeldAddress is one pod address taken from the host's pool, for a server a test starts
// itself beside the dev cluster (a PostgreSQL that a Service's EndpointSlice points at). It
// is reachable only from this host, as loopback addresses are.
type HeldAddress struct {
	// IP is the address, e.g. 10.213.0.7 (or 127.0.0.7 when Loopback).
	IP string
	// Loopback is true when the pod range could not be routed (not root): the address is
	// then in 127.0.0.0/8, which the API server refuses in EndpointSlices.
	Loopback bool
	pool     *addressPool
}

// HoldAddress takes the lowest free address of the host's pod range (PodCIDREnv, else
// DefaultPodCIDR), from the same locks as the local nodes use, routing the range as a node
// does; without the right to route it, a loopback address (Loopback true). Call Release when
// the server has stopped.
func HoldAddress() (*HeldAddress, error) {
	dir, err := DefaultAddressLockDir()
	if err != nil {
		return nil, err
	}
	prefix, err := ParsePodCIDR(defaultPodCIDR())
	if err != nil {
		return nil, err
	}
	pool, err := openAddressPool(dir, prefix)
	if errors.Is(err, errRouteNotPermitted) {
		pool, err = openAddressPool(dir, netip.MustParsePrefix(LoopbackPodCIDR))
	}
	if err != nil {
		return nil, err
	}
	ip, err := pool.acquire()
	if err != nil {
		_ = pool.close()
		return nil, err
	}
	return &HeldAddress{IP: ip, Loopback: pool.loopback, pool: pool}, nil
}

// Release gives the address back (and the range: the last user deletes its route).
func (h *HeldAddress) Release() error {
	if h.pool == nil {
		return nil
	}
	err := h.pool.close()
	h.pool = nil
	return err
}

// ipNet is prefix as a net.IPNet.
func ipNet(prefix netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: prefix.Addr().AsSlice(), Mask: net.CIDRMask(prefix.Bits(), 32)}
}

package localnode

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// errNoAddress is returned when all pod addresses are in use.
var errNoAddress = errors.New("all 253 pod addresses 127.0.0.2-127.0.0.254 are in use on this host")

// DefaultAddressLockDir is where the local nodes of one host take their pod addresses:
// <user cache dir>/vacuum-operator/localnode-addresses.
func DefaultAddressLockDir() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("local node: no cache directory for the pod address locks: %w", err)
	}
	return filepath.Join(cache, "vacuum-operator", "localnode-addresses"), nil
}

// ipPool hands out the loopback addresses 127.0.0.2 to 127.0.0.254, lowest free first, so
// an address is reused as soon as the pod that held it has ended. The pool is host-wide:
// an address is held by an exclusive flock on <dir>/127.0.0.x.lock for as long as its pod
// runs, so two local nodes on one host (two test suites at once, each with its own node)
// never hand out the same address. A lock goes with the process that holds it, so a node
// that crashes leaves nothing to clean up.
type ipPool struct {
	dir  string
	mu   sync.Mutex
	held map[int]*os.File // the lock file of each address this pool handed out
}

func newIPPool(dir string) (*ipPool, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("local node: create pod address lock directory %s: %w", dir, err)
	}
	return &ipPool{dir: dir, held: map[int]*os.File{}}, nil
}

// acquire returns the lowest address no local node of the host holds.
func (p *ipPool) acquire() (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for x := 2; x <= 254; x++ {
		if p.held[x] != nil {
			continue
		}
		addr := fmt.Sprintf("127.0.0.%d", x)
		f, err := os.OpenFile(filepath.Join(p.dir, addr+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return "", fmt.Errorf("open lock of pod address %s: %w", addr, err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			_ = f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				continue // another local node's pod has it
			}
			return "", fmt.Errorf("lock pod address %s: %w", addr, err)
		}
		p.held[x] = f
		return addr, nil
	}
	return "", errNoAddress
}

// release returns addr to the host's pool; an address this pool does not hold is ignored.
func (p *ipPool) release(addr string) {
	var x int
	if _, err := fmt.Sscanf(addr, "127.0.0.%d", &x); err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if f := p.held[x]; f != nil {
		_ = f.Close() // closing the only descriptor of the lock releases it
		delete(p.held, x)
	}
}

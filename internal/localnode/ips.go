package localnode

import (
	"errors"
	"fmt"
	"sync"
)

// errNoAddress is returned when all pod addresses are in use.
var errNoAddress = errors.New("all 253 pod addresses 127.0.0.2-127.0.0.254 are in use")

// ipPool hands out the loopback addresses 127.0.0.2 to 127.0.0.254, lowest free first, so
// an address is reused as soon as the pod that held it has ended.
type ipPool struct {
	mu    sync.Mutex
	inUse [256]bool
}

// acquire returns the lowest free address.
func (p *ipPool) acquire() (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for x := 2; x <= 254; x++ {
		if !p.inUse[x] {
			p.inUse[x] = true
			return fmt.Sprintf("127.0.0.%d", x), nil
		}
	}
	return "", errNoAddress
}

// release returns addr to the pool; an address not from the pool is ignored.
func (p *ipPool) release(addr string) {
	var x int
	if _, err := fmt.Sscanf(addr, "127.0.0.%d", &x); err != nil || x < 2 || x > 254 {
		return
	}
	p.mu.Lock()
	p.inUse[x] = false
	p.mu.Unlock()
}

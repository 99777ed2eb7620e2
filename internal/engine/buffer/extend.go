package buffer

import (
	"fmt"

	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
)

// ForkCreator creates a relation fork's first file (*storage.Manager does).
type ForkCreator interface {
	Create(rel storage.RelFileNode, fork storage.ForkNum) error
}

// ExtendFork makes a fork that is have pages long at least blk+1 pages
// long: it creates the fork's file when have is 0, then appends zeroed
// pages through the pool, each released at once. The visibility map and
// the free space map grow their forks this way; the caller serialises the
// extensions of one fork and reads have under that serialisation.
func (p *Pool) ExtendFork(c ForkCreator, rel storage.RelFileNode, fork storage.ForkNum,
	have, blk storage.BlockNumber, s *Strategy,
) error {
	if have == 0 {
		if err := c.Create(rel, fork); err != nil {
			return fmt.Errorf("create fork %d of relation %d: %w", fork, rel, err)
		}
	}
	for n := have; n <= blk; n++ {
		b, err := p.Extend(rel, fork, s)
		if err != nil {
			return err
		}
		b.Unlock()
		b.Release()
	}
	return nil
}

package faultfs

import (
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
)

// Op is a bit set of operation kinds, for rules and counters.
type Op uint32

// Operation kinds. One call may be several kinds at once: a WriteAt past
// the end of the file is OpWrite|OpExtend, an OpenFile that creates a file
// is OpOpen|OpCreate.
const (
	OpRead     Op = 1 << iota // File.ReadAt
	OpWrite                   // File.WriteAt
	OpExtend                  // a WriteAt or Truncate that grows the file
	OpTruncate                // File.Truncate
	OpSync                    // File.Sync
	OpSyncDir                 // FS.SyncDir
	OpOpen                    // FS.OpenFile
	OpCreate                  // FS.OpenFile that creates the file
	OpRename                  // FS.Rename
	OpRemove                  // FS.Remove
	OpMkdir                   // FS.MkdirAll

	numOps = iota
)

// OpAny matches every operation kind.
const OpAny Op = 1<<numOps - 1

var opNames = [numOps]string{"read", "write", "extend", "truncate", "sync", "syncdir", "open", "create", "rename", "remove", "mkdir"}

// String lists the kinds in o.
func (o Op) String() string {
	var names []string
	for i, n := range opNames {
		if o&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	return strings.Join(names, "|")
}

// Fault is what an injected failure does.
type Fault int

// Faults.
const (
	// ENOSPC fails the operation with syscall.ENOSPC (in an *os.PathError);
	// nothing is written.
	ENOSPC Fault = iota + 1
	// EIO fails the operation with syscall.EIO. On OpSync this is the
	// failed fsync: the data written since the last successful Sync stays
	// non-durable (a later PowerLoss undoes it).
	EIO
	// ShortWrite writes only part of the buffer (Rule.ShortBytes, default
	// half) and returns io.ErrShortWrite. On operations other than writes
	// it acts as EIO.
	ShortWrite
)

// Rule injects a fault into matching operations.
type Rule struct {
	Ops        Op     // kinds that match (any bit in common); 0 = OpAny
	Path       string // substring of the file or directory name; "" = any
	After      int    // let the first After matching operations succeed
	Times      int    // fire this many times, then stop matching; 0 = always
	Fault      Fault
	ShortBytes int // for ShortWrite: bytes actually written (0 = half)
}

// RuleHandle reports how often an injected rule matched and fired.
type RuleHandle struct {
	rule    Rule
	mu      sync.Mutex
	matched int
	fired   int
}

// Fired is the number of operations the rule failed.
func (h *RuleHandle) Fired() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fired
}

// Matched is the number of operations that matched the rule (including the
// ones let through by After).
func (h *RuleHandle) Matched() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.matched
}

// Inject adds a rule; rules are tried in the order they were added and the
// first that fires wins.
func (fs *FS) Inject(r Rule) *RuleHandle {
	if r.Ops == 0 {
		r.Ops = OpAny
	}
	h := &RuleHandle{rule: r}
	fs.rulesMu.Lock()
	fs.rules = append(fs.rules, h)
	fs.rulesMu.Unlock()
	return h
}

// RemoveRule stops the rule from matching.
func (fs *FS) RemoveRule(h *RuleHandle) {
	fs.rulesMu.Lock()
	defer fs.rulesMu.Unlock()
	for i, r := range fs.rules {
		if r == h {
			fs.rules = append(fs.rules[:i], fs.rules[i+1:]...)
			break
		}
	}
}

// ClearRules removes every rule.
func (fs *FS) ClearRules() {
	fs.rulesMu.Lock()
	fs.rules = nil
	fs.rulesMu.Unlock()
}

// fault returns the rule that fires for this operation, if any.
func (fs *FS) fault(ops Op, name string) *Rule {
	fs.rulesMu.Lock()
	defer fs.rulesMu.Unlock()
	for _, h := range fs.rules {
		h.mu.Lock()
		r := h.rule
		if r.Ops&ops == 0 || !strings.Contains(name, r.Path) || (r.Times > 0 && h.fired >= r.Times) {
			h.mu.Unlock()
			continue
		}
		h.matched++
		if h.matched <= r.After {
			h.mu.Unlock()
			continue
		}
		h.fired++
		h.mu.Unlock()
		return &r
	}
	return nil
}

// injectedErr is the error a fired rule returns for op on name.
func injectedErr(r *Rule, op, name string) error {
	switch r.Fault {
	case ENOSPC:
		return &os.PathError{Op: op, Path: name, Err: syscall.ENOSPC}
	case ShortWrite:
		if op == "write" {
			return io.ErrShortWrite
		}
	}
	return &os.PathError{Op: op, Path: name, Err: syscall.EIO}
}

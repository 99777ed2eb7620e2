package replication

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// SlotsFileName is the file, in the data directory, that holds the physical replication
// slots. A base backup does not copy it (a standby starts without the primary's slots, as
// PostgreSQL's does).
const SlotsFileName = "replication_slots.json"

const slotsTempName = SlotsFileName + ".tmp"

// maxSlotsFileBytes bounds the slots file read at startup.
const maxSlotsFileBytes = 1 << 20

// Slot is one physical replication slot.
type Slot struct {
	Name string `json:"name"`
	// RestartLSN is the oldest WAL the slot's consumer may still need (its last reported
	// flush position); 0 until WAL is reserved.
	RestartLSN wal.LSN `json:"restartLSN"`
	// Invalidated says the slot fell more than --max-slot-wal-keep-size behind and its
	// WAL was let go: it can no longer stream.
	Invalidated bool `json:"invalidated,omitempty"`
	// Temporary slots live as long as the connection that made them and are not saved.
	Temporary bool `json:"-"`
	// Active is the process id of the connection streaming from the slot (0 = none).
	Active uint32 `json:"-"`
}

type slotsFile struct {
	Version int    `json:"version"`
	Slots   []Slot `json:"slots"`
}

// Slots are the data directory's physical replication slots, saved crash-safely (temp
// file, fsync, rename, fsync of the directory) on every change that lowers what they
// retain: the WAL a slot needs is never given up before the slot's new position is on
// disk, so a crash brings back a slot whose WAL still exists.
type Slots struct {
	fs  vfs.FS
	dir string

	mu       sync.Mutex
	slots    map[string]*Slot
	saved    map[string]wal.LSN // restart LSNs as saved on disk
	lastSave time.Time
}

// advanceSaveInterval bounds how often Advance saves: between saves the slot holds a
// little more WAL than it needs, never less.
const advanceSaveInterval = time.Second

// OpenSlots loads the slots of data directory dir (none when the file does not exist).
func OpenSlots(fsys vfs.FS, dir string) (*Slots, error) {
	s := &Slots{fs: fsys, dir: dir, slots: map[string]*Slot{}, saved: map[string]wal.LSN{}}
	path := dir + string(os.PathSeparator) + SlotsFileName
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open replication slots %s: %w", path, err)
	}
	defer func() { _ = f.Close() }() // read-only
	size, err := f.Size()
	if err != nil {
		return nil, fmt.Errorf("size of replication slots %s: %w", path, err)
	}
	if size > maxSlotsFileBytes {
		return nil, fmt.Errorf("replication slots %s: %d bytes, at most %d", path, size, maxSlotsFileBytes)
	}
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil && size > 0 {
		return nil, fmt.Errorf("read replication slots %s: %w", path, err)
	}
	var sf slotsFile
	if err := json.Unmarshal(b, &sf); err != nil {
		return nil, fmt.Errorf("replication slots %s: %w", path, err)
	}
	if sf.Version != 1 {
		return nil, fmt.Errorf("replication slots %s: version %d, want 1", path, sf.Version)
	}
	for _, sl := range sf.Slots {
		if err := validSlotName(sl.Name); err != nil {
			return nil, fmt.Errorf("replication slots %s: %w", path, err)
		}
		sl := sl
		s.slots[sl.Name] = &sl
		s.saved[sl.Name] = sl.RestartLSN
	}
	return s, nil
}

// validSlotName applies PostgreSQL's rule: lower-case letters, digits and underscores, at
// most 63 characters.
func validSlotName(name string) error {
	if name == "" || len(name) > 63 {
		return fmt.Errorf("replication slot name %q: want 1 to 63 characters", name)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return fmt.Errorf("replication slot name %q contains invalid character %q (lower-case letters, digits and underscores only)", name, c)
		}
	}
	return nil
}

// save writes every non-temporary slot. Caller holds mu.
func (s *Slots) save() error {
	sf := slotsFile{Version: 1, Slots: []Slot{}}
	for _, name := range s.namesLocked() {
		if sl := s.slots[name]; !sl.Temporary {
			sf.Slots = append(sf.Slots, *sl)
		}
	}
	b, err := json.MarshalIndent(sf, "", "  ")
	if err != nil {
		return err
	}
	if err := vfs.WriteFileAtomic(s.fs, s.dir, SlotsFileName, slotsTempName, b); err != nil {
		return fmt.Errorf("save replication slots: %w", err)
	}
	for _, sl := range sf.Slots {
		s.saved[sl.Name] = sl.RestartLSN
	}
	s.lastSave = time.Now()
	return nil
}

func (s *Slots) namesLocked() []string {
	names := make([]string, 0, len(s.slots))
	for n := range s.slots {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// ErrSlotExists, ErrNoSlot and ErrSlotActive are Create's, Drop's and Acquire's failures.
var (
	ErrSlotExists = errors.New("replication slot already exists")
	ErrNoSlot     = errors.New("replication slot does not exist")
	ErrSlotActive = errors.New("replication slot is active")
)

// Create adds a slot reserving WAL from restart (0 = none yet) and saves it unless it is
// temporary.
func (s *Slots) Create(name string, restart wal.LSN, temporary bool) error {
	if err := validSlotName(name); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.slots[name]; ok {
		return fmt.Errorf("replication slot %q: %w", name, ErrSlotExists)
	}
	s.slots[name] = &Slot{Name: name, RestartLSN: restart, Temporary: temporary}
	if temporary {
		return nil
	}
	if err := s.save(); err != nil {
		delete(s.slots, name)
		return err
	}
	return nil
}

// Drop removes a slot that no connection streams from.
func (s *Slots) Drop(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sl, ok := s.slots[name]
	if !ok {
		return fmt.Errorf("replication slot %q: %w", name, ErrNoSlot)
	}
	if sl.Active != 0 {
		return fmt.Errorf("replication slot %q is used by process %d: %w", name, sl.Active, ErrSlotActive)
	}
	delete(s.slots, name)
	delete(s.saved, name)
	if sl.Temporary {
		return nil
	}
	return s.save()
}

// Get returns a copy of a slot.
func (s *Slots) Get(name string) (Slot, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sl, ok := s.slots[name]
	if !ok {
		return Slot{}, false
	}
	return *sl, true
}

// List returns copies of every slot, by name.
func (s *Slots) List() []Slot {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Slot, 0, len(s.slots))
	for _, n := range s.namesLocked() {
		out = append(out, *s.slots[n])
	}
	return out
}

// Acquire marks a slot as streamed from by process pid.
func (s *Slots) Acquire(name string, pid uint32) (Slot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sl, ok := s.slots[name]
	if !ok {
		return Slot{}, fmt.Errorf("replication slot %q: %w", name, ErrNoSlot)
	}
	if sl.Active != 0 && sl.Active != pid {
		return Slot{}, fmt.Errorf("replication slot %q is active for PID %d: %w", name, sl.Active, ErrSlotActive)
	}
	sl.Active = pid
	return *sl, nil
}

// Release ends process pid's use of a slot; a temporary slot is dropped.
func (s *Slots) Release(name string, pid uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sl, ok := s.slots[name]
	if !ok || sl.Active != pid {
		return
	}
	sl.Active = 0
}

// DropTemporary drops the temporary slots process pid created (its connection ended).
func (s *Slots) DropTemporary(names []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range names {
		if sl, ok := s.slots[n]; ok && sl.Temporary {
			delete(s.slots, n)
		}
	}
}

// Advance moves a slot's restart LSN forward to lsn (a standby's flush position) and
// saves it when it moved. It never moves backwards, nor an invalidated slot.
func (s *Slots) Advance(name string, lsn wal.LSN) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sl, ok := s.slots[name]
	if !ok || sl.Invalidated || lsn <= sl.RestartLSN {
		return nil
	}
	sl.RestartLSN = lsn
	if sl.Temporary || (s.saved[name] != 0 && time.Since(s.lastSave) < advanceSaveInterval) {
		return nil
	}
	return s.save()
}

// Retained is the oldest WAL position any valid slot holds, by what is saved on disk for
// durable slots (0 = none).
func (s *Slots) Retained() wal.LSN {
	s.mu.Lock()
	defer s.mu.Unlock()
	var min wal.LSN
	for name, sl := range s.slots {
		if sl.Invalidated || sl.RestartLSN == 0 {
			continue
		}
		lsn := sl.RestartLSN
		if !sl.Temporary {
			lsn = s.saved[name]
		}
		if lsn != 0 && (min == 0 || lsn < min) {
			min = lsn
		}
	}
	return min
}

// InvalidateBehind invalidates every valid slot whose restart LSN is more than keep bytes
// behind end, saves, and returns the slots it invalidated (as they were).
func (s *Slots) InvalidateBehind(end wal.LSN, keep int64) ([]Slot, error) {
	if keep < 0 {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Slot
	for _, n := range s.namesLocked() {
		sl := s.slots[n]
		if sl.Invalidated || sl.RestartLSN == 0 || end <= sl.RestartLSN || int64(end-sl.RestartLSN) <= keep {
			continue
		}
		out = append(out, *sl)
		sl.Invalidated = true
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, s.save()
}

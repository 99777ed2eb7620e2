package tidstore

import "unsafe"

// segvec is an append-only vector stored in fixed-size segments reached
// through a spine of segment pointers. Growth never copies elements (so a
// large store never holds two copies of itself while it grows) and every
// allocation has a size the Go allocator serves exactly: segments are
// 8 KiB multiples or exact size classes (see the segment constants in
// store.go) and the spine capacity is a power of two. That is what lets
// bytes() be exact from len and cap alone.
type segvec[T any] struct {
	segs  [][]T // every segment has len == cap == 1<<shift
	n     int   // elements in use
	shift uint  // log2 of the segment length
}

func newSegvec[T any](shift uint) segvec[T] { return segvec[T]{shift: shift} }

func (v *segvec[T]) segLen() int { return 1 << v.shift }

func (v *segvec[T]) at(i int) *T {
	return &v.segs[i>>v.shift][i&(1<<v.shift-1)]
}

func (v *segvec[T]) get(i int) T {
	return v.segs[i>>v.shift][i&(1<<v.shift-1)]
}

// push appends x and returns its index.
func (v *segvec[T]) push(x T) int {
	if v.n == len(v.segs)<<v.shift {
		if len(v.segs) == cap(v.segs) {
			spine := make([][]T, len(v.segs), nextSpineCap(cap(v.segs)))
			copy(spine, v.segs)
			v.segs = spine
		}
		v.segs = append(v.segs, make([]T, v.segLen()))
	}
	i := v.n
	*v.at(i) = x
	v.n++
	return i
}

func nextSpineCap(c int) int {
	if c == 0 {
		return 1
	}
	return 2 * c
}

func spineElemBytes[T any]() int64 { return int64(unsafe.Sizeof([]T(nil))) }

func elemBytes[T any]() int64 {
	var x T
	return int64(unsafe.Sizeof(x))
}

// bytes is the memory held by the backing arrays: the spine's capacity
// times the size of a slice header plus the segments' capacities times the
// element size.
func (v *segvec[T]) bytes() int64 {
	// Every segment has cap 1<<shift (push allocates no other size).
	return int64(cap(v.segs))*spineElemBytes[T]() +
		int64(len(v.segs))*int64(v.segLen())*elemBytes[T]()
}

// growthFor is the number of bytes that pushing k more elements would newly
// allocate (new segments and a larger spine), without doing it.
func (v *segvec[T]) growthFor(k int) int64 {
	free := len(v.segs)<<v.shift - v.n
	if k <= free {
		return 0
	}
	newSegs := (k - free + v.segLen() - 1) >> v.shift
	grow := int64(newSegs) * int64(v.segLen()) * elemBytes[T]()
	if need := len(v.segs) + newSegs; need > cap(v.segs) {
		c := cap(v.segs)
		for c < need {
			c = nextSpineCap(c)
		}
		// The old spine becomes garbage; only the new one is held.
		grow += int64(c-cap(v.segs)) * spineElemBytes[T]()
	}
	return grow
}

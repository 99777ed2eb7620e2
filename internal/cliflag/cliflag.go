// Package cliflag holds the flag types and flag-set setup that the two
// command-line programs share, vacuum-runner (internal/runner) and
// engine-server (internal/server/command), so that a flag such as
// --buffer-pool parses and fails the same way in both. It imports neither
// program.
package cliflag

import (
	"errors"
	"io"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Quantity is a pflag.Value holding a Kubernetes quantity ("50Mi", "2Gi",
// "0"), as the CRD writes sizes and byte rates.
type Quantity struct {
	// Value is the flag's quantity: the default the program set, until Set.
	Value resource.Quantity
}

// String returns the quantity in its canonical form.
func (v *Quantity) String() string { return v.Value.String() }

// Type names the flag's type in usage text.
func (v *Quantity) Type() string { return "quantity" }

// Set parses s as a Kubernetes quantity.
func (v *Quantity) Set(s string) error {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return errors.New("not a Kubernetes quantity such as 128Mi or 2Gi")
	}
	v.Value = q
	return nil
}

// NewSet returns a flag set for the subcommand name that returns its
// errors instead of printing them, and lists flags in the order they
// were defined.
func NewSet(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = false
	return fs
}

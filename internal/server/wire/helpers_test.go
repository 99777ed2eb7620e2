package wire_test

import (
	"fmt"

	"github.com/jackc/pgx/v5/pgtype"
)

// pgtypeNumeric scans a numeric (sum of bigint) and prints it as an integer.
type pgtypeNumeric struct{ pgtype.Numeric }

func (n *pgtypeNumeric) String() string {
	v, err := n.Int64Value()
	if err != nil || !v.Valid {
		return "invalid"
	}
	return fmt.Sprint(v.Int64)
}

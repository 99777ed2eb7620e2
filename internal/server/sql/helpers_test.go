package sql

import "github.com/vacuumops/vacuum-operator/internal/server/types"

func formatText(c Column, v any) (string, error) {
	b, err := types.FormatText(c.Type, v)
	return string(b), err
}

package bench

import (
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
)

// Table is one CSV file of raw figures: Labels leading text columns
// (configuration names), then numeric columns.
type Table struct {
	Name   string // file name without ".csv"
	Header []string
	Labels int
	Rows   [][]string
}

// NewTable returns an empty table; the first labels columns of header are
// text, the others numbers.
func NewTable(name string, labels int, header ...string) *Table {
	return &Table{Name: name, Header: header, Labels: labels}
}

// Add appends a row of labels then numbers. A NaN or infinite number, or a
// count of values that does not match the header, is a programming error
// reported as such (the file would be invalid).
func (t *Table) Add(labels []string, nums ...float64) error {
	if len(labels) != t.Labels || len(labels)+len(nums) != len(t.Header) {
		return fmt.Errorf("table %s: row with %d labels and %d numbers, header has %d columns (%d labels)",
			t.Name, len(labels), len(nums), len(t.Header), t.Labels)
	}
	row := append([]string(nil), labels...)
	for i, v := range nums {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("table %s: column %s is %v", t.Name, t.Header[len(labels)+i], v)
		}
		row = append(row, formatNum(v))
	}
	t.Rows = append(t.Rows, row)
	return nil
}

// formatNum writes integers exactly and other values with 6 significant
// digits, never in exponent notation (spreadsheets and readers alike).
func formatNum(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatInt(int64(v), 10)
	}
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
	return strconv.FormatFloat(r, 'f', -1, 64)
}

// Write writes the table to dir/<Name>.csv.
func (t *Table) Write(dir string) (string, error) {
	p := filepath.Join(dir, t.Name+".csv")
	f, err := os.Create(p)
	if err != nil {
		return "", fmt.Errorf("write %s: %w", p, err)
	}
	w := csv.NewWriter(f)
	err = w.Write(t.Header)
	if err == nil {
		err = w.WriteAll(t.Rows) // WriteAll flushes
	}
	if err != nil {
		f.Close()
		return "", fmt.Errorf("write %s: %w", p, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("write %s: %w", p, err)
	}
	return p, nil
}

// Markdown renders the table as a Markdown table for the report.
func (t *Table) Markdown() string {
	s := "|"
	for _, h := range t.Header {
		s += " " + h + " |"
	}
	s += "\n|"
	for i := range t.Header {
		if i < t.Labels {
			s += "---|"
		} else {
			s += "---:|"
		}
	}
	s += "\n"
	for _, r := range t.Rows {
		s += "|"
		for i, c := range r {
			if i >= t.Labels {
				c = prettyNum(c)
			}
			s += " " + c + " |"
		}
		s += "\n"
	}
	return s
}

// ReadCSV reads a CSV file written by Table.Write: its header and rows.
func ReadCSV(p string) (header []string, rows [][]string, err error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	all, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", p, err)
	}
	if len(all) == 0 {
		return nil, nil, fmt.Errorf("read %s: no header", p)
	}
	return all[0], all[1:], nil
}

// prettyNum shortens a CSV number for reading: integers as they are,
// other values to 3 decimals (or 3 significant digits below 1).
func prettyNum(c string) string {
	v, err := strconv.ParseFloat(c, 64)
	if err != nil || v == math.Trunc(v) {
		return c
	}
	switch a := math.Abs(v); {
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 3, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

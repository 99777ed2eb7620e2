package sql

import (
	"sort"
	"strings"

	"github.com/vacuumops/vacuum-operator/internal/server/pgerr"
)

// setting is one run-time parameter: its canonical name (as SHOW prints it), its default,
// whether a change is reported to the client (ParameterStatus, PostgreSQL's GUC_REPORT) and
// whether a session may change it.
type setting struct {
	name     string
	def      string
	report   bool
	readOnly bool
	check    func(string) (string, error)
}

// ServerVersion is the server_version reported to clients: PostgreSQL clients parse it as 15.
const ServerVersion = "15.0"

var knownSettings = []setting{
	{name: "server_version", def: ServerVersion, report: true, readOnly: true},
	{name: "server_version_num", def: "150000", readOnly: true},
	{name: "block_size", def: "8192", readOnly: true},
	{name: "server_encoding", def: "UTF8", report: true, readOnly: true},
	{name: "client_encoding", def: "UTF8", report: true, check: checkEncoding},
	{name: "DateStyle", def: "ISO, MDY", report: true, check: checkDateStyle},
	{name: "IntervalStyle", def: "postgres", report: true},
	{name: "TimeZone", def: "UTC", report: true, check: checkTimeZone},
	{name: "integer_datetimes", def: "on", report: true, readOnly: true},
	{name: "standard_conforming_strings", def: "on", report: true, check: checkOn("standard_conforming_strings")},
	{name: "is_superuser", def: "on", report: true, readOnly: true},
	{name: "session_authorization", def: "", report: true, readOnly: true},
	{name: "application_name", def: "", report: true},
	{name: "search_path", def: `"$user", public`},
	{name: "statement_timeout", def: "0"},
	{name: "lock_timeout", def: "0"},
	{name: "idle_in_transaction_session_timeout", def: "0"},
	{name: "extra_float_digits", def: "1"},
	{name: "client_min_messages", def: "notice"},
	{name: "default_transaction_isolation", def: "read committed", check: checkIsolation},
	{name: "transaction_isolation", def: "read committed", check: checkIsolation},
	{name: "default_transaction_read_only", def: "off", check: checkOn("default_transaction_read_only", "off")},
	{name: "synchronous_commit", def: "on"},
	{name: "work_mem", def: "4MB"},
	{name: "maintenance_work_mem", def: "64MB"},
	{name: "max_connections", def: "100", readOnly: true},
	{name: "vacuum_cost_delay", def: "0"},
	{name: "vacuum_cost_limit", def: "200"},
	{name: "vacuum_cost_page_hit", def: "1"},
	{name: "vacuum_cost_page_miss", def: "2"},
	{name: "vacuum_cost_page_dirty", def: "20"},
	{name: "vacuum_buffer_usage_limit", def: "256kB"},
	{name: "vacuum_max_read_rate", def: "0"},
	{name: "vacuum_max_write_rate", def: "0"},
	{name: "vacuum_max_wal_rate", def: "0"},
	// The adaptive throttle's targets (adaptive.go).
	{name: "vacuum_adaptive_latency_target", def: "0", check: checkAdaptive("vacuum_adaptive_latency_target")},
	{name: "vacuum_adaptive_latency_percentile_per_mille", def: "990", check: checkAdaptive("vacuum_adaptive_latency_percentile_per_mille")},
	{name: "vacuum_adaptive_max_lag_bytes", def: "0", check: checkAdaptive("vacuum_adaptive_max_lag_bytes")},
	{name: "vacuum_adaptive_max_lag_seconds", def: "0", check: checkAdaptive("vacuum_adaptive_max_lag_seconds")},
	{name: "vacuum_adaptive_floor_per_mille", def: "100", check: checkAdaptive("vacuum_adaptive_floor_per_mille")},
}

func checkEncoding(v string) (string, error) {
	switch strings.ToUpper(strings.ReplaceAll(v, "-", "")) {
	case "UTF8", "UNICODE":
		return "UTF8", nil
	}
	return "", pgerr.Unsupported("client_encoding " + v + " (only UTF8)")
}

func checkDateStyle(v string) (string, error) {
	if strings.HasPrefix(strings.ToUpper(v), "ISO") {
		return "ISO, MDY", nil
	}
	return "", pgerr.Unsupported("DateStyle " + v + " (only ISO)")
}

func checkTimeZone(v string) (string, error) {
	switch strings.ToUpper(v) {
	case "UTC", "GMT", "ETC/UTC", "Z", "+00", "0":
		return "UTC", nil
	}
	return "", pgerr.Unsupported("TimeZone " + v + " (only UTC)")
}

func checkIsolation(v string) (string, error) {
	switch strings.ToLower(v) {
	case "read committed", "read uncommitted":
		// Every statement takes a fresh snapshot and writes wait for a row's other
		// writer, then re-check it: READ COMMITTED (READ UNCOMMITTED is the same, as in
		// PostgreSQL).
		return strings.ToLower(v), nil
	case "repeatable read", "serializable":
		return "", pgerr.Unsupported("transaction isolation level " + strings.ToLower(v) + " (only read committed)")
	}
	return "", pgerr.New(pgerr.InvalidParameterValue, "invalid value for parameter \"transaction_isolation\": \"%s\"", v)
}

func checkOn(name string, only ...string) func(string) (string, error) {
	want := "on"
	if len(only) > 0 {
		want = only[0]
	}
	return func(v string) (string, error) {
		switch strings.ToLower(v) {
		case want, map[string]string{"on": "true", "off": "false"}[want]:
			return want, nil
		}
		return "", pgerr.Unsupported(name + " = " + v)
	}
}

// settings is a session's parameter values.
type settings struct {
	values map[string]string // by lower-case name
	// defaults are the values RESET returns to when the startup packet set them.
	defaults map[string]string
	changed  map[string]bool // reported parameters changed since the last TakeReports
}

func newSettings(overrides map[string]string) *settings {
	s := &settings{values: map[string]string{}, defaults: map[string]string{}, changed: map[string]bool{}}
	for _, k := range knownSettings {
		s.values[strings.ToLower(k.name)] = k.def
	}
	for k, v := range overrides {
		s.values[strings.ToLower(k)] = v
	}
	return s
}

func lookupSetting(name string) (*setting, bool) {
	for i := range knownSettings {
		if strings.EqualFold(knownSettings[i].name, name) {
			return &knownSettings[i], true
		}
	}
	return nil, false
}

// get returns a parameter's value; custom (dotted) names set earlier count too.
func (s *settings) get(name string) (string, bool) {
	v, ok := s.values[strings.ToLower(name)]
	return v, ok
}

// set changes a parameter (value "" with reset=true restores its default).
func (s *settings) set(name, value string, reset bool) error {
	k, known := lookupSetting(name)
	if !known && !strings.Contains(name, ".") {
		return pgerr.New(pgerr.UndefinedParameter, "unrecognized configuration parameter \"%s\"", name)
	}
	if known && k.readOnly {
		return pgerr.New(pgerr.CantChangeRuntimeParam, "parameter \"%s\" cannot be changed", k.name)
	}
	key := strings.ToLower(name)
	if reset {
		if d, ok := s.defaults[key]; ok {
			value = d
		} else if known {
			value = k.def
		} else {
			delete(s.values, key)
			return nil
		}
	} else if known && k.check != nil {
		v, err := k.check(value)
		if err != nil {
			return err
		}
		value = v
	}
	if known && k.report && s.values[key] != value {
		s.changed[k.name] = true
	}
	s.values[key] = value
	return nil
}

// resetAll restores every changeable parameter's default.
func (s *settings) resetAll() {
	for _, k := range knownSettings {
		if !k.readOnly {
			_ = s.set(k.name, "", true)
		}
	}
}

// Report is one parameter to send as ParameterStatus.
type Report struct{ Name, Value string }

// reports returns every reported parameter (at startup).
func (s *settings) reports() []Report {
	var out []Report
	for _, k := range knownSettings {
		if k.report {
			v, _ := s.get(k.name)
			out = append(out, Report{k.name, v})
		}
	}
	return out
}

// takeChanged returns the reported parameters changed since the last call.
func (s *settings) takeChanged() []Report {
	var names []string
	for n := range s.changed {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []Report
	for _, n := range names {
		v, _ := s.get(n)
		out = append(out, Report{n, v})
	}
	s.changed = map[string]bool{}
	return out
}

// canonicalName is the name SHOW prints as its column.
func canonicalName(name string) string {
	if k, ok := lookupSetting(name); ok {
		return k.name
	}
	return strings.ToLower(name)
}

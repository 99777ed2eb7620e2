package replication

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// Kind is a replication command's kind.
type Kind int

// Replication command kinds (PostgreSQL's streaming replication protocol).
const (
	IdentifySystem Kind = iota + 1
	Show
	CreateSlot
	DropSlot
	ReadSlot
	StartReplication
	BaseBackupKind // VACUUMOPS_BASE_BACKUP (backup.go)
)

// Command is one parsed replication command.
type Command struct {
	Kind Kind
	// Name is SHOW's parameter, or the slot of CREATE_, DROP_, READ_REPLICATION_SLOT and
	// of START_REPLICATION SLOT.
	Name string
	// Temporary and ReserveWAL are CREATE_REPLICATION_SLOT's options.
	Temporary, ReserveWAL bool
	// LSN and Timeline are START_REPLICATION's (Timeline 0 when not given).
	LSN      wal.LSN
	Timeline uint32
}

// maxCommandBytes bounds a command's text.
const maxCommandBytes = 4096

// ParseCommand parses a replication command as PostgreSQL's walsender grammar has it:
//
//	IDENTIFY_SYSTEM
//	SHOW name
//	CREATE_REPLICATION_SLOT slot [TEMPORARY] PHYSICAL [RESERVE_WAL | (RESERVE_WAL [true|false] [, ...])]
//	DROP_REPLICATION_SLOT slot [WAIT]
//	READ_REPLICATION_SLOT slot
//	START_REPLICATION [SLOT slot] [PHYSICAL] XXX/XXX [TIMELINE tli]
//	VACUUMOPS_BASE_BACKUP
//
// Keywords are case-insensitive; a slot may be a double-quoted identifier; one trailing
// semicolon is allowed. Logical slots and replication are refused with an error.
func ParseCommand(text string) (*Command, error) {
	if len(text) > maxCommandBytes {
		return nil, fmt.Errorf("replication command of %d bytes, at most %d", len(text), maxCommandBytes)
	}
	toks, err := tokenize(text)
	if err != nil {
		return nil, err
	}
	if len(toks) > 0 && toks[len(toks)-1].text == ";" {
		toks = toks[:len(toks)-1]
	}
	p := &parser{toks: toks}
	if len(toks) == 0 {
		return nil, fmt.Errorf("empty replication command")
	}
	kw := p.keyword()
	var c *Command
	switch kw {
	case "IDENTIFY_SYSTEM":
		c = &Command{Kind: IdentifySystem}
	case "SHOW":
		name, err := p.name("parameter name")
		if err != nil {
			return nil, err
		}
		c = &Command{Kind: Show, Name: strings.ToLower(name)}
	case "CREATE_REPLICATION_SLOT":
		c, err = p.createSlot()
	case "DROP_REPLICATION_SLOT":
		c = &Command{Kind: DropSlot}
		if c.Name, err = p.name("slot name"); err == nil && p.peekKeyword() == "WAIT" {
			p.pos++
		}
	case "READ_REPLICATION_SLOT":
		c = &Command{Kind: ReadSlot}
		c.Name, err = p.name("slot name")
	case "START_REPLICATION":
		c, err = p.start()
	case BaseBackupCommand:
		c = &Command{Kind: BaseBackupKind}
	case "":
		return nil, fmt.Errorf("syntax error at %q", toks[0].text)
	default:
		return nil, fmt.Errorf("unsupported replication command %s", kw)
	}
	if err != nil {
		return nil, err
	}
	if p.pos < len(p.toks) {
		return nil, fmt.Errorf("syntax error at %q", p.toks[p.pos].text)
	}
	return c, nil
}

type token struct {
	text   string
	quoted bool
}

func tokenize(s string) ([]token, error) {
	var toks []token
	for i := 0; i < len(s); {
		ch := s[i]
		switch {
		case ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r':
			i++
		case ch == '(' || ch == ')' || ch == ',' || ch == ';':
			toks = append(toks, token{text: string(ch)})
			i++
		case ch == '"':
			var b strings.Builder
			j := i + 1
			for {
				if j >= len(s) {
					return nil, fmt.Errorf("unterminated quoted identifier")
				}
				if s[j] == '"' {
					if j+1 < len(s) && s[j+1] == '"' {
						b.WriteByte('"')
						j += 2
						continue
					}
					break
				}
				b.WriteByte(s[j])
				j++
			}
			if b.Len() == 0 {
				return nil, fmt.Errorf("zero-length quoted identifier")
			}
			toks = append(toks, token{text: b.String(), quoted: true})
			i = j + 1
		case ch == '_' || ch == '/' || ch == '.' || ch == '-' || ch >= '0' && ch <= '9' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z':
			j := i
			for j < len(s) {
				c := s[j]
				if c == '_' || c == '/' || c == '.' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
					j++
					continue
				}
				break
			}
			toks = append(toks, token{text: s[i:j]})
			i = j
		default:
			return nil, fmt.Errorf("syntax error at %q", string(ch))
		}
	}
	return toks, nil
}

type parser struct {
	toks []token
	pos  int
}

// keyword consumes the next token as an upper-cased keyword ("" when quoted or none).
func (p *parser) keyword() string {
	kw := p.peekKeyword()
	if kw != "" {
		p.pos++
	}
	return kw
}

func (p *parser) peekKeyword() string {
	if p.pos >= len(p.toks) || p.toks[p.pos].quoted {
		return ""
	}
	return strings.ToUpper(p.toks[p.pos].text)
}

// name consumes an identifier (unquoted ones fold to lower case, as PostgreSQL folds them).
func (p *parser) name(what string) (string, error) {
	if p.pos >= len(p.toks) {
		return "", fmt.Errorf("syntax error: %s expected", what)
	}
	t := p.toks[p.pos]
	if !t.quoted && !validIdent(t.text) {
		return "", fmt.Errorf("syntax error at %q: %s expected", t.text, what)
	}
	p.pos++
	if t.quoted {
		return t.text, nil
	}
	return strings.ToLower(t.text), nil
}

func validIdent(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	return !strings.ContainsAny(s, "/.-")
}

func (p *parser) createSlot() (*Command, error) {
	c := &Command{Kind: CreateSlot}
	var err error
	if c.Name, err = p.name("slot name"); err != nil {
		return nil, err
	}
	if p.peekKeyword() == "TEMPORARY" {
		p.pos++
		c.Temporary = true
	}
	switch kw := p.keyword(); kw {
	case "PHYSICAL":
	case "LOGICAL":
		return nil, fmt.Errorf("logical replication slots are not supported")
	default:
		return nil, fmt.Errorf("syntax error: PHYSICAL expected")
	}
	if p.peekKeyword() == "RESERVE_WAL" {
		p.pos++
		c.ReserveWAL = true
		return c, nil
	}
	if p.pos < len(p.toks) && p.toks[p.pos].text == "(" {
		p.pos++
		for {
			opt := p.keyword()
			if opt == "" {
				return nil, fmt.Errorf("syntax error: option name expected")
			}
			val := true
			if v := p.peekKeyword(); v == "TRUE" || v == "FALSE" || v == "ON" || v == "OFF" || v == "1" || v == "0" {
				p.pos++
				val = v == "TRUE" || v == "ON" || v == "1"
			}
			switch opt {
			case "RESERVE_WAL":
				c.ReserveWAL = val
			case "SNAPSHOT", "TWO_PHASE":
				return nil, fmt.Errorf("option %s is for logical slots", opt)
			default:
				return nil, fmt.Errorf("unrecognized option %s", opt)
			}
			if p.pos >= len(p.toks) {
				return nil, fmt.Errorf("syntax error: ) expected")
			}
			t := p.toks[p.pos].text
			p.pos++
			if t == ")" {
				break
			}
			if t != "," {
				return nil, fmt.Errorf("syntax error at %q", t)
			}
		}
	}
	return c, nil
}

func (p *parser) start() (*Command, error) {
	c := &Command{Kind: StartReplication}
	var err error
	if p.peekKeyword() == "SLOT" {
		p.pos++
		if c.Name, err = p.name("slot name"); err != nil {
			return nil, err
		}
	}
	switch p.peekKeyword() {
	case "PHYSICAL":
		p.pos++
	case "LOGICAL":
		return nil, fmt.Errorf("logical replication is not supported")
	}
	if p.pos >= len(p.toks) {
		return nil, fmt.Errorf("syntax error: start position expected")
	}
	if c.LSN, err = ParseLSN(p.toks[p.pos].text); err != nil {
		return nil, err
	}
	p.pos++
	if p.peekKeyword() == "TIMELINE" {
		p.pos++
		if p.pos >= len(p.toks) {
			return nil, fmt.Errorf("syntax error: timeline expected")
		}
		tli, err := strconv.ParseUint(p.toks[p.pos].text, 10, 32)
		if err != nil || tli == 0 {
			return nil, fmt.Errorf("invalid timeline %q", p.toks[p.pos].text)
		}
		p.pos++
		c.Timeline = uint32(tli)
	}
	return c, nil
}

// ParseLSN parses PostgreSQL's text form of an LSN, XXX/XXX (two hex numbers of at most
// 8 digits).
func ParseLSN(s string) (wal.LSN, error) {
	hi, lo, ok := strings.Cut(s, "/")
	if !ok || hi == "" || lo == "" || len(hi) > 8 || len(lo) > 8 {
		return 0, fmt.Errorf("invalid LSN %q: want XXX/XXX", s)
	}
	h, err1 := strconv.ParseUint(hi, 16, 32)
	l, err2 := strconv.ParseUint(lo, 16, 32)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("invalid LSN %q: want XXX/XXX", s)
	}
	return wal.LSN(h<<32 | l), nil
}

// FormatLSN is PostgreSQL's text form of an LSN.
func FormatLSN(l wal.LSN) string { return fmt.Sprintf("%X/%X", uint64(l)>>32, uint32(l)) }

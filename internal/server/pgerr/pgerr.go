// Package pgerr is the server's error with a PostgreSQL SQLSTATE: every failure a client sees
// is one of these (ErrorResponse fields), and the codes are PostgreSQL's, so that a client's
// error handling written for PostgreSQL works unchanged.
package pgerr

import (
	"errors"
	"fmt"
)

// SQLSTATE codes the server returns (PostgreSQL's appendix A names).
const (
	SuccessfulCompletion         = "00000"
	FeatureNotSupported          = "0A000" // feature_not_supported
	InvalidTransactionState      = "25000" // invalid_transaction_state
	InFailedTransaction          = "25P02" // in_failed_sql_transaction
	NoActiveTransaction          = "25P01" // no_active_sql_transaction
	ActiveTransaction            = "25001" // active_sql_transaction
	ReadOnlySQLTransaction       = "25006" // read_only_sql_transaction
	SyntaxError                  = "42601" // syntax_error
	UndefinedTable               = "42P01" // undefined_table
	UndefinedColumn              = "42703" // undefined_column
	UndefinedFunction            = "42883" // undefined_function
	UndefinedObject              = "42704" // undefined_object
	DuplicateTable               = "42P07" // duplicate_table
	DuplicateObject              = "42710" // duplicate_object
	DuplicateColumn              = "42701" // duplicate_column
	AmbiguousColumn              = "42702" // ambiguous_column
	DatatypeMismatch             = "42804" // datatype_mismatch
	GroupingError                = "42803" // grouping_error
	InvalidColumnReference       = "42P10" // invalid_column_reference
	IndeterminateDatatype        = "42P18" // indeterminate_datatype
	CannotCoerce                 = "42846" // cannot_coerce
	InvalidTableDefinition       = "42P16" // invalid_table_definition
	UniqueViolation              = "23505" // unique_violation
	NotNullViolation             = "23502" // not_null_violation
	DivisionByZero               = "22012" // division_by_zero
	NumericValueOutOfRange       = "22003" // numeric_value_out_of_range
	InvalidTextRepresentation    = "22P02" // invalid_text_representation
	InvalidParameterValue        = "22023" // invalid_parameter_value
	StringDataRightTruncation    = "22001" // string_data_right_truncation
	ProtocolViolation            = "08P01" // protocol_violation
	QueryCanceled                = "57014" // query_canceled
	AdminShutdown                = "57P01" // admin_shutdown
	DeadlockDetected             = "40P01" // deadlock_detected
	SerializationFailure         = "40001" // serialization_failure
	InvalidCatalogName           = "3D000" // invalid_catalog_name
	InvalidPassword              = "28P01" // invalid_password
	InvalidAuthorization         = "28000" // invalid_authorization_specification
	TooManyConnections           = "53300" // too_many_connections
	ProgramLimitExceeded         = "54000" // program_limit_exceeded
	InvalidPreparedStatement     = "26000" // invalid_sql_statement_name
	InvalidCursorName            = "34000" // invalid_cursor_name
	DuplicatePreparedStatement   = "42P05" // duplicate_prepared_statement
	UndefinedParameter           = "42704" // undefined_object, as PostgreSQL reports unknown settings
	InternalError                = "XX000" // internal_error
	DataCorrupted                = "XX001" // data_corrupted
	IOError                      = "58030" // io_error
	CantChangeRuntimeParam       = "55P02" // cant_change_runtime_param
	ObjectNotInPrerequisiteState = "55000" // object_not_in_prerequisite_state
	WarningCode                  = "01000" // warning
	NullValueNotAllowed          = "22004" // null_value_not_allowed
)

// Error is a failure with a SQLSTATE, as an ErrorResponse or NoticeResponse carries it.
type Error struct {
	Severity string // ERROR (default), FATAL, WARNING, NOTICE, INFO
	Code     string
	Message  string
	Detail   string
	Hint     string
	Position int32 // 1-based character position in the query, 0 = none
	cause    error
}

func (e *Error) Error() string {
	if e.cause != nil {
		return fmt.Sprintf("%s (SQLSTATE %s): %v", e.Message, e.Code, e.cause)
	}
	return fmt.Sprintf("%s (SQLSTATE %s)", e.Message, e.Code)
}

// Unwrap returns the engine error behind e, if any.
func (e *Error) Unwrap() error { return e.cause }

// New returns an ERROR with code and a message formatted as fmt.Sprintf does.
func New(code, format string, args ...any) *Error {
	return &Error{Severity: "ERROR", Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an ERROR with code and message whose cause is err (kept for logs, not shown
// to the client beyond the message).
func Wrap(err error, code, format string, args ...any) *Error {
	e := New(code, format, args...)
	e.cause = err
	return e
}

// Unsupported is the 0A000 error naming the construct that is not supported.
func Unsupported(construct string) *Error {
	return New(FeatureNotSupported, "%s is not supported by engine-server", construct)
}

// WithPosition returns e with its position set (1-based, as PostgreSQL counts characters).
func (e *Error) WithPosition(pos int32) *Error {
	c := *e
	c.Position = pos
	return &c
}

// As returns err as an *Error: an *Error found in err's chain, or an internal error (XX000)
// carrying err's text.
func As(err error) *Error {
	var pe *Error
	if errors.As(err, &pe) {
		return pe
	}
	return Wrap(err, InternalError, "%s", err.Error())
}

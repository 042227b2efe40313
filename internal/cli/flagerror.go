package cli

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// flagError words a flag value the flag's type refuses as the other usage
// errors are ("--limit -1: expected 1-1000"): the flag, the value and what
// was expected, instead of pflag's `invalid argument "abc" for
// "--max-connections" flag: strconv.ParseInt: parsing "abc": invalid
// syntax`. Other errors (an unknown flag, a missing value) pass as they are.
func flagError(cmd *cobra.Command, err error) error {
	if nerr, ok := errors.AsType[*pflag.NotExistError](err); ok {
		return negativeArg(cmd, nerr, err)
	}
	ive, ok := errors.AsType[*pflag.InvalidValueError](err)
	if !ok {
		return err
	}
	name := "--" + ive.GetFlag().Name
	want := ""
	switch ive.GetFlag().Value.Type() {
	case "int", "int8", "int16", "int32", "int64", "count":
		want = "a whole number"
	case "uint", "uint8", "uint16", "uint32", "uint64":
		want = "a whole number, 0 or more"
	case "float32", "float64":
		want = "a number"
	case "duration":
		want = "a duration such as 30s, 5m or 1h30m"
	case "bool":
		want = "true or false"
	default:
		return fmt.Errorf("%s %q: %w", name, ive.GetValue(), errors.Unwrap(err))
	}
	if errors.Is(err, strconv.ErrRange) {
		return fmt.Errorf("%s %q: out of range (expected %s)", name, ive.GetValue(), want)
	}
	return fmt.Errorf("%s %q: expected %s", name, ive.GetValue(), want)
}

// firstArgAnnotation, on a command whose first argument is a task id,
// says so to flagError.
const firstArgAnnotation = "maestro/first-arg"

// negativeArg words a number given where the first argument (a task id)
// goes, such as `tasks show -1`, as the id it is not: pflag took it for
// flags and said "unknown shorthand flag: '1' in -1". Other unknown flags
// pass as they are.
func negativeArg(cmd *cobra.Command, nerr *pflag.NotExistError, err error) error {
	short := nerr.GetSpecifiedShortnames()
	if cmd == nil || cmd.Annotations[firstArgAnnotation] != "task id" || short == "" || short[0] < '0' || short[0] > '9' {
		return err
	}
	if len(cmd.Flags().Args()) > 0 {
		return err // the id came before it: -1 is another argument
	}
	return badTaskID("-" + short)
}

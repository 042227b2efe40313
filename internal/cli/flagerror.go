package cli

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

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

// refuseFlagsAsValues makes a flag given no value before the next flag a
// usage error: pflag gives it the next flag as its value (`run --replay
// --piece general` replays a file named "--piece"), and the command failed
// far from the mistake ("open --piece: no such file or directory"). A
// value that is one of the command's own flags, as a whole or before
// "=", is refused.
func refuseFlagsAsValues(cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		refuseFlagsAsValues(c)
	}
	if !cmd.Runnable() {
		return
	}
	cmd.PreRunE = func(c *cobra.Command, _ []string) error {
		var bad error
		c.Flags().Visit(func(f *pflag.Flag) {
			if bad != nil || f.NoOptDefVal != "" {
				return
			}
			var values []string
			switch v := f.Value.(type) {
			case pflag.SliceValue:
				values = v.GetSlice()
			default:
				if f.Value.Type() == "string" {
					values = []string{f.Value.String()}
				}
			}
			for _, v := range values {
				if isFlagOf(c, v) {
					bad = usageErr("--%s needs a value before the next flag: it took %q, which is a flag (usage: %s)", f.Name, v, c.UseLine())
					return
				}
			}
		})
		return bad
	}
}

// isFlagOf says whether word is one of cmd's flags: --name or
// --name=value, or -x of a shorthand.
func isFlagOf(cmd *cobra.Command, word string) bool {
	if name, ok := strings.CutPrefix(word, "--"); ok {
		name, _, _ = strings.Cut(name, "=")
		return name != "" && cmd.Flags().Lookup(name) != nil
	}
	return len(word) == 2 && word[0] == '-' && cmd.Flags().ShorthandLookup(word[1:]) != nil
}

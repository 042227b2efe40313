package utility

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// splitArgv splits a direct-mode command line into words the way a POSIX
// shell splits them, without expansions: whitespace separates words,
// single quotes keep their content literally, and a backslash outside
// single quotes makes the next character literal. Adjacent quoted and
// unquoted parts form one word; an empty quoted string is an empty word.
func splitArgv(line string) ([]string, *Error) {
	var (
		args     []string
		cur      strings.Builder
		inWord   bool
		single   bool
		double   bool
		escaping bool
	)
	for len(line) > 0 {
		r, size := utf8.DecodeRuneInString(line)
		raw := line[:size] // written as is, even when not valid UTF-8
		line = line[size:]
		switch {
		case escaping:
			cur.WriteString(raw)
			escaping = false
		case r == '\\' && !single:
			escaping, inWord = true, true
		case r == '\'' && !double:
			single, inWord = !single, true
		case r == '"' && !single:
			double, inWord = !double, true
		case !single && !double && unicode.IsSpace(r):
			if inWord {
				args = append(args, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteString(raw)
			inWord = true
		}
	}
	if escaping {
		return nil, errorf(400, "Command ends with unfinished escape sequence")
	}
	if single || double {
		return nil, errorf(400, "Command contains unterminated quotes")
	}
	if inWord {
		args = append(args, cur.String())
	}
	if len(args) == 0 {
		return nil, errorf(400, "Command must contain an executable to run")
	}
	return args, nil
}

// Package utility implements the headless protocol's utility operations
// (wire contract §10): command_exec (utility_command_start, _terminate,
// _stdin, _resize), file_search, file_read and file_watch
// (utility_file_watch_start, _stop).
//
// A Manager owns the running commands and watches of one headless
// runtime. The runtime checks the negotiated capabilities and maps the
// *Error values returned here to protocol errors; everything else (workspace
// confinement, ownership, ids, limits, the contract's error texts, process
// and watch lifecycles) happens here. Messages the operations produce
// asynchronously (command output and exit, watch events) go to the
// Config.Emit function.
//
// # Workspace confinement
//
// Every cwd, path and watch root is resolved with symbolic links followed
// through workspace.Root and must lie inside the workspace; relative paths
// resolve against the request's cwd, which itself defaults to the
// workspace root. A path outside gets the contract's
// "Path is outside workspace root: <p>" (code 403), where <p> is the
// absolute path the request leads to (its real path when it exists, as the
// reference server reports it).
//
// # command_exec and the sandbox
//
// Utility commands are the embedder's own terminal commands, typed by the
// person using the embedding application, not commands chosen by a model.
// They run as that user would run them in a terminal: not inside the Bash
// tool's sandbox (internal/sandbox), with the Maestro process environment
// overlaid by the request's env, but always with a working directory
// inside the workspace. This is the house rule's "explicit, logged decision
// not to" sandbox: the Manager logs it once, at the first command it
// starts. Each command runs in a new session (so a new process group);
// terminate signals the whole group: SIGTERM, then SIGKILL after
// Config.KillGrace, or SIGKILL at once when forced. Close kills every group
// still running.
//
// Shell mode runs `$SHELL -c <command>` (falling back to /bin/bash, then
// sh from PATH). Direct mode splits the command line into argv the way a
// POSIX shell splits words, without any expansion: whitespace separates
// words; single quotes keep everything literally; inside double quotes and
// outside quotes a backslash makes the next character literal. Operators
// such as |, ; or $ are ordinary characters.
//
// Pipe mode reports stdout and stderr as separate streams; pty mode runs
// the command on a pseudo-terminal (80×24 unless columns/rows are given;
// TERM=xterm-256color unless the environment sets TERM) and reports all of
// its output on stdout. Output is UTF-8 text, streamed as it is read, never
// splitting a character between two messages (invalid bytes become U+FFFD).
// In pty mode, stdin with eof:true sends the terminal's end-of-file
// character (Ctrl-D; twice when the content does not end a line).
//
// # file_search
//
// utility_file_search ranks file names against a query the way the
// reference (TypeScript) server does. Candidates are the files below cwd
// that `rg --files` would list: regular files only (no symbolic links),
// hidden files and directories skipped, and entries ignored by .gitignore
// files (those of cwd's ancestors inside the workspace too, and
// .git/info/exclude) left out. Every candidate is scored; the reference
// server scores only the first max(limit×40, 1000) files its file lister
// returns, which makes its results depend on listing order. The query is
// trimmed (empty: no results) and compared case-insensitively with the
// path relative to cwd (slash-separated) and with its last element, first
// rule that applies:
//
//	base name equals the query           10000 − len(path)
//	path equals the query                 9500 − len(path)
//	base name starts with the query       8000 − len(path)
//	base name contains the query          7000 − 10·index − len(path)
//	path contains the query               6000 − 10·index − len(path)
//	query has several whitespace-separated
//	  tokens, each in the base name or path 5000 − len(path)
//	query is a subsequence of the base name 3000 + s − len(path)
//	query is a subsequence of the path      2000 + s − len(path)
//
// where s sums, for each query character, 12 − min(10, gap) with gap the
// number of characters skipped before it matched (at least 1 in all). A file
// matching no rule is left out. Lengths and indexes count UTF-16 code units
// as the reference does (for ASCII, bytes); the subsequence gap counts
// characters. Results are sorted by score (highest first), then shorter
// path, then path in byte order, and cut at limit (default 50, clamped to
// 1..500); truncated says that more files matched.
//
// Cost: once more files matched than the limit (so truncated is settled),
// a file or a whole directory whose best possible score (its rule's base
// score minus the path's length) is below the worst match kept is skipped
// unscored. From the workspace file index, the files are scored rule by
// rule, best first (names equal to the query, then starting with it,
// containing it, the others), each pass breadth-first, so that the high
// scores are met early; the characters each name and each directory's
// names hold (kept by the index as bit masks) pass over most names without
// reading them. The results are the same as scoring every candidate
// (TestFileSearchTopMatchesFullRanking, TestFileSearchIndexPassesMatchWalk).
//
// # file_read
//
// utility_file_read reads a text file of at most MaxReadBytes (2 MiB);
// a NUL byte in its first 2048 bytes marks it as binary and refused. The
// file is opened without blocking and judged on the opened descriptor:
// anything but a regular file (a FIFO, a device) is refused at once with
// "Not a regular file: p (a FIFO)".
// CRLF line ends become LF; a final newline does not start another line.
// offset is a 1-based line (default 1, values below 1 read from 1), limit
// a number of lines (default 400, clamped to 1..2000).
//
// # Errors
//
// Every error repeats at most a bounded prefix of what the client sent
// (workspace.Excerpt: 256 bytes, then the length).
//
// # file_watch
//
// utility_file_watch_start watches a directory tree (default: the
// workspace root) with fsnotify, adding watches for directories created
// later; the entries of a new directory are reported as created too, so
// that a tree made at once (mkdir -p a/b && touch a/b/f) is seen whole.
// Patterns are matched against the path relative to the watch root with
// gitignore.Glob (`*`, `?`, `[...]`, `**` across directories, no braces;
// dotfiles are matched by `*`). Exclusions always include the reference
// server's defaults (**/node_modules/**, **/.git/**, **/dist/**,
// **/build/**, **/.next/**, **/.nuxt/**, **/coverage/**, **/*.log,
// **/.DS_Store, **/thumbs.db); a directory whose whole content is excluded
// is not watched at all. With include patterns, only paths matching one
// are reported. Events for one path within debounce_ms (default 100) are
// merged into one: created then modified is create, modified then deleted
// is delete, created then deleted is nothing, deleted (or renamed away)
// then created is modify. A rename is reported as rename for the old path
// and create for the new one. Attribute-only changes are not reported.
package utility

package postgres

import "database/sql"

// CompleteManyQueries are CompleteMany's statements (JobCompleteManyAtomic,
// JobCompleteManyLeases), for plan tests.
var CompleteManyQueries = []string{newQueries().JobCompleteManyAtomic, newQueries().JobCompleteManyLeases}

// StartManyQuery is StartMany's statement, for plan tests.
var StartManyQuery = newQueries().JobStartManyAtomic

// SQLDB is the store's connection pool.
func SQLDB(s *Store) *sql.DB { return s.db }

// Channel is the store's NOTIFY channel.
func Channel(s *Store) string { return s.lis.channel }

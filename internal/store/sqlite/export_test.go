package sqlite

import "database/sql"

// Pools exposes the writer and reader pools to tests.
func (s *Store) Pools() (writer, reader *sql.DB) { return s.writer, s.reader }

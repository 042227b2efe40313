// Package piecetest holds piece definitions that the tests of several
// packages (the engine's library, the CLI's pieces commands) load.
package piecetest

// Notes is a valid one-movement piece named "notes" that may write files
// (docs/pieces.md describes the format).
const Notes = `name: notes
description: Keep notes.
max_movements: 2
initial_movement: write
movements:
  - name: write
    edit: true
    persona: You write notes.
    instruction: Write the notes.
    allowed_tools: [Write]
    rules: []
`

-- Every version of each stored piece (issue 18: the studio's diff against
-- any earlier version). A row is written with the piece's own row on
-- create and on every update, so the latest row equals the piece; deleting
-- the piece deletes its history. Pieces stored before this migration start
-- their history at their current version.
CREATE TABLE piece_versions (
    name       text        NOT NULL,
    version    bigint      NOT NULL CHECK (version >= 1),
    yaml       text        NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (name, version)
);

INSERT INTO piece_versions (name, version, yaml, created_at)
SELECT name, version, yaml, updated_at FROM pieces;

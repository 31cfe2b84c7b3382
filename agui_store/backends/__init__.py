"""The storage backends: one package per database, each whole (connection, schema,
migrations, SQL, error translation), and what they share: the error rules every backend
applies alike and the named queries both SQL backends run."""

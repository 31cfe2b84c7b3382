"""The store in another shape, written to files: a datasette database
(:mod:`~agui_store.exports.analysis`), the compacted-message-snapshot artifact
(:mod:`~agui_store.exports.artifact`), slimmer views of a checkout
(:mod:`~agui_store.exports.slim`), and where an export may write
(:mod:`~agui_store.exports.targets`: never over the store, never over a database)."""

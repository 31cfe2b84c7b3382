"""The store's logic, written once over the storage port (:mod:`agui_store.engine.port`):
intake, lineage placement, derivation and checkpoints, the read paths, revisions and
``check()``. No SQL and no driver here: the backends implement the port."""

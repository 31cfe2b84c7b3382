"""The facade's verbs, one module per concern, which :class:`agui_store.store.Store` is
composed of: appends (``appends``), reads (``reads``), search (``search``), lineage
(``lineage``), erasure (``erasure``) and the archive (``archive``), over what they share
(``base``). Each verb checks its arguments, opens a transaction through the store's doors
and hands one call to the engine; the facade names no backend.

Not a public interface: every verb is ``Store``'s, and is documented there.
"""

"""The store's rules on plain values, no storage: how a run's view is restored from its
lineage, inputs normalized, resent request bodies read, content hashed and views compared."""

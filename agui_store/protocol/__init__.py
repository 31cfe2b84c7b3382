"""The official client's behaviour in Python: the AG-UI event model and its validation,
JavaScript's reading of JSON values, JSON Patch, the reducer, the sequence verifier and event
compaction. Pure, and checked against ``@ag-ui/client`` by the differential tests."""

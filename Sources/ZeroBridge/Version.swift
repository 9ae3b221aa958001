/// The version of the ZeroBridge libraries (semantic versioning), the same as the Python and Node peers'.
///
/// The single source is the file `VERSION` at the top of the repository; `examples/adopt/test_versions.py`
/// (run by `make test`) fails when this constant says otherwise.
public let zeroBridgeVersion = "2.0.0"

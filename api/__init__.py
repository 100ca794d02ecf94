"""The HTTP service and the ``jetpredict`` command line."""
